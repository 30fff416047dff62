#include "loom/engine/parameter_server.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <numeric>
#include <thread>

#include "loom/engine/batch.h"
#include "loom/kernels/cpu.h"

namespace loom::engine {
namespace {

using trace::EventKind;
using trace::Span;
using trace::Stream;

enum class RequestType : std::int32_t { Pull = 0, Push = 1, Read = 2, Done = 3 };

struct Request {
  RequestType type = RequestType::Pull;
  std::int32_t reserved = 0;
  std::int64_t step = 0;          // pull: the step about to run; push: the step that produced it
  std::int64_t version_read = 0;  // push: the version its pull read
};
static_assert(sizeof(Request) == 24);

constexpr std::size_t kVersionBytes = sizeof(std::int64_t);
constexpr std::size_t kUpdateBatch = 256;  // updates shipped to the store per hook call

std::vector<std::int64_t> param_sizes(const std::vector<Param*>& params) {
  std::vector<std::int64_t> sizes;
  for (const Param* p : params) sizes.push_back(std::int64_t(p->value.size()));
  return sizes;
}

// A server's tensors in model order.
std::vector<Param*> shard_of(const std::vector<Param*>& params, const std::vector<int>& owner, int server) {
  std::vector<Param*> shard;
  for (std::size_t i = 0; i < params.size(); ++i)
    if (owner[i] == server) shard.push_back(params[i]);
  return shard;
}

std::int64_t shard_floats(const std::vector<Param*>& shard) {
  std::int64_t n = 0;
  for (const Param* p : shard) n += std::int64_t(p->value.size());
  return n;
}

// version + values into `out` (resized), or values out of `in` into the tensors.
void pack_values(std::int64_t version, const std::vector<Param*>& shard, std::vector<char>& out) {
  out.resize(kVersionBytes + std::size_t(shard_floats(shard)) * sizeof(float));
  std::memcpy(out.data(), &version, kVersionBytes);
  char* at = out.data() + kVersionBytes;
  for (const Param* p : shard) {
    p->value.backend().download(at, p->value.data(), p->value.bytes());
    at += p->value.bytes();
  }
}

std::int64_t unpack_values(const std::vector<char>& in, const std::vector<Param*>& shard) {
  std::int64_t version = 0;
  std::memcpy(&version, in.data(), kVersionBytes);
  const char* at = in.data() + kVersionBytes;
  for (Param* p : shard) {
    p->value.backend().upload(p->value.data(), at, p->value.bytes());
    at += p->value.bytes();
  }
  return version;
}

void pack_grads(const std::vector<Param*>& shard, std::vector<float>& out) {
  out.resize(std::size_t(shard_floats(shard)));
  std::size_t at = 0;
  for (const Param* p : shard) {
    p->grad.backend().download(out.data() + at, p->grad.data(), p->grad.bytes());
    at += p->grad.size();
  }
}

void unpack_grads(const std::vector<float>& in, const std::vector<Param*>& shard) {
  std::size_t at = 0;
  for (Param* p : shard) {
    p->grad.backend().upload(p->grad.data(), in.data() + at, p->grad.bytes());
    at += p->grad.size();
  }
}

std::int64_t bytes_of(const std::vector<char>& v) { return std::int64_t(v.size()); }

}  // namespace

bool uses_parameter_server(const Plan& plan) {
  const SyncMode mode = plan.parallel.sync.mode;
  return mode == SyncMode::ParameterServer || mode == SyncMode::Ssp;
}

std::vector<int> shard_params(const std::vector<std::int64_t>& sizes, int servers) {
  std::vector<std::size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return sizes[a] > sizes[b]; });
  std::vector<std::int64_t> load(std::size_t(std::max(servers, 1)), 0);
  std::vector<int> owner(sizes.size(), 0);
  for (std::size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end());
    owner[i] = int(least - load.begin());
    *least += sizes[i];
  }
  return owner;
}

// ---------------------------------------------------------------- server

