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
      labels_(backend) {
  if (ranks_ > 1 && !local_sgd_) {
    sync_ = std::make_unique<GradientSync>(*comm_, model_.params(), plan.parallel.bucket_mb, recorder_);
  }
  if (step_graph_allowed(plan, ranks_, backend)) graph_ = GraphState::Waiting;
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
  auto divergence = average_parameters();
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

Expected<double> Trainer::average_parameters() {
  Span span(recorder_, EventKind::AllReduce, Stream::Compute, -1);
  double local_sq = 0;
  const float inverse = 1.0f / float(ranks_);
  for (Param* p : model_.params()) {
    const std::vector<float> own = p->value.to_host();
    std::vector<float> mean = own;
    LOOM_TRY(comm_->allreduce_sum(mean.data(), std::int64_t(mean.size())));
    for (std::size_t i = 0; i < mean.size(); ++i) {
      mean[i] *= inverse;
      const double d = double(own[i]) - double(mean[i]);
      local_sq += d * d;
    }
    p->value.assign(mean);
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
