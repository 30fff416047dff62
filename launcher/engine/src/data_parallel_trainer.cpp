// Data parallelism and one process (see data_parallel_trainer.h): one rank's step on its
// shard, the gradient all-reduce (or local SGD's parameter averaging), the optimizer step.
// Loss gradients are scaled by 1/global_batch, so shards and micro-steps add up to the full
// batch's gradient.
#include "loom/engine/data_parallel_trainer.h"

#include <cmath>
#include <utility>

#include "loom/engine/batch.h"

namespace loom::engine {
namespace {

using trace::EventKind;
using trace::Span;
using trace::Stream;

}  // namespace

Trainer::Trainer(const Plan& plan, const ModelInfo& info, const data::TrainTest& data, trace::Recorder* recorder,
                 comm::Communicator* comm, kernels::Backend& backend)
    : TrainingLoop(plan, data, recorder, comm, backend),
      model_(Model::build(plan, info, backend)),
      arena_(ParamArena::pack(model_.params(), backend)),
      optimizer_(plan.training.optimizer, model_.params(), &arena_),
      local_sgd_(plan.parallel.sync.mode == SyncMode::LocalSgd && ranks_ > 1),
      straggler_(plan, rank_),
      input_(backend),
      logits_(backend),
      dlogits_(backend),
      probs_(backend),
      labels_(backend),
      first_sample_(backend) {
  if (ranks_ > 1 && !local_sgd_) {
    sync_ = std::make_unique<GradientSync>(*comm_, model_.params(), plan.parallel.bucket_mb, recorder_);
  }
  if (step_graph_allowed(plan, ranks_, backend)) graph_ = GraphState::Waiting;
  keyed_dropout_ = graph_ == GraphState::Waiting && has_dropout(plan.model.layers);
}

Expected<Trainer::StepStats> Trainer::train_step(std::int64_t step, const std::vector<std::int64_t>& order,
                                                 std::int64_t batch_in_epoch, bool stop_requested) {
  if (auto graphed = graphed_step(step, order, batch_in_epoch, stop_requested)) return std::move(*graphed);
  Span step_span(recorder_, EventKind::Step, Stream::Host, std::int32_t(step));
  arena_.zero_grads();
  StepStats stats;
  stats.stop = stop_requested;
  const int accumulation = plan_.parallel.grad_accumulation;
  // Local SGD steps each replica on its own shard's mean gradient (ranks / global batch);
  // averaging after one step then equals the synchronous step on the whole batch.
  const float scale = float(local_sgd_ ? ranks_ : 1) / float(plan_.training.batch);
  const std::int64_t compute_start = trace::now_ns();
  for (int micro = 0; micro < accumulation; ++micro) {
    // Each micro-step takes its own slice of the global batch; shards split that slice.
    const auto slice = chunk_of_batch(batch_in_epoch, micro * ranks_ + rank_, accumulation * ranks_);
    {
      BatchLoadSpan span(recorder_, device_trace_.get(), std::int32_t(step));
      load_batch(data_.train, order, slice, input_, labels_, &span);
      span.event().bytes = slice.size * data_.train.sample_size * std::int64_t(sizeof(float));
    }
    // Gradients are summed across replicas only after the last micro-step.
    const bool last_micro = micro + 1 == accumulation;
    Pass pass{true,
              std::int32_t(step),
              std::int16_t(accumulation > 1 ? micro : -1),
              plan_.training.seed,
              first_sample(step, batch_in_epoch, slice),
              recorder_,
              last_micro ? sync_.get() : nullptr};
    pass.device_trace = device_trace_.get();
    if (sync_ && last_micro) sync_->begin_step(std::int32_t(step));
    model_.forward(input_, logits_, pass);
    {
      ComputeSpan span(recorder_, device_trace_.get(), EventKind::Loss, std::int32_t(step));
      losses_.add(logits_, labels_, probs_, dlogits_, scale, double(slice.size) / double(plan_.training.batch));
    }
    model_.backward(input_, logits_, dlogits_, pass);
  }
  // A device's compute ends when its queue drains, not when the host has queued it.
  if (straggler_.active()) backend_.synchronize();
  straggler_.inject(std::int32_t(step), trace::now_ns() - compute_start, recorder_);
  if (local_sgd_) return local_sgd_step(step, stats);
  if (sync_) {
    // What is left of the all-reduce after backward: the exposed communication.
    Span wait(recorder_, EventKind::Wait, waiting_stream(device_trace_.get()), std::int32_t(step));
    LOOM_TRY(sync_->finish_step());
  }
  // Replicas meet with their losses; one process reads its loss after queueing the update,
  // the step's only wait for a device.
  if (ranks_ > 1) take_losses(stats);
  LOOM_TRY(meet_replicas(step, stats));
  {
    ComputeSpan span(recorder_, device_trace_.get(), EventKind::Optimizer, std::int32_t(step));
    optimizer_.step();
  }
  if (ranks_ == 1) take_losses(stats);
  capture_after_warmup(step);
  return stats;
}

void Trainer::take_losses(StepStats& stats) {
  const auto [loss, correct] = losses_.take();
  stats.loss += loss;
  stats.correct += correct;
}

// Replicas step on their own and meet every `period` steps (and after the last step, so
// the run ends with one model). Between meetings a rank reports its own shard's loss.
Expected<Trainer::StepStats> Trainer::local_sgd_step(std::int64_t step, StepStats& stats) {
  {
    ComputeSpan span(recorder_, device_trace_.get(), EventKind::Optimizer, std::int32_t(step));
    optimizer_.step();
  }
  take_losses(stats);
  const bool meet = (step + 1) % plan_.parallel.sync.period == 0 || step + 1 == total_steps();
  if (!meet) {
    stats.loss *= double(ranks_);  // this shard's mean loss
    stats.samples = plan_.training.batch / ranks_;
    return stats;
  }
  LOOM_TRY(meet_replicas(step, stats));
  auto divergence = average_parameters(step);
  if (!divergence.ok()) return divergence.error();
  // One figure for the whole job: rank 0 reports it.
  if (rank_ == 0) step_metrics_.push_back({rank_, step, trace::now_ns(), "param_divergence", *divergence});
  return stats;
}

Status Trainer::meet_replicas(std::int64_t step, StepStats& stats) {
  if (ranks_ == 1) return {};
  Span wait(recorder_, EventKind::Wait, waiting_stream(device_trace_.get()), std::int32_t(step));
  return reduce_stats(stats);
}

namespace {

// Scales `sum` to the mean in place and returns the squared distance of `own` from it.
// Squares are summed in eight float lanes per block of 1024 (which the compiler can
// vectorise: this pass was most of a meeting's untraced time) and the blocks in double.
double scale_and_distance(float* sum, const float* own, std::int64_t n, float inverse) {
  constexpr std::int64_t kLanes = 8, kBlock = 1024;
  double total = 0;
  for (std::int64_t begin = 0; begin < n; begin += kBlock) {
    const std::int64_t end = std::min(n, begin + kBlock);
    float lanes[kLanes] = {};
    std::int64_t i = begin;
    for (; i + kLanes <= end; i += kLanes)
      for (std::int64_t k = 0; k < kLanes; ++k) {
        sum[i + k] *= inverse;
        const float d = own[i + k] - sum[i + k];
        lanes[k] += d * d;
      }
    for (; i < end; ++i) {
      sum[i] *= inverse;
      const float d = own[i] - sum[i];
      lanes[0] += d * d;
    }
    for (float lane : lanes) total += double(lane);
  }
  return total;
}

}  // namespace

// Every parameter in one all-reduce over the packed arena, in place (its gaps are zero on
// every rank and stay zero), then the mean and each rank's distance from it: the outer
// step, an Optimizer span marked kOuterOptimizerStep. The all-reduce alone is the
// AllReduce span, with its step and bytes, so the calibration costs it as any all-reduce
// of that size and busbw stays the collective's. The copy of this rank's values is kept between meetings:
// allocating it afresh each time cost more than the all-reduce (page faults).
Expected<double> Trainer::average_parameters(std::int64_t step) {
  const std::int64_t n = arena_.size();
  const float* current = arena_.values.host_read();  // a device's values land in the mirror
  own_params_.assign(current, current + n);
  float* values = arena_.values.host_write();
  {
    Span span(recorder_, EventKind::AllReduce, Stream::Compute, std::int32_t(step));
    span.event().bytes = n * std::int64_t(sizeof(float));
    LOOM_TRY(comm_->allreduce_sum(values, n));
  }
  double local_sq = 0;
  {
    // Host work on host memory (a device's mirror), so timed on the host on every rank.
    Span span(recorder_, EventKind::Optimizer, Stream::Compute, std::int32_t(step));
    span.event().message = trace::kOuterOptimizerStep;
    local_sq = scale_and_distance(values, own_params_.data(), n, 1.0f / float(ranks_));
    arena_.values.commit();
  }
  float total = float(local_sq);
  LOOM_TRY(comm_->allreduce_sum(&total, 1));
  return std::sqrt(double(total) / double(ranks_));
}

// Replicas hold identical parameters, so one evaluation (rank 0's) says it all. It is not
// training: each rank's part in it, rank 0 evaluating and the others waiting for it, is a
// host Evaluate span, which the analysis leaves out of the training window. A barrier ends
// it on every rank at once; without it the others' wait would show up in their next
// step's all-reduce as exposed communication.
Expected<std::optional<Evaluation>> Trainer::evaluate_due() {
  Span part(recorder_, EventKind::Evaluate, Stream::Host, -1);
  std::optional<Evaluation> eval;
  if (rank_ == 0) eval = evaluate();
  if (ranks_ > 1) LOOM_TRY(comm_->barrier());
  return eval;
}

void Trainer::finish(const TrainerHooks& hooks, std::int64_t steps) {
  if (!hooks.on_metrics || rank_ != 0) return;
  double sum = 0;  // in double: a million float squares summed in float lose digits
  for (const Param* p : model_.params())
    for (float v : p->value.to_host()) sum += double(v) * double(v);
  hooks.on_metrics({{rank_, steps - 1, trace::now_ns(), "param_norm", std::sqrt(sum)}});
}

Expected<std::vector<NamedTensor>> Trainer::gather_params() {
  if (rank_ != 0) return std::vector<NamedTensor>{};
  return named_copies(model_.params());
}

Evaluation Trainer::evaluate() { return evaluate_model(model_, data_.test, test_batches(), test_order(), recorder_); }

}  // namespace loom::engine