struct ParameterServer::State {
  const Plan& plan;
  trace::Recorder* recorder;
  comm::Communicator* comm;
  Model model;
  int workers = 1;
  int index = 0;  // server index
  std::vector<Param*> shard;
  std::unique_ptr<Optimizer> optimizer;
  bool ssp = false;
  std::int64_t updates_applied = 0;
  std::vector<std::int64_t> clocks;  // per worker: steps whose gradient was applied
  std::vector<bool> done;
  std::vector<Request> headers;      // per worker: the posted header receive's buffer
  std::vector<std::unique_ptr<comm::Request>> pending;  // per worker: the posted header receive
  struct Pending {
    int worker = 0;
    Request request;
    std::vector<float> gradient;  // pushes only
  };
  std::vector<std::int64_t> pulled;  // per worker: the latest step it has read parameters for
  std::vector<Pending> deferred;     // ssp pulls waiting for the slowest worker
  std::vector<Pending> held;         // ssp pushes waiting until every worker has read their clock
  std::vector<char> reply;
  std::vector<trace::UpdateRecord> updates;
  std::string checkpoint_dir;        // empty: no checkpoints
  std::int64_t total_steps = 0;
  std::int64_t last_saved = 0;       // the clock of the newest checkpoint (or the resumed one)

  State(const Plan& p, const ModelInfo& info, trace::Recorder* r, comm::Communicator* c, kernels::Backend& b)
      : plan(p), recorder(r), comm(c), model(Model::build(p, info, b)) {}

  // parameter_server: gradients applied; ssp: the slowest unfinished worker's clock.
  std::int64_t version() const {
    if (!ssp) return updates_applied;
    std::int64_t slowest = -1;
    for (int w = 0; w < workers; ++w)
      if (!done[std::size_t(w)] && (slowest < 0 || clocks[std::size_t(w)] < slowest)) slowest = clocks[std::size_t(w)];
    return slowest < 0 ? *std::max_element(clocks.begin(), clocks.end()) : slowest;
  }
  bool may_serve(const Request& r) const {
    return !ssp || r.type == RequestType::Read || version() >= r.step - plan.parallel.sync.bound;
  }
  void post_header(int worker) {
    pending[std::size_t(worker)] =
        comm->irecv(&headers[std::size_t(worker)], sizeof(Request), worker, kRequestTag);
  }
  Status reply_to(int worker, const Request& r) {
    if (r.type == RequestType::Pull) pulled[std::size_t(worker)] = std::max(pulled[std::size_t(worker)], r.step);
    const std::int64_t v = version();
    pack_values(v, shard, reply);
    Span span(recorder, EventKind::Send, Stream::Host, std::int32_t(r.step), -1, -1, bytes_of(reply));
    span.event().peer = worker;
    span.event().message = std::int32_t(v);
    return comm->send(reply.data(), bytes_of(reply), worker, kParamsTag);
  }
  Status receive_push(int worker, const Request& r, std::vector<float>& gradient) {
    gradient.resize(std::size_t(shard_floats(shard)));
    const auto bytes = std::int64_t(gradient.size() * sizeof(float));
    Span span(recorder, EventKind::Recv, Stream::Host, std::int32_t(r.step), -1, -1, bytes);
    span.event().peer = worker;
    span.event().message = std::int32_t(r.version_read);
    return comm->recv(gradient.data(), bytes, worker, kGradientTag);
  }
  std::int64_t slowest_clock() const { return *std::min_element(clocks.begin(), clocks.end()); }
  Status save_at(std::int64_t clock) {
    std::vector<NamedTensor> tensors = named_copies(shard);
    for (NamedTensor& t : optimizer->state()) tensors.push_back(std::move(t));
    last_saved = clock;
    return save_rank_checkpoint(checkpoint_dir, plan, comm->rank(), comm->size(), clock, updates_applied,
                                std::move(tensors));
  }
  // Saved the moment the slowest worker's clock reaches a multiple of checkpoint_every:
  // with ssp bound 0 no gradient of a later clock has been applied yet, so the shard is
  // exactly the synchronous parameters after that many steps. (parameter_server: faster
  // workers' later gradients are in it already; resumed, they compute those steps again.)
  Status maybe_checkpoint() {
    const std::int64_t every = plan.training.checkpoint_every, clock = slowest_clock();
    if (checkpoint_dir.empty() || every <= 0 || clock % every != 0 || clock <= last_saved || clock >= total_steps)
      return {};
    return save_at(clock);
  }
  Status apply(int worker, const Request& r, const std::vector<float>& gradient) {
    const std::int64_t before = version();
    const std::int64_t staleness = std::max<std::int64_t>(0, before - r.version_read);
    unpack_grads(gradient, shard);
    {
      Span span(recorder, EventKind::Optimizer, Stream::Compute, std::int32_t(r.step));
      const bool aware = plan.parallel.sync.staleness_aware_lr && staleness > 0;
      optimizer->step(aware ? 1.0f / float(staleness) : 1.0f);
      optimizer->wait();  // the server has no stamps: its host-timed span covers the update
    }
    ++updates_applied;
    clocks[std::size_t(worker)] = std::max(clocks[std::size_t(worker)], r.step + 1);
    updates.push_back({worker, index, r.step, r.version_read, before, staleness, trace::now_ns()});
    return maybe_checkpoint();
  }
  // ssp: a gradient of step c is applied only once every unfinished worker has read its
  // step-c parameters, so a read for clock c never contains gradients of clock c or later
  // (with bound 0 every worker of a clock reads the same parameters: synchronous SGD).
  bool may_apply(std::int64_t step) const {
    if (!ssp) return true;
    for (int w = 0; w < workers; ++w)
      if (!done[std::size_t(w)] && pulled[std::size_t(w)] < step) return false;
    return true;
  }
  // Applies what may be applied and answers what may be answered, until neither moves.
  Status settle() {
    for (bool moved = true; moved;) {
      moved = false;
      for (std::size_t i = 0; i < held.size();) {
        if (!may_apply(held[i].request.step)) {
          ++i;
          continue;
        }
        LOOM_TRY(apply(held[i].worker, held[i].request, held[i].gradient));
        held.erase(held.begin() + std::ptrdiff_t(i));
        moved = true;
      }
      for (std::size_t i = 0; i < deferred.size();) {
        if (!may_serve(deferred[i].request)) {
          ++i;
          continue;
        }
        LOOM_TRY(reply_to(deferred[i].worker, deferred[i].request));
        deferred.erase(deferred.begin() + std::ptrdiff_t(i));
        moved = true;
      }
    }
    return {};
  }
  Status handle(int worker, const Request& r) {
    switch (r.type) {
      case RequestType::Pull:
      case RequestType::Read:
        deferred.push_back({worker, r, {}});
        break;
      case RequestType::Push:
        held.push_back({worker, r, {}});
        LOOM_TRY(receive_push(worker, r, held.back().gradient));
        break;
      case RequestType::Done: done[std::size_t(worker)] = true; break;
      default:
        return make_error(ErrorCode::Internal, "parameter server: unknown request from rank " + std::to_string(worker));
    }
    return settle();
  }
};

