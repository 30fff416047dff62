// One pipeline stage's training step (see pipeline_trainer.h).
#include "loom/engine/pipeline_trainer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "loom/engine/batch.h"
#include "loom/engine/message_tags.h"

namespace loom::engine {
namespace {

using trace::EventKind;
using trace::Span;
using trace::Stream;

constexpr int kMaxChannels = 128;  // values and edges per model that message ids can name

int forward_tag(int value) { return kPipelineTagBase + 2 * value; }
int backward_tag(int edge) { return kPipelineTagBase + 2 * edge + 1; }

StageGraph graph_or_throw(const Plan& plan, const ModelInfo& info) {
  auto graph = build_stage_graph(plan, info);
  if (!graph.ok()) throw std::invalid_argument(graph.error().describe());
  return std::move(*graph);
}

RankRole worker_role_or_throw(const Plan& plan, int rank) {
  const RankRole role = rank_role(plan, rank);
  if (role.kind != RankKind::Worker) {
    throw std::invalid_argument("rank " + std::to_string(rank) + " has no pipeline stage in plan '" + plan.name + "'");
  }
  return role;
}

// Bytes of the saved activations of rows [first, first + count) of the model, per sample.
std::int64_t row_activation_bytes(const ModelInfo& info, std::size_t first, std::size_t count) {
  std::int64_t bytes = 0;
  for (std::size_t r = first; r < first + count && r < info.layers.size(); ++r) {
    bytes += shape_elements(info.layers[r].output) * std::int64_t(sizeof(float));
  }
  return bytes;
}

void append_bytes(std::vector<char>& out, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  out.insert(out.end(), p, p + size);
}

// A parameter travelling to rank 0 for gather_params, with its layer to restore model order.
struct ParamRecord {
  std::int32_t layer = 0;
  NamedTensor tensor;
};

std::vector<char> serialize(const std::vector<Param*>& params) {
  std::vector<char> out;
  for (const Param* p : params) {
    const std::int32_t name_size = std::int32_t(p->name.size());
    const std::int64_t count = std::int64_t(p->value.size());
    append_bytes(out, &p->layer, sizeof p->layer);
    append_bytes(out, &name_size, sizeof name_size);
    append_bytes(out, p->name.data(), p->name.size());
    append_bytes(out, &count, sizeof count);
    const std::vector<float> values = p->value.to_host();
    append_bytes(out, values.data(), values.size() * sizeof(float));
  }
  return out;
}

std::vector<ParamRecord> deserialize(const std::vector<char>& in) {
  std::vector<ParamRecord> out;
  std::size_t at = 0;
  auto read = [&](void* dst, std::size_t size) {
    std::memcpy(dst, in.data() + at, size);
    at += size;
  };
  while (at < in.size()) {
    ParamRecord record;
    std::int32_t name_size = 0;
    std::int64_t count = 0;
    read(&record.layer, sizeof record.layer);
    read(&name_size, sizeof name_size);
    record.tensor.name.assign(in.data() + at, std::size_t(name_size));
    at += std::size_t(name_size);
    read(&count, sizeof count);
    record.tensor.values.resize(std::size_t(count));
    read(record.tensor.values.data(), std::size_t(count) * sizeof(float));
    out.push_back(std::move(record));
  }
  return out;
}

}  // namespace

// Keeps pending sends moving while the training thread computes. With shared memory and
// no single-copy mechanism (how loom-cli runs Open MPI in containers), a message larger
// than the eager limit moves only while the sender is inside an MPI call: without this a
// stage's activations left only when it next blocked, and the stages ran one after the
// other (bench/pipeline_bench.py measured a 50% bubble for every M). Polls every ~20 us
// and sleeps when nothing is pending; needs a communicator that allows concurrent threads.
class PipelineTrainer::SendProgress {
 public:
  SendProgress() : thread_([this] { loop(); }) {}
  ~SendProgress() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void watch(comm::Request* request) {
    {
      std::lock_guard lock(mutex_);
      watched_.push_back(request);
    }
    wake_.notify_all();
  }
  // Before the owner waits for or destroys them: only one thread may touch a request.
  void forget(const std::vector<std::unique_ptr<comm::Request>>& requests) {
    std::lock_guard lock(mutex_);
    for (const auto& r : requests) watched_.erase(std::remove(watched_.begin(), watched_.end(), r.get()), watched_.end());
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      if (watched_.empty()) {
        wake_.wait(lock, [this] { return stopping_ || !watched_.empty(); });
        continue;
      }
      watched_.erase(std::remove_if(watched_.begin(), watched_.end(), [](comm::Request* r) { return r->test(); }),
                     watched_.end());
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<comm::Request*> watched_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

bool uses_pipeline(const Plan& plan) { return plan.parallel.stages > 1 || plan.parallel.microbatches > 1; }

// What one micro-batch keeps between its forward and its backward, plus the pending sends
// that still read its buffers.
struct PipelineTrainer::Slot {
  std::vector<Tensor> values;                      // by value id
  std::vector<char> have;                          // by value id: present for this micro-batch
  std::vector<std::vector<Tensor>> contributions;  // [unit][input]: gradient that unit sends its input
  std::vector<Tensor> gradient_sums;               // by value id: several consumers' contributions added
  Tensor probs, dlogits;
  Buffer<std::int32_t> labels;
  std::vector<std::unique_ptr<comm::Request>> sends;
};

PipelineTrainer::PipelineTrainer(const Plan& plan, const ModelInfo& info, const data::TrainTest& data,
                                 trace::Recorder* recorder, comm::Communicator* comm, kernels::Backend& backend)
    : TrainingLoop(plan, data, recorder, comm, backend),
      graph_(graph_or_throw(plan, info)),
      optimizer_(plan.training.optimizer, {}) {
  if (graph_.stages > ranks_) throw std::invalid_argument("the plan has more stages than the run has ranks");
  const RankRole role = worker_role_or_throw(plan, rank_);
  stage_ = role.stage;
  replica_ = role.replica;
  if (int(graph_.values.size()) > kMaxChannels) throw std::invalid_argument("the model has too many stage units");
  std::int64_t per_sample_bytes = 0;
  int edges = 0;
  modules_.resize(graph_.units.size());
  for (std::size_t u = 0; u < graph_.units.size(); ++u) {
    const StageUnit& unit = graph_.units[u];
    edge_offset_.push_back(edges);
    edges += int(unit.inputs.size());
    if (unit.stage != stage_) continue;
    my_units_.push_back(int(u));
    if (unit.kind == UnitKind::Layers) {
      modules_[u] = build_layers(unit.layers, info, unit.first_row, plan.training.seed, backend_);
      modules_[u]->collect_params(params_);
      per_sample_bytes += row_activation_bytes(info, unit.first_row, unit.rows);
    } else {
      per_sample_bytes += shape_elements(graph_.values[std::size_t(unit.output)].shape) * std::int64_t(sizeof(float));
    }
    for (int v : unit.inputs) {
      if (graph_.values[std::size_t(v)].stage != stage_) {
        per_sample_bytes += shape_elements(graph_.values[std::size_t(v)].shape) * std::int64_t(sizeof(float));
      }
    }
  }
  if (edges > kMaxChannels) throw std::invalid_argument("the model has too many stage connections");
  needs_input_batch_ = consumes_input_batch();
  for (std::size_t v = 0; v < graph_.values.size(); ++v) remote_stages_.push_back(graph_.remote_consumer_stages(int(v)));
  arena_ = ParamArena::pack(params_, backend_);
  optimizer_ = Optimizer(plan.training.optimizer, params_, &arena_);
  const ParallelSpec& p = plan.parallel;
  const std::int64_t chunks = std::int64_t(p.grad_accumulation) * p.data_parallel * p.microbatches;
  microbatch_activation_bytes_ = per_sample_bytes * (plan.training.batch / std::max<std::int64_t>(chunks, 1));
  if (ranks_ > 1 && comm_->allows_concurrent_threads()) progress_ = std::make_unique<SendProgress>();
  if (p.data_parallel > 1) {
    stage_comm_ = comm_->split(stage_, replica_);
    if (!stage_comm_) throw std::runtime_error("could not split the communicator into per-stage groups");
    if (!params_.empty()) sync_ = std::make_unique<GradientSync>(*stage_comm_, params_, p.bucket_mb, recorder_);
    overlap_sync_ = comm_->allows_concurrent_threads();
  }
}

PipelineTrainer::~PipelineTrainer() = default;

std::int64_t PipelineTrainer::workspace_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& module : modules_)
    if (module) bytes += module->workspace_bytes();
  return bytes;
}

Expected<TrainingLoop::StepStats> PipelineTrainer::train_step(std::int64_t step, const std::vector<std::int64_t>& order,
                                                              std::int64_t batch_in_epoch, bool stop_requested) {
  Span step_span(recorder_, EventKind::Step, Stream::Host, std::int32_t(step));
  message_step_ = std::int32_t(step % 4096);
  arena_.zero_grads();
  StepStats stats;
  stats.stop = stop_requested;
  const int accumulation = plan_.parallel.grad_accumulation;
  for (int flush = 0; flush < accumulation; ++flush) {
    LOOM_TRY(run_flush(step, flush, order, batch_in_epoch, flush + 1 == accumulation, stats));
  }
  stats.loss /= double(plan_.training.batch);
  if (sync_) {
    // Without two busy threads allowed, the all-reduce starts only now, after backward.
    if (!overlap_sync_) sync_->begin_step(std::int32_t(step));
    Span wait(recorder_, EventKind::Wait, waiting_stream(device_trace_.get()), std::int32_t(step));
    LOOM_TRY(sync_->finish_step());
  }
  LOOM_TRY(reduce_stats(stats));
  ComputeSpan span(recorder_, device_trace_.get(), EventKind::Optimizer, std::int32_t(step));
  optimizer_.step();
  return stats;
}

// One pass of the schedule over `microbatches` micro-batches. stats.loss collects
// loss x samples here; train_step divides by the global batch.
Status PipelineTrainer::run_flush(std::int64_t step, int flush, const std::vector<std::int64_t>& order,
                                  std::int64_t batch_in_epoch, bool last_flush, StepStats& stats) {
  const ParallelSpec& p = plan_.parallel;
  const int m_count = p.microbatches;
  const auto ops = stage_schedule(p.schedule, graph_.stages, stage_, m_count);
  const auto last_backward = std::find_if(ops.rbegin(), ops.rend(), [](const PipelineOp& op) { return !op.forward; });
  std::vector<MicroBatch> batches(static_cast<std::size_t>(m_count));
  for (auto it = ops.begin(); it != ops.end(); ++it) {
    MicroBatch& mb = batches[std::size_t(it->microbatch)];
    if (it->forward) {
      mb.index = flush * m_count + it->microbatch;
      mb.slice = chunk_of_batch(batch_in_epoch, (flush * p.data_parallel + replica_) * m_count + it->microbatch,
                                p.grad_accumulation * p.data_parallel * m_count);
      mb.first_sample = first_sample(step, batch_in_epoch, mb.slice);
      mb.slot = acquire_slot();
      LOOM_TRY(wait_sends(*slots_[std::size_t(mb.slot)]));
      max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
      const Pass pass{true, std::int32_t(step), std::int16_t(mb.index), plan_.training.seed, mb.first_sample,
                      recorder_, nullptr, mb.slot, device_trace_.get()};
      LOOM_TRY(forward(mb, data_.train, order, pass, &stats));
    } else {
      // The last backward completes every gradient of this stage: the all-reduce of a
      // bucket may start as soon as backward has left its layers.
      const bool observe = sync_ && overlap_sync_ && last_flush && it == last_backward.base() - 1;
      if (observe) sync_->begin_step(std::int32_t(step));
      const Pass pass{true, std::int32_t(step), std::int16_t(mb.index), plan_.training.seed, mb.first_sample,
                      recorder_, observe ? sync_.get() : nullptr, mb.slot, device_trace_.get()};
      LOOM_TRY(backward(mb, pass));
      release_slot(mb.slot);
      --in_flight_;
    }
  }
  return wait_all_sends();
}

Status PipelineTrainer::forward(const MicroBatch& mb, const data::Dataset& set, const std::vector<std::int64_t>& order,
                                const Pass& pass, StepStats* stats) {
  Slot& slot = *slots_[std::size_t(mb.slot)];
  std::fill(slot.have.begin(), slot.have.end(), 0);
  if (needs_input_batch_) load_batch(set, order, mb, slot, pass);
  for (int u : my_units_) {
    const StageUnit& unit = graph_.units[std::size_t(u)];
    LOOM_TRY(receive_inputs(unit, mb, pass));
    run_unit_forward(u, slot, pass);
    slot.have[std::size_t(unit.output)] = 1;
    for (int stage : remote_stages_[std::size_t(unit.output)]) {
      send(slot.values[std::size_t(unit.output)], stage, forward_tag(unit.output), unit.output, mb, pass);
    }
  }
  if (stage_ == graph_.loss_stage() && stats) {
    const auto [loss, correct] = compute_loss(slot, pass);
    stats->loss += double(loss) * double(mb.slice.size);
    stats->correct += correct;
  }
  return {};
}

Status PipelineTrainer::backward(const MicroBatch& mb, const Pass& pass) {
  Slot& slot = *slots_[std::size_t(mb.slot)];
  for (auto it = my_units_.rbegin(); it != my_units_.rend(); ++it) {
    const Tensor* dy = nullptr;
    LOOM_TRY(gradient_of_output(*it, mb, pass, &dy));
    run_unit_backward(*it, slot, *dy, pass);
    send_input_gradients(*it, mb, pass);
  }
  return {};
}

Status PipelineTrainer::receive_inputs(const StageUnit& unit, const MicroBatch& mb, const Pass& pass) {
  Slot& slot = *slots_[std::size_t(mb.slot)];
  for (int v : unit.inputs) {
    if (v == kModelInput || slot.have[std::size_t(v)]) continue;
    const StageValue& value = graph_.values[std::size_t(v)];
    LOOM_TRY(receive(slot.values[std::size_t(v)], mb.slice.size, value.shape, value.stage, forward_tag(v), v, mb, pass));
    slot.have[std::size_t(v)] = 1;
  }
  return {};
}

// The loss gradient w.r.t. a unit's output: the loss's own for the logits, else the sum
// of what every consumer contributed, in consumer order from zero, as the single-process
// parallel block adds its branches' gradients.
Status PipelineTrainer::gradient_of_output(int unit_index, const MicroBatch& mb, const Pass& pass, const Tensor** dy) {
  Slot& slot = *slots_[std::size_t(mb.slot)];
  const int v = graph_.units[std::size_t(unit_index)].output;
  if (v == graph_.output) {
    *dy = &slot.dlogits;
    return {};
  }
  const StageValue& value = graph_.values[std::size_t(v)];
  std::vector<const Tensor*> parts;
  for (int c : value.consumers) {
    const StageUnit& consumer = graph_.units[std::size_t(c)];
    for (std::size_t i = 0; i < consumer.inputs.size(); ++i) {
      if (consumer.inputs[i] != v) continue;
      Tensor& part = slot.contributions[std::size_t(c)][i];
      const int edge = edge_index(c, int(i));
      if (consumer.stage != stage_) {
        LOOM_TRY(receive(part, mb.slice.size, value.shape, consumer.stage, backward_tag(edge), kMaxChannels + edge,
                         mb, pass));
      }
      parts.push_back(&part);
    }
  }
  if (parts.size() == 1) {
    *dy = parts.front();
    return {};
  }
  Tensor& sum = slot.gradient_sums[std::size_t(v)];
  sum.resize(mb.slice.size, value.shape);
  sum.data.fill(0.0f);
  for (const Tensor* part : parts) backend_.accumulate(sum.ptr(), part->ptr(), sum.size());
  *dy = &sum;
  return {};
}

void PipelineTrainer::run_unit_forward(int unit_index, Slot& slot, const Pass& pass) {
  const StageUnit& unit = graph_.units[std::size_t(unit_index)];
  Tensor& y = slot.values[std::size_t(unit.output)];
  if (unit.kind == UnitKind::Layers) {
    modules_[std::size_t(unit_index)]->forward(slot.values[std::size_t(unit.inputs[0])], y, pass);
    return;
  }
  ComputeSpan span(pass.recorder, pass.device_trace, EventKind::Forward, pass.step, unit.layer, pass.microbatch);
  const std::int64_t batch = slot.values[std::size_t(unit.inputs[0])].batch;
  y.resize(batch, graph_.values[std::size_t(unit.output)].shape);
  std::vector<const float*> parts;
  for (int v : unit.inputs) parts.push_back(slot.values[std::size_t(v)].ptr());
  backend_.concat_forward(parts.data(), unit.widths.data(), int(parts.size()), y.ptr(), int(batch));
}

void PipelineTrainer::run_unit_backward(int unit_index, Slot& slot, const Tensor& dy, const Pass& pass) {
  const StageUnit& unit = graph_.units[std::size_t(unit_index)];
  auto& contributions = slot.contributions[std::size_t(unit_index)];
  if (unit.kind == UnitKind::Layers) {
    const int in = unit.inputs[0];
    Tensor* dx = in == kModelInput ? nullptr : &contributions[0];
    modules_[std::size_t(unit_index)]->backward(slot.values[std::size_t(in)], slot.values[std::size_t(unit.output)],
                                                dy, dx, pass);
    return;
  }
  ComputeSpan span(pass.recorder, pass.device_trace, EventKind::Backward, pass.step, unit.layer, pass.microbatch);
  std::vector<float*> parts;
  for (std::size_t i = 0; i < unit.inputs.size(); ++i) {
    contributions[i].resize(dy.batch, graph_.values[std::size_t(unit.inputs[i])].shape);
    parts.push_back(contributions[i].ptr());
  }
  backend_.concat_backward(dy.ptr(), unit.widths.data(), int(parts.size()), parts.data(), int(dy.batch));
}

void PipelineTrainer::send_input_gradients(int unit_index, const MicroBatch& mb, const Pass& pass) {
  const StageUnit& unit = graph_.units[std::size_t(unit_index)];
  Slot& slot = *slots_[std::size_t(mb.slot)];
  for (std::size_t i = 0; i < unit.inputs.size(); ++i) {
    const int v = unit.inputs[i];
    const int producer_stage = graph_.values[std::size_t(v)].stage;
    if (v == kModelInput || producer_stage == stage_) continue;
    const int edge = edge_index(unit_index, int(i));
    send(slot.contributions[std::size_t(unit_index)][i], producer_stage, backward_tag(edge), kMaxChannels + edge, mb,
         pass);
  }
}

void PipelineTrainer::load_batch(const data::Dataset& set, const std::vector<std::int64_t>& order, const MicroBatch& mb,
                                 Slot& slot, const Pass& pass) {
  BatchLoadSpan span(pass.recorder, pass.device_trace, pass.step, pass.microbatch);
  engine::load_batch(set, order, mb.slice, slot.values[kModelInput], slot.labels, &span);
  slot.have[kModelInput] = 1;
  span.event().bytes = mb.slice.size * set.sample_size * std::int64_t(sizeof(float));
}

// Mean loss and correct count of one micro-batch; in training also the loss gradient,
// scaled by 1/global_batch so micro-batches and replicas add up to the full batch's.
std::pair<float, int> PipelineTrainer::compute_loss(Slot& slot, const Pass& pass) {
  ComputeSpan span(pass.recorder, pass.device_trace, EventKind::Loss, pass.step, -1, pass.microbatch);
  const Tensor& logits = slot.values[std::size_t(graph_.output)];
  const LossResult loss = softmax_xent(logits, slot.labels, slot.probs, pass.training ? &slot.dlogits : nullptr,
                                       1.0f / float(plan_.training.batch));
  return {loss.loss, loss.correct};
}

// The test set flows through replica 0's pipeline in batches; the loss stage scores it,
// and one all-reduce over every rank brings the totals to rank 0.
Expected<std::optional<Evaluation>> PipelineTrainer::evaluate_due() {
  // Each rank's whole part, its stages' work and its waits (for neighbours, for the
  // all-reduce), is evaluation, not training (Trainer::evaluate_due).
  Span part(recorder_, EventKind::Evaluate, Stream::Host, -1);
  StepStats totals;
  if (replica_ == 0) LOOM_TRY(evaluate_pipeline(totals));
  float values[2] = {float(totals.loss), float(totals.correct)};
  if (ranks_ > 1) LOOM_TRY(comm_->allreduce_sum(values, 2));
  if (rank_ != 0) return std::optional<Evaluation>{};
  Evaluation eval;
  const auto count = double(data_.test.count());
  if (count > 0) {
    eval.loss = double(values[0]) / count;
    eval.accuracy = double(values[1]) / count;
  }
  return std::optional<Evaluation>{eval};
}

Status PipelineTrainer::evaluate_pipeline(StepStats& totals) {
  Span span(recorder_, EventKind::Evaluate, Stream::Compute, -1);
  const data::Dataset& test = data_.test;
  for (const data::BatchSlice& batch : test_batches()) {
    MicroBatch mb;
    mb.slice = batch;
    mb.slot = acquire_slot();
    LOOM_TRY(wait_sends(*slots_[std::size_t(mb.slot)]));
    // Per-layer spans are left out of evaluation: one Evaluate span says enough.
    const Pass pass{false, -1, -1, 0, 0, nullptr, nullptr, mb.slot};
    Status done = forward(mb, test, test_order(), pass, &totals);
    release_slot(mb.slot);
    LOOM_TRY(done);
  }
  return wait_all_sends();
}

void PipelineTrainer::finish(const TrainerHooks& hooks, std::int64_t steps) {
  if (!hooks.on_metrics) return;
  const std::int64_t now = trace::now_ns();
  hooks.on_metrics({{rank_, steps - 1, now, "max_in_flight", double(max_in_flight_)},
                    {rank_, steps - 1, now, "peak_activation_bytes", double(peak_activation_bytes())}});
}

void PipelineTrainer::send(const Tensor& tensor, int stage, int tag, int channel, const MicroBatch& mb,
                           const Pass& pass) {
  const int peer = rank_of_stage(stage);
  const std::int64_t bytes = tensor.size() * std::int64_t(sizeof(float));
  Span span(pass.recorder, EventKind::Send, Stream::Host, pass.step, -1, pass.microbatch, bytes,
            trace::Descheduling::NotMeasured);  // only posts the isend: microseconds
  span.event().peer = peer;
  span.event().message = message_id(pass, channel);
  auto& sends = slots_[std::size_t(mb.slot)]->sends;
  // A device tensor goes as it is where the communicator takes device memory (NCCL), once
  // the device has written it; else from host memory: the tensor itself on the CPU, its
  // host mirror for a device. Either stays alive and untouched until the slot's sends are
  // waited for.
  const bool direct = sends_device_memory();
  if (direct) backend_.synchronize();
  sends.push_back(comm_->isend(direct ? tensor.data.data() : tensor.data.host_read(), bytes, peer, tag));
  if (progress_) progress_->watch(sends.back().get());
}

Status PipelineTrainer::receive(Tensor& tensor, std::int64_t batch, const Shape& shape, int stage, int tag,
                                int channel, const MicroBatch&, const Pass& pass) {
  tensor.resize(batch, shape);
  const int peer = rank_of_stage(stage);
  const std::int64_t bytes = tensor.size() * std::int64_t(sizeof(float));
  // Where the message lands: the device tensor, or its host mirror (made writable first,
  // which may wait for the device: not part of the wait for the neighbour).
  const bool direct = sends_device_memory();
  void* into = direct ? static_cast<void*>(tensor.data.data()) : static_cast<void*>(tensor.data.host_write());
  Bubble bubble(pass);
  Span span(pass.recorder, EventKind::Recv, Stream::Host, pass.step, -1, pass.microbatch, bytes);
  span.event().peer = peer;
  span.event().message = message_id(pass, channel);
  // Waiting for a neighbour is the pipeline bubble: on the CPU the receiving thread is the
  // computing one, so the receive is marked Idle on the compute lane too; on a device the
  // bubble is the device's, stamped (Bubble).
  if (!pass.device_trace) span.also_record_as(EventKind::Idle, Stream::Compute);
  LOOM_TRY(comm_->recv(into, bytes, peer, tag));
  if (!direct) tensor.data.commit();
  return {};
}

PipelineTrainer::Bubble::Bubble(const Pass& pass) : device_(pass.device_trace) {
  if (!device_) return;
  event_ = trace::span_event(EventKind::Idle, Stream::Compute, pass.step, -1, pass.microbatch);
  start_ = device_->stamp();  // when the device finished what was queued before the wait
}

PipelineTrainer::Bubble::~Bubble() {
  if (device_) device_->add(event_, start_, device_->stamp());  // until the message is on the device
}

std::int32_t PipelineTrainer::message_id(const Pass& pass, int channel) const {
  const std::int32_t microbatch = std::max<std::int32_t>(pass.microbatch, 0) % 256;
  return kPipelineMessageBase + (message_step_ * 256 + microbatch) * 256 + channel;
}

Status PipelineTrainer::wait_sends(Slot& slot) {
  if (progress_) progress_->forget(slot.sends);
  Status first;
  for (auto& request : slot.sends) {
    Status s = request->wait();
    if (!s.ok() && first.ok()) first = s;
  }
  slot.sends.clear();
  return first;
}

Status PipelineTrainer::wait_all_sends() {
  Status first;
  for (auto& slot : slots_) {
    Status s = wait_sends(*slot);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

int PipelineTrainer::acquire_slot() {
  if (!free_slots_.empty()) {
    const int slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  auto slot = std::make_unique<Slot>();
  slot->values.resize(graph_.values.size());
  slot->have.assign(graph_.values.size(), 0);
  slot->gradient_sums.resize(graph_.values.size());
  slot->contributions.resize(graph_.units.size());
  for (std::size_t u = 0; u < graph_.units.size(); ++u) slot->contributions[u].resize(graph_.units[u].inputs.size());
  // Every tensor of the slot lives in the rank's backend.
  for (Tensor& t : slot->values) t.data.bind(backend_);
  for (Tensor& t : slot->gradient_sums) t.data.bind(backend_);
  for (auto& unit : slot->contributions)
    for (Tensor& t : unit) t.data.bind(backend_);
  slot->probs.data.bind(backend_);
  slot->dlogits.data.bind(backend_);
  slot->labels.bind(backend_);
  slots_.push_back(std::move(slot));
  return int(slots_.size()) - 1;
}

void PipelineTrainer::release_slot(int slot) { free_slots_.push_back(slot); }

bool PipelineTrainer::consumes_input_batch() const {
  if (stage_ == graph_.loss_stage()) return true;  // the labels
  return std::any_of(my_units_.begin(), my_units_.end(), [this](int u) {
    const auto& inputs = graph_.units[std::size_t(u)].inputs;
    return std::find(inputs.begin(), inputs.end(), kModelInput) != inputs.end();
  });
}

// Rank 0 collects every stage's parameters from replica 0 of that stage and restores
// model order (LayerIds are pre-order, as the single-process model lists its parameters).
Expected<std::vector<NamedTensor>> PipelineTrainer::gather_params() {
  if (replica_ != 0) return std::vector<NamedTensor>{};
  if (rank_ != 0) {
    const std::vector<char> bytes = serialize(params_);
    const std::int64_t size = std::int64_t(bytes.size());
    LOOM_TRY(comm_->send(&size, sizeof size, 0, kGatherTag));
    if (size > 0) LOOM_TRY(comm_->send(bytes.data(), size, 0, kGatherTag));
    return std::vector<NamedTensor>{};
  }
  std::vector<ParamRecord> records = deserialize(serialize(params_));
  for (int stage = 1; stage < graph_.stages; ++stage) {
    std::int64_t size = 0;
    LOOM_TRY(comm_->recv(&size, sizeof size, rank_of_stage(stage), kGatherTag));
    std::vector<char> bytes(static_cast<std::size_t>(size));
    if (size > 0) LOOM_TRY(comm_->recv(bytes.data(), size, rank_of_stage(stage), kGatherTag));
    for (ParamRecord& r : deserialize(bytes)) records.push_back(std::move(r));
  }
  std::stable_sort(records.begin(), records.end(),
                   [](const ParamRecord& a, const ParamRecord& b) { return a.layer < b.layer; });
  std::vector<NamedTensor> out;
  for (ParamRecord& r : records) out.push_back(std::move(r.tensor));
  return out;
}

}  // namespace loom::engine
