// The captured training step of one process (training.graph, docs/plan-format.md). The
// step of a run launches a few dozen small kernels; on a GPU their launches cost more than
// their work. So the step is captured once, at the end of the warm-up step
// (kernels::Backend::capture_begin: a CUDA graph), and every later step replays it with
// one launch. The capture holds what every
// step repeats with the same pointers and arguments: the batch upload from the host
// mirrors, zeroing the gradients, forward, the loss and its gradient, backward. The host
// gathers each step's batch into the mirrors before the replay (and with dropout the
// batch's first sample, which the captured dropout reads for its masks); the optimizer update
// (one launch over the packed parameters, its step count changing every step) and
// reading the loss back follow it. The warm-up step runs eagerly and sizes every buffer,
// so the capture allocates nothing; buffers never move after it (they only grow, and
// evaluation batches are no larger than training ones).
#include <algorithm>

#include "loom/engine/batch.h"
#include "loom/engine/data_parallel_trainer.h"

namespace loom::engine {
namespace {

using trace::EventKind;
using trace::Span;
using trace::Stream;

}  // namespace

bool has_dropout(const std::vector<LayerSpec>& layers) {
  return std::any_of(layers.begin(), layers.end(), [](const LayerSpec& l) {
    if (l.kind == LayerKind::Dropout && l.p > 0) return true;
    return std::any_of(l.branches.begin(), l.branches.end(), [](const BranchSpec& b) { return has_dropout(b.layers); });
  });
}

bool step_graph_allowed(const Plan& plan, int ranks, const kernels::Backend& backend) {
  // Stragglers sleep on the host, accumulation gathers several batches into the same
  // mirror: neither replays. (Dropout does: its masks' offset is read from device memory.)
  return plan.training.graph && ranks == 1 && !backend.host_memory() && plan.parallel.grad_accumulation == 1 &&
         plan.parallel.stragglers.empty();
}

std::optional<Expected<Trainer::StepStats>> Trainer::graphed_step(std::int64_t step,
                                                                   const std::vector<std::int64_t>& order,
                                                                   std::int64_t batch_in_epoch, bool stop_requested) {
  if (graph_ != GraphState::Captured) return std::nullopt;
  Span step_span(recorder_, EventKind::Step, Stream::Host, std::int32_t(step));
  // The batch's span starts here on the host and ends at the captured upload's stamp.
  const std::int64_t gather_start = trace::now_ns();
  const data::BatchSlice slice = chunk_of_batch(batch_in_epoch, 0, 1);
  gather_batch(data_.train, order, slice, input_, labels_);
  if (keyed_dropout_) first_sample_.host_write()[0] = std::uint64_t(first_sample(step, batch_in_epoch, slice));
  backend_.replay();
  if (device_trace_) device_trace_->add_template(std::int32_t(step), gather_start);
  losses_.expect_queued(backend_, 1.0);
  ++replayed_;
  StepStats stats;
  stats.stop = stop_requested;
  {
    ComputeSpan span(recorder_, device_trace_.get(), EventKind::Optimizer, std::int32_t(step));
    optimizer_.step();
  }
  take_losses(stats);
  return Expected<StepStats>(stats);
}

// Records the step's device work as a graph, running nothing, at the end of the warm-up
// step (eager: every buffer is sized by then), so its cost is warm-up, never a steady
// step's. The spans queued while capturing are kept as the replays' template, not
// recorded: they did not run. Where the capture fails, every step runs eagerly.
void Trainer::capture_after_warmup(std::int64_t step) {
  if (graph_ != GraphState::Waiting || step != first_step()) return;
  graph_ = GraphState::Off;  // unless the capture works
  if (device_trace_) device_trace_->flush();  // this step's stamps resolved: the capture starts at stamp 0
  if (keyed_dropout_) {
    first_sample_.resize(1);
    first_sample_.host_write()[0] = 0;  // the mirror exists before the capture: it may not allocate
  }
  if (!backend_.capture_begin()) {
    graph_note_ = std::string("the ") + backend_.name() + " backend cannot capture a step";
    return;
  }
  if (device_trace_) device_trace_->begin_template();
  {
    BatchLoadSpan load(recorder_, device_trace_.get(), std::int32_t(step));
    load.event().bytes = input_.batch * data_.train.sample_size * std::int64_t(sizeof(float));
    upload_batch(input_, labels_, &load);
  }
  if (keyed_dropout_) first_sample_.commit();  // captured: each replay uploads the step's
  arena_.zero_grads();
  Pass pass{true, std::int32_t(step), -1, plan_.training.seed, 0, recorder_, nullptr};
  pass.device_trace = device_trace_.get();
  if (keyed_dropout_) pass.device_first_sample = first_sample_.data();
  model_.forward(input_, logits_, pass);
  {
    ComputeSpan span(recorder_, device_trace_.get(), EventKind::Loss, std::int32_t(step));
    losses_.add(logits_, labels_, probs_, dlogits_, 1.0f / float(plan_.training.batch), 1.0);
  }
  model_.backward(input_, logits_, dlogits_, pass);
  if (device_trace_) device_trace_->end_template();
  const Status captured = backend_.capture_end();
  losses_.drop();  // the loss is expected at each replay
  if (!captured.ok()) {
    graph_note_ = "the step could not be captured, so every step runs uncaptured: " + captured.error().describe();
    if (device_trace_) device_trace_->drop_template_spans();
    return;
  }
  if (device_trace_) device_trace_->discard_template_pending();
  graph_ = GraphState::Captured;
}

}  // namespace loom::engine
