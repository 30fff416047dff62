// The inference server and its clients (see serving.h).
#include "loom/engine/serving.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>

#include "loom/engine/checkpoint.h"
#include "loom/engine/model.h"
#include "loom/engine/tensor.h"

namespace loom::engine {
namespace {

using trace::EventKind;
using trace::Stream;

// How long a rank sleeps when nothing is due: short against any sensible timeout, long
// enough that three ranks polling on two cores leave the cores to the forward passes.
constexpr std::int64_t kPollNs = 100'000;

struct RequestMessage {
  std::int64_t id = 0;
  std::int64_t sample = 0;  // index into the test set
  std::int64_t done = 0;    // 1: the client sends nothing more (every reply received)
  std::int64_t unused = 0;
};
struct ReplyMessage {
  std::int64_t id = 0;
  std::int64_t batch = 0;
  std::int32_t predicted = 0;
  std::int32_t batch_size = 0;
};
static_assert(sizeof(RequestMessage) == 32 && sizeof(ReplyMessage) == 24);

double ms_between(std::int64_t from_ns, std::int64_t to_ns) { return double(to_ns - from_ns) * 1e-6; }

void sleep_at_most(std::int64_t ns) {
  std::this_thread::sleep_for(std::chrono::nanoseconds(std::clamp<std::int64_t>(ns, 1'000, kPollNs)));
}

// A message event over [start, end] on the host stream, matched to its other end by
// (peer, message = request id) for the timeline's arrows.
void record_message(trace::Recorder* recorder, EventKind kind, std::int64_t start, std::int64_t end, int peer,
                    std::int64_t id, std::int64_t bytes) {
  if (!recorder) return;
  trace::Event e = trace::span_event(kind, Stream::Host, -1, -1, -1, bytes);
  e.start_ns = start;
  e.end_ns = std::max(start, end);
  e.peer = peer;
  e.message = static_cast<std::int32_t>(id);
  recorder->record(e);
}

int argmax(const float* row, std::int64_t n) { return int(std::max_element(row, row + n) - row); }

}  // namespace

// ---- server -----------------------------------------------------------------------

struct InferenceServer::State {
  struct Queued {
    RequestMessage request;
    int client = 0;
    std::int64_t arrived_ns = 0;
    std::int64_t run_delay_ns = -1;  // the server thread's run delay at arrival (schedstat)
  };
  struct Outgoing {
    std::unique_ptr<ReplyMessage> reply;  // stays put while the send is in flight
    std::unique_ptr<comm::Request> request;
  };

  State(const Plan& p, const ModelInfo& info, const data::Dataset& t, trace::Recorder* r, comm::Communicator* c,
        kernels::Backend& b)
      : plan(p), serve(*p.serve), test(t), recorder(r), comm(c), model(Model::build(p, info, b)), input(b), logits(b) {}

  Status post_receive(int client) {
    receiving[std::size_t(client)] = comm->irecv(&inbox[std::size_t(client)], sizeof(RequestMessage), client, kServeRequestTag);
    return {};
  }
  Status poll_requests();
  void reap_sends(bool wait_all);
  Status run_batch();
  void forward_batch(std::int64_t n, std::int64_t batch, std::vector<int>& predicted, std::int64_t& correct);
  void record_idle(std::int64_t from, std::int64_t to);

  const Plan& plan;
  const ServeSpec& serve;
  const data::Dataset& test;
  trace::Recorder* recorder;
  comm::Communicator* comm;
  Model model;
  std::vector<RequestMessage> inbox;                       // per client rank
  std::vector<std::unique_ptr<comm::Request>> receiving;   // per client rank; null once it is done
  std::deque<Queued> queue;
  std::deque<Outgoing> sending;
  std::vector<trace::MetricRecord> metrics;
  Tensor input, logits;
  std::int64_t batches = 0;
  int open_clients = 0;
};

Status InferenceServer::State::poll_requests() {
  for (int client = 1; client < comm->size(); ++client) {
    auto& pending = receiving[std::size_t(client)];
    if (!pending) continue;
    const std::int64_t polled = trace::now_ns();
    if (!pending->test()) continue;
    LOOM_TRY(pending->wait());
    const RequestMessage message = inbox[std::size_t(client)];
    const std::int64_t arrived = trace::now_ns();
    if (message.done) {
      pending.reset();
      --open_clients;
      continue;
    }
    record_message(recorder, EventKind::Recv, polled, arrived, client, message.id, sizeof(RequestMessage));
    queue.push_back({message, client, arrived, trace::thread_run_delay_ns()});
    LOOM_TRY(post_receive(client));
  }
  return {};
}

void InferenceServer::State::reap_sends(bool wait_all) {
  while (!sending.empty() && (wait_all || sending.front().request->test())) {
    (void)sending.front().request->wait();
    sending.pop_front();
  }
}

void InferenceServer::State::record_idle(std::int64_t from, std::int64_t to) {
  if (!recorder || to <= from) return;
  trace::Event e = trace::span_event(EventKind::Idle, Stream::Compute, std::int32_t(batches), -1, -1, 0);
  e.start_ns = from;
  e.end_ns = to;
  recorder->record(e);
}

void InferenceServer::State::forward_batch(std::int64_t n, std::int64_t batch, std::vector<int>& predicted,
                                           std::int64_t& correct) {
  trace::Span span(recorder, EventKind::Step, Stream::Compute, std::int32_t(batch));
  input.resize(n, test.sample_shape);
  float* host_input = input.data.host_write();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t sample = queue[std::size_t(i)].request.sample;
    std::memcpy(host_input + i * test.sample_size, test.sample(sample), std::size_t(test.sample_size) * sizeof(float));
  }
  input.data.commit();
  Pass pass{false, std::int32_t(batch), -1, 0, 0, recorder};
  model.forward(input, logits, pass);
  const std::int64_t classes = logits.sample_size();
  predicted.resize(std::size_t(n));
  correct = 0;
  const float* host_logits = logits.data.host_read();
  for (std::int64_t i = 0; i < n; ++i) {
    predicted[std::size_t(i)] = argmax(host_logits + i * classes, classes);
    if (predicted[std::size_t(i)] == test.labels[std::size_t(queue[std::size_t(i)].request.sample)]) ++correct;
  }
}

Status InferenceServer::State::run_batch() {
  const std::int64_t n = std::min<std::int64_t>(serve.max_batch, std::int64_t(queue.size()));
  const std::int64_t batch = batches++;
  const std::int64_t start = trace::now_ns();
  const std::int64_t run_delay_at_start = trace::thread_run_delay_ns();
  std::vector<int> predicted;
  std::int64_t correct = 0;
  forward_batch(n, batch, predicted, correct);
  const std::int64_t end = trace::now_ns();
  metrics.push_back({0, batch, start, "batch_size", double(n)});
  metrics.push_back({0, batch, start, "batch_compute_ms", ms_between(start, end)});
  metrics.push_back({0, batch, start, "batch_correct", double(correct)});
  for (std::int64_t i = 0; i < n; ++i) {
    const Queued& q = queue.front();
    metrics.push_back({0, q.request.id, q.arrived_ns, "queue_wait_ms", ms_between(q.arrived_ns, start)});
    metrics.push_back({0, q.request.id, q.arrived_ns, "request_batch", double(batch)});
    // How much of that wait the server spent waiting for a core, not for the batch's turn.
    metrics.push_back({0, q.request.id, q.arrived_ns, "queue_descheduled_ms",
                       trace::descheduled_us(q.run_delay_ns, run_delay_at_start) * 1e-3});
    auto reply = std::make_unique<ReplyMessage>(ReplyMessage{q.request.id, batch, predicted[std::size_t(i)], std::int32_t(n)});
    const std::int64_t sent = trace::now_ns();
    auto request = comm->isend(reply.get(), sizeof(ReplyMessage), q.client, kServeReplyTag);
    record_message(recorder, EventKind::Send, sent, trace::now_ns(), q.client, q.request.id, sizeof(ReplyMessage));
    sending.push_back({std::move(reply), std::move(request)});
    queue.pop_front();
  }
  return {};
}

InferenceServer::InferenceServer(const Plan& plan, const ModelInfo& info, const data::Dataset& test,
                                 trace::Recorder* recorder, comm::Communicator* comm, kernels::Backend& backend)
    : s_(std::make_unique<State>(plan, info, test, recorder, comm, backend)) {}

InferenceServer::~InferenceServer() = default;

Status InferenceServer::load_weights() {
  if (s_->serve.weights.empty()) return {};
  auto tensors = load_params(s_->serve.weights);
  if (!tensors.ok()) return tensors.error();
  const std::vector<Param*>& params = s_->model.params();
  for (Param* p : params) {
    auto found = std::find_if(tensors->begin(), tensors->end(), [p](const NamedTensor& t) { return t.name == p->name; });
    if (found == tensors->end() || found->values.size() != p->value.size()) {
      return make_error(ErrorCode::InvalidArgument,
                        "parameter file '" + s_->serve.weights + "' has no tensor '" + p->name + "' of " +
                            std::to_string(p->value.size()) + " values",
                        "save it from a run of the same model: loom-cli run PLAN --dump-params FILE");
    }
    p->value.assign(found->values);
  }
  return {};
}

Status InferenceServer::serve(const ServeHooks& hooks) {
  State& s = *s_;
  LOOM_TRY(s.comm->barrier());  // with the clients: requests arrive at the plan's rate from the first
  s.inbox.assign(std::size_t(s.comm->size()), RequestMessage{});
  s.receiving.resize(std::size_t(s.comm->size()));
  for (int client = 1; client < s.comm->size(); ++client) LOOM_TRY(s.post_receive(client));
  s.open_clients = s.comm->size() - 1;
  std::int64_t idle_since = trace::now_ns();
  while (s.open_clients > 0) {
    LOOM_TRY(s.poll_requests());
    s.reap_sends(false);
    const std::int64_t now = trace::now_ns();
    const double oldest_wait_ms = s.queue.empty() ? 0.0 : ms_between(s.queue.front().arrived_ns, now);
    if (batch_due(s.serve, std::int64_t(s.queue.size()), oldest_wait_ms)) {
      s.record_idle(idle_since, now);
      LOOM_TRY(s.run_batch());
      if (hooks.on_metrics) hooks.on_metrics(std::move(s.metrics));
      s.metrics.clear();
      idle_since = trace::now_ns();
      continue;
    }
    const std::int64_t until_due =
        s.queue.empty() ? kPollNs : std::int64_t((s.serve.timeout_ms - oldest_wait_ms) * 1e6);
    sleep_at_most(until_due);
  }
  s.record_idle(idle_since, trace::now_ns());
  s.reap_sends(true);
  return {};
}

// ---- client -----------------------------------------------------------------------

namespace {

struct ClientState {
  const Plan& plan;
  const data::Dataset& test;
  trace::Recorder* recorder;
  comm::Communicator* comm;
  // Filled as the client runs: each starts empty (ClientState{plan, test, recorder, comm}).
  int client = 1;
  std::vector<std::int64_t> sent_ns{};  // per request index k
  std::vector<trace::MetricRecord> metrics{};
  ReplyMessage inbox{};
  std::unique_ptr<comm::Request> receiving{};

  std::int64_t request_id(std::int64_t k) const { return k * plan.serve->clients + (client - 1); }
  Status send_request(std::int64_t k) {
    const std::int64_t id = request_id(k);
    const std::int64_t samples = std::max<std::int64_t>(1, test.count());
    RequestMessage message{id, id % samples, 0, 0};
    const std::int64_t start = trace::now_ns();
    sent_ns[std::size_t(k)] = start;
    LOOM_TRY(comm->send(&message, sizeof message, 0, kServeRequestTag));
    record_message(recorder, EventKind::Send, start, trace::now_ns(), 0, id, sizeof message);
    return {};
  }
  Status take_reply(std::int64_t polled) {
    LOOM_TRY(receiving->wait());
    receiving.reset();
    const std::int64_t now = trace::now_ns();
    const std::int64_t k = (inbox.id - (client - 1)) / plan.serve->clients;
    if (inbox.id < 0 || k < 0 || k >= std::int64_t(sent_ns.size()) || request_id(k) != inbox.id) {
      return make_error(ErrorCode::Internal, "client " + std::to_string(client) + ": a reply to unknown request " +
                                                 std::to_string(inbox.id));
    }
    record_message(recorder, EventKind::Recv, polled, now, 0, inbox.id, sizeof inbox);
    metrics.push_back({client, inbox.id, now, "latency_ms", ms_between(sent_ns[std::size_t(k)], now)});
    return {};
  }
};

}  // namespace

Status run_client(const Plan& plan, const data::Dataset& test, trace::Recorder* recorder, comm::Communicator* comm,
                  const ServeHooks& hooks) {
  ClientState c{plan, test, recorder, comm};
  c.client = comm->rank();
  LOOM_TRY(comm->barrier());  // every client starts its clock with the others and the server
  const std::vector<double> due_s = arrival_times_s(*plan.serve, c.client, plan.training.seed);
  const auto total = std::int64_t(due_s.size());
  c.sent_ns.assign(due_s.size(), 0);
  std::int64_t sent = 0, received = 0, last = total;
  const std::int64_t t0 = trace::now_ns();
  while (received < last) {
    // Stopped: send nothing new, but collect the replies owed.
    if (hooks.stop && hooks.stop->load() && last > sent) last = sent;
    const std::int64_t now = trace::now_ns();
    if (sent < last && now >= t0 + std::int64_t(due_s[std::size_t(sent)] * 1e9)) {
      LOOM_TRY(c.send_request(sent++));
      continue;
    }
    // A receive is posted only while a reply is owed, so none is left pending at the end.
    if (!c.receiving && received < sent) c.receiving = comm->irecv(&c.inbox, sizeof c.inbox, 0, kServeReplyTag);
    if (c.receiving && c.receiving->test()) {
      LOOM_TRY(c.take_reply(now));
      ++received;
      if (hooks.on_metrics && c.metrics.size() >= 64) {  // in batches, as a training rank's metrics go
        hooks.on_metrics(std::move(c.metrics));
        c.metrics.clear();
      }
      continue;
    }
    const std::int64_t next_due = sent < last ? t0 + std::int64_t(due_s[std::size_t(sent)] * 1e9) - now : kPollNs;
    sleep_at_most(next_due);
  }
  if (hooks.on_metrics && !c.metrics.empty()) hooks.on_metrics(std::move(c.metrics));
  RequestMessage done{-1, -1, 1, 0};
  return comm->send(&done, sizeof done, 0, kServeRequestTag);
}

}  // namespace loom::engine