ParameterServer::ParameterServer(const Plan& plan, const ModelInfo& info, trace::Recorder* recorder,
                                 comm::Communicator* comm, kernels::Backend& backend)
    : s_(std::make_unique<State>(plan, info, recorder, comm, backend)) {
  State& s = *s_;
  s.workers = plan.parallel.data_parallel;
  s.index = comm->rank() - s.workers;
  s.shard = shard_of(s.model.params(), shard_params(param_sizes(s.model.params()), plan.parallel.sync.servers), s.index);
  s.optimizer = std::make_unique<Optimizer>(plan.training.optimizer, s.shard);
  s.ssp = plan.parallel.sync.mode == SyncMode::Ssp;
  s.clocks.assign(std::size_t(s.workers), 0);
  s.done.assign(std::size_t(s.workers), false);
  s.pulled.assign(std::size_t(s.workers), -1);
  s.headers.resize(std::size_t(s.workers));
  s.pending.resize(std::size_t(s.workers));
}

ParameterServer::~ParameterServer() = default;

// Polls one posted header receive per worker. A blocking receive from any source would
// need MPI_ANY_SOURCE, which the communicator does not offer, and Open MPI's blocking
// calls spin: a short sleep when nothing arrived leaves the cores to the workers.
Status ParameterServer::serve(const UpdateHook& on_updates) {
  State& s = *s_;
  cpu::flush_denormals_on_this_thread();
  for (int w = 0; w < s.workers; ++w) s.post_header(w);
  int finished = 0;
  while (finished < s.workers || !s.deferred.empty() || !s.held.empty()) {
    bool any = false;
    for (int w = 0; w < s.workers; ++w) {
      auto& request = s.pending[std::size_t(w)];
      if (!request || !request->test()) continue;
      LOOM_TRY(request->wait());
      any = true;
      const Request header = s.headers[std::size_t(w)];
      LOOM_TRY(s.handle(w, header));
      if (header.type == RequestType::Done) {
        request.reset();
        ++finished;
      } else {
        s.post_header(w);
      }
    }
    if (on_updates && s.updates.size() >= kUpdateBatch) on_updates(std::exchange(s.updates, {}));
    if (!any) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  if (on_updates && !s.updates.empty()) on_updates(std::exchange(s.updates, {}));
  // Workers that stopped early (each at its own step) can resume from the clock they all
  // reached, where every one of them saved too if they stopped together.
  const std::int64_t clock = s.slowest_clock();
  if (!s.checkpoint_dir.empty() && clock < s.total_steps && clock > s.last_saved) return s.save_at(clock);
  return {};
}

void ParameterServer::set_checkpoints(std::string run_dir, std::int64_t total_steps) {
  s_->checkpoint_dir = std::move(run_dir);
  s_->total_steps = total_steps;
}

Status ParameterServer::resume_from(const std::string& step_dir) {
  State& s = *s_;
  auto c = load_matching_checkpoint(checkpoint_file(step_dir, s.comm->rank()), s.plan);
  if (!c.ok()) return c.error();
  std::map<std::string, const std::vector<float>*> found;
  for (const NamedTensor& t : c->tensors) found.emplace(t.name, &t.values);
  LOOM_TRY(restore_params(s.shard, found, step_dir, "resume with the run's own model and servers"));
  LOOM_TRY(s.optimizer->restore(found, c->optimizer_steps));
  s.updates_applied = c->optimizer_steps;
  s.clocks.assign(s.clocks.size(), c->step);  // every worker resumes at this step
  s.pulled.assign(s.pulled.size(), c->step - 1);
  s.last_saved = c->step;
  return {};
}

Status ParameterServer::send_final_params() {
  State& s = *s_;
  pack_values(s.version(), s.shard, s.reply);
  return s.comm->send(s.reply.data(), bytes_of(s.reply), 0, kFinalParamsTag);
}

// ---------------------------------------------------------------- worker

AsyncWorker::AsyncWorker(const Plan& plan, const ModelInfo& info, const data::TrainTest& data,
                         trace::Recorder* recorder, comm::Communicator* comm, kernels::Backend& backend)
    : TrainingLoop(plan, data, recorder, comm, backend),
      model_(Model::build(plan, info, backend)),
      workers_(plan.parallel.data_parallel),
      servers_(plan.parallel.sync.servers),
      version_read_(std::size_t(servers_), 0),
      straggler_(plan, comm ? comm->rank() : 0),
      input_(backend),
      logits_(backend),
      dlogits_(backend),
      probs_(backend),
      labels_(backend) {
  const std::vector<int> owner = shard_params(param_sizes(model_.params()), servers_);
  for (int s = 0; s < servers_; ++s) {
    shards_.push_back(shard_of(model_.params(), owner, s));
    replies_.emplace_back(kVersionBytes + std::size_t(shard_floats(shards_.back())) * sizeof(float));
  }
}

AsyncWorker::~AsyncWorker() = default;

// Every server's tensors into the model; the time blocked (servers busy, or an ssp bound
// holding this worker back) is a Wait span.
Status AsyncWorker::pull(std::int32_t request_type, std::int64_t step) {
  std::vector<std::unique_ptr<comm::Request>> receives;
  for (int s = 0; s < servers_; ++s) {
    std::vector<char>& reply = replies_[std::size_t(s)];
    receives.push_back(comm_->irecv(reply.data(), bytes_of(reply), workers_ + s, kParamsTag));
  }
  const Request header{RequestType(request_type), 0, step, 0};
  for (int s = 0; s < servers_; ++s) LOOM_TRY(comm_->send(&header, sizeof header, workers_ + s, kRequestTag));
  Span wait(recorder_, EventKind::Wait, waiting_stream(device_trace_.get()), std::int32_t(step));
  for (int s = 0; s < servers_; ++s) {
    Span span(recorder_, EventKind::Pull, Stream::Host, std::int32_t(step), -1, -1, bytes_of(replies_[std::size_t(s)]));
    span.event().peer = workers_ + s;
    LOOM_TRY(receives[std::size_t(s)]->wait());
    const std::int64_t version = unpack_values(replies_[std::size_t(s)], shards_[std::size_t(s)]);
    span.event().message = std::int32_t(version);
    if (RequestType(request_type) == RequestType::Pull) version_read_[std::size_t(s)] = version;
  }
  return {};
}

Status AsyncWorker::push(std::int64_t step) {
  for (int s = 0; s < servers_; ++s) {
    pack_grads(shards_[std::size_t(s)], gradient_);
    const std::int64_t bytes = std::int64_t(gradient_.size() * sizeof(float));
    Span span(recorder_, EventKind::Push, Stream::Host, std::int32_t(step), -1, -1, bytes);
    span.event().peer = workers_ + s;
    span.event().message = std::int32_t(version_read_[std::size_t(s)]);
    const Request header{RequestType::Push, 0, step, version_read_[std::size_t(s)]};
    LOOM_TRY(comm_->send(&header, sizeof header, workers_ + s, kRequestTag));
    LOOM_TRY(comm_->send(gradient_.data(), bytes, workers_ + s, kGradientTag));
  }
  return {};
}

Expected<TrainingLoop::StepStats> AsyncWorker::train_step(std::int64_t step, const std::vector<std::int64_t>& order,
                                                          std::int64_t batch_in_epoch, bool stop_requested) {
  Span step_span(recorder_, EventKind::Step, Stream::Host, std::int32_t(step));
  StepStats stats;
  stats.stop = stop_requested;
  LOOM_TRY(pull(std::int32_t(RequestType::Pull), step));
  const std::int64_t compute_start = trace::now_ns();
  model_.zero_grad();
  const auto slice = chunk_of_batch(batch_in_epoch, rank_, workers_);
  {
    BatchLoadSpan span(recorder_, device_trace_.get(), std::int32_t(step));
    load_batch(data_.train, order, slice, input_, labels_, &span);
  }
  Pass pass{true, std::int32_t(step), -1, plan_.training.seed, first_sample(step, batch_in_epoch, slice), recorder_,
            nullptr};
  pass.device_trace = device_trace_.get();
  model_.forward(input_, logits_, pass);
  {
    ComputeSpan span(recorder_, device_trace_.get(), EventKind::Loss, std::int32_t(step));
    // 1/global batch: the W workers' gradients of one clock add up to the full batch's.
    const LossResult loss = softmax_xent(logits_, labels_, probs_, &dlogits_, 1.0f / float(plan_.training.batch));
    stats.loss = loss.loss;
    stats.correct = loss.correct;
    stats.samples = slice.size;
  }
  model_.backward(input_, logits_, dlogits_, pass);
  // A device's compute ends when its queue drains, not when the host has queued it.
  if (straggler_.active()) backend_.synchronize();
  straggler_.inject(std::int32_t(step), trace::now_ns() - compute_start, recorder_);
  LOOM_TRY(push(step));
  return stats;
}

// Worker 0 evaluates the servers' current parameters (a read: no clock, never held back).
Expected<std::optional<Evaluation>> AsyncWorker::evaluate_due() {
  if (rank_ != 0) return std::optional<Evaluation>{};
  Span part(recorder_, EventKind::Evaluate, Stream::Host, -1);  // the read and the pass: not training
  LOOM_TRY(pull(std::int32_t(RequestType::Read), -1));
  return std::optional<Evaluation>{evaluate()};
}

Evaluation AsyncWorker::evaluate() {
  return evaluate_model(model_, data_.test, test_batches(), test_order(), recorder_);
}

void AsyncWorker::finish(const TrainerHooks&, std::int64_t) {
  if (done_sent_) return;
  done_sent_ = true;
  const Request header{RequestType::Done, 0, 0, 0};
  for (int s = 0; s < servers_; ++s) (void)comm_->send(&header, sizeof header, workers_ + s, kRequestTag);
}

Expected<std::vector<NamedTensor>> AsyncWorker::gather_params() {
  if (rank_ != 0) return std::vector<NamedTensor>{};
  for (int s = 0; s < servers_; ++s) {
    std::vector<char>& reply = replies_[std::size_t(s)];
    LOOM_TRY(comm_->recv(reply.data(), bytes_of(reply), workers_ + s, kFinalParamsTag));
    unpack_values(reply, shards_[std::size_t(s)]);
  }
  return named_copies(model_.params());
}

}  // namespace loom::engine
