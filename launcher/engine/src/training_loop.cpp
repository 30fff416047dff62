// The loop every training strategy shares (see training_loop.h): epochs and the data
// position, stopping, divergence, evaluation, reporting, device memory and checkpoints.
// The strategies' steps live beside it (data_parallel_trainer.cpp, pipeline_trainer.cpp,
// parameter_server.cpp); none of them is named here.
#include "loom/engine/training_loop.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <list>
#include <map>

#include "loom/engine/batch.h"
#include "loom/kernels/cpu.h"

namespace loom::engine {
namespace {

using trace::EventKind;
using trace::Span;
using trace::Stream;

constexpr std::int64_t kMaxEvalBatch = 1000;

// Evaluation runs in batches no larger than the largest batch the rank's model computes in
// training (one shard of one micro-step or micro-batch), so it reuses the buffers training
// sized: buffers only grow, and batches of 1000 test samples used to grow the CNN's
// activations and convolution workspace from about 11 MiB to 400 MiB of device memory.
std::int64_t evaluation_batch(const Plan& plan) {
  const ParallelSpec& p = plan.parallel;
  const std::int64_t chunks = std::int64_t(std::max(1, p.data_parallel)) * std::max(1, p.grad_accumulation) *
                              std::max(1, p.microbatches);
  return std::clamp<std::int64_t>(plan.training.batch / chunks, 1, kMaxEvalBatch);
}

}  // namespace

std::string diverged(std::int64_t step, double loss) {
  return "the loss diverged at step " + std::to_string(step) + " (loss " + (std::isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf") +
         "); lower training.optimizer.lr, or set training.on_divergence to \"continue\" to train on";
}

std::int64_t compute_total_steps(const Plan& plan, std::int64_t train_count) {
  if (plan.training.steps > 0) return plan.training.steps;
  return std::int64_t(plan.training.epochs) * data::batches_per_epoch(train_count, plan.training.batch);
}

TrainingLoop::TrainingLoop(const Plan& plan, const data::TrainTest& data, trace::Recorder* recorder,
                           comm::Communicator* comm, kernels::Backend& backend)
    : plan_(plan),
      data_(data),
      recorder_(recorder),
      comm_(comm),
      backend_(backend),
      rank_(comm ? comm->rank() : 0),
      ranks_(comm ? comm->size() : 1),
      total_steps_(compute_total_steps(plan, data.train.count())) {
  if (recorder && !backend.host_memory()) device_trace_ = std::make_unique<DeviceTrace>(backend, *recorder);
  const std::int64_t count = data.test.count();
  test_order_.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) test_order_[std::size_t(i)] = i;
  const std::int64_t eval_batch = evaluation_batch(plan);
  for (std::int64_t begin = 0; begin < count; begin += eval_batch) {
    test_batches_.push_back({begin, std::min(eval_batch, count - begin)});
  }
}

TrainResult TrainingLoop::run(const TrainerHooks& hooks) {
  TrainResult result;
  cpu::flush_denormals_on_this_thread();
  start_ns_ = trace::now_ns();
  const std::int64_t per_epoch = data::batches_per_epoch(data_.train.count(), plan_.training.batch);
  // The step fixes the data position: a resumed run starts inside the epoch it left.
  Position at;
  at.step = at.saved_at = start_step_;
  const int first_epoch = per_epoch > 0 ? int(at.step / per_epoch) : 0;
  bool going = true;
  for (int epoch = first_epoch; going && at.step < total_steps_ && per_epoch > 0; ++epoch) {
    const auto order = data::epoch_order(data_.train.count(), plan_.data.seed ^ plan_.training.seed, epoch,
                                         plan_.data.shuffle);
    for (std::int64_t b = at.step % per_epoch; going && b < per_epoch && at.step < total_steps_; ++b)
      going = step_once(at, epoch, b, b + 1 == per_epoch, order, hooks, result);
  }
  // A stopped run can be resumed from where it stopped (`loom-cli resume`).
  if (result.stopped && result.error.empty() && !hooks.checkpoint_dir.empty() && at.step > at.saved_at) {
    if (Status saved = save_checkpoint_at(hooks.checkpoint_dir, at.step); !saved.ok()) result.error = saved.error().describe();
  }
  if (result.error.empty()) finish(hooks, at.step);
  result.steps = at.step - start_step_;
  result.last_step = at.step;
  result.samples = result.steps * plan_.training.batch;
  result.wall_s = double(trace::now_ns() - start_ns_) * 1e-9;
  result.final_loss = at.last_loss;
  result.replayed_steps = replayed_steps();
  result.graph_note = graph_note();
  return result;
}

bool TrainingLoop::step_once(Position& at, int epoch, std::int64_t batch, bool epoch_end,
                             const std::vector<std::int64_t>& order, const TrainerHooks& hooks, TrainResult& result) {
  const bool stop_requested = hooks.stop && hooks.stop->load();
  if (stop_requested && ranks_ == 1) {
    result.stopped = true;
    return false;
  }
  auto stats_or_error = train_step(at.step, order, batch, stop_requested);
  if (device_trace_) device_trace_->flush();  // the step's device spans, failed or not
  // A device's errors are sticky and asynchronous: looked at once a step.
  const Status device = stats_or_error.ok() ? backend_.status() : stats_or_error.status();
  if (!device.ok()) {
    result.error = device.error().describe();
    return false;
  }
  const StepStats& stats = *stats_or_error;
  ++at.step;
  at.last_loss = stats.loss;
  report_step(at.step, epoch, stats, hooks);  // a diverged loss is reported too: it is the news
  // Only a loss every rank shares (the whole batch's) stops the run: then they all stop
  // after the same step. A shard's own loss (local SGD between meetings, an
  // asynchronous worker) goes on; show still says where it diverged.
  if (!std::isfinite(stats.loss) && stats.samples == 0 && plan_.training.on_divergence == DivergencePolicy::Stop) {
    result.error = diverged(at.step - 1, stats.loss);
    return false;
  }
  if (stats.stop) {
    result.stopped = true;
    return false;
  }
  Status after = after_step(at, epoch_end, hooks, result);
  if (!after.ok()) result.error = after.error().describe();
  return after.ok();
}

// An evaluation and a checkpoint, when due after the step just taken.
Status TrainingLoop::after_step(Position& at, bool epoch_end, const TrainerHooks& hooks, TrainResult& result) {
  if (due_for_evaluation(at.step, epoch_end)) {
    const std::int64_t evaluation_start = trace::now_ns();
    auto eval = evaluate_due();
    evaluation_ns_ += trace::now_ns() - evaluation_start;  // not training (report_step)
    if (!eval.ok()) return eval.error();
    if (eval->has_value()) {
      result.test = **eval;
      report_evaluation(at.step, result.test, hooks);
    }
  }
  const std::int64_t every = plan_.training.checkpoint_every;
  if (!hooks.checkpoint_dir.empty() && every > 0 && at.step % every == 0 && at.step < total_steps_) {
    LOOM_TRY(save_checkpoint_at(hooks.checkpoint_dir, at.step));
    at.saved_at = at.step;
  }
  return {};
}

DeviceMemory TrainingLoop::device_memory() {
  DeviceMemory m;
  m.total = backend_.bytes_in_use();
  if (const ParamArena* arena = packed_params()) {
    m.parameters = arena->values.capacity_bytes();
    m.gradients = arena->grads.capacity_bytes();
  } else {
    for (const Param* p : params()) {
      m.parameters += p->value.capacity_bytes();
      m.gradients += p->grad.capacity_bytes();
    }
  }
  if (const Optimizer* opt = optimizer()) m.optimizer_state = opt->state_bytes();
  m.workspace = workspace_bytes() + backend_.library_workspace_bytes();
  return m;
}

std::vector<trace::MetricRecord> device_memory_metrics(TrainingLoop& loop, int rank, std::int64_t step) {
  const DeviceMemory m = loop.device_memory();
  const std::int64_t now = trace::now_ns();
  return {{rank, step, now, "device_memory_bytes", double(m.total)},
          {rank, step, now, "device_memory_parameters_bytes", double(m.parameters)},
          {rank, step, now, "device_memory_gradients_bytes", double(m.gradients)},
          {rank, step, now, "device_memory_optimizer_bytes", double(m.optimizer_state)},
          {rank, step, now, "device_memory_workspace_bytes", double(m.workspace)},
          {rank, step, now, "device_memory_activations_bytes", double(m.activations_and_buffers())}};
}

// An asynchronous worker (no optimizer here: the servers hold parameters and state) saves
// only its step, the data position it resumes from.
Status TrainingLoop::save_checkpoint_at(const std::string& run_dir, std::int64_t step) {
  Optimizer* opt = optimizer();
  std::vector<NamedTensor> tensors;
  if (opt) {
    tensors = named_copies(params());
    for (NamedTensor& t : opt->state()) tensors.push_back(std::move(t));
  }
  return save_rank_checkpoint(run_dir, plan_, rank_, ranks_, step, opt ? opt->steps_taken() : 0, std::move(tensors));
}

Status save_rank_checkpoint(const std::string& run_dir, const Plan& plan, int rank, int world, std::int64_t step,
                            std::int64_t optimizer_steps, std::vector<NamedTensor> tensors) {
  const std::string dir = checkpoint_step_dir(run_dir, step);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::Io, "cannot create checkpoint directory " + dir + ": " + ec.message());
  const Checkpoint c{step, optimizer_steps, rank, world, plan.training.batch,
                     std::string(optimizer_name(plan.training.optimizer.kind)), std::move(tensors)};
  LOOM_TRY(save_checkpoint(checkpoint_file(dir, rank), c));
  prune_checkpoints(run_dir, rank, 2);
  return {};
}

Status restore_params(const std::vector<Param*>& params, const std::map<std::string, const std::vector<float>*>& found,
                      const std::string& step_dir, const std::string& hint) {
  for (Param* p : params) {
    const auto it = found.find(p->name);
    if (it == found.end() || it->second->size() != p->value.size())
      return make_error(ErrorCode::Corrupt, "the checkpoint in " + step_dir + " has no parameter '" + p->name +
                                                "' of " + std::to_string(p->value.size()) + " values",
                        hint);
    p->value.assign(*it->second);
  }
  return {};
}

Expected<Checkpoint> load_matching_checkpoint(const std::string& path, const Plan& plan) {
  auto c = load_checkpoint(path);
  if (!c.ok()) return c.error();
  if (c->global_batch != plan.training.batch)
    return make_error(ErrorCode::InvalidArgument,
                      "the checkpoint was saved with global batch " + std::to_string(c->global_batch) +
                          " but the plan has " + std::to_string(plan.training.batch),
                      "resume with the same training.batch: the step fixes the data position only for it");
  const std::string_view optimizer = optimizer_name(plan.training.optimizer.kind);
  if (c->optimizer != optimizer)
    return make_error(ErrorCode::InvalidArgument,
                      "the checkpoint was saved with optimizer " + c->optimizer + " but the plan has " +
                          std::string(optimizer),
                      "resume with the run's own optimizer: its state means something else to another one");
  return c;
}

namespace {

// The checkpoint files of one step directory in the order a rank should read them: its
// own first, then rank 0's, then the rest.
std::vector<int> reading_order(int rank, std::int64_t world) {
  std::vector<int> order;
  if (rank < world) order.push_back(rank);
  for (int r = 0; r < world; ++r)
    if (r != rank) order.push_back(r);
  return order;
}

}  // namespace

Status TrainingLoop::resume_from(const std::string& step_dir) {
  Optimizer* opt = optimizer();
  if (!opt) {  // an asynchronous worker: only its step; the servers restore the rest
    auto own = load_matching_checkpoint(checkpoint_file(step_dir, rank_), plan_);
    if (!own.ok()) return own.error();
    start_step_ = own->step;
    return {};
  }
  auto first = load_matching_checkpoint(checkpoint_file(step_dir, 0), plan_);
  if (!first.ok()) return first.error();
  std::vector<std::string> needed;
  for (const Param* p : params()) needed.push_back(p->name);
  for (const NamedTensor& t : opt->state()) needed.push_back(t.name);
  std::list<Checkpoint> files;  // kept alive (and in place): `found` points into them
  std::map<std::string, const std::vector<float>*> found;
  auto has_all = [&] {
    return std::all_of(needed.begin(), needed.end(), [&](const std::string& n) { return found.count(n) > 0; });
  };
  for (int r : reading_order(rank_, first->world)) {
    if (!files.empty() && has_all()) break;  // a pipeline stage needs only its own file
    auto c = r == 0 ? std::move(first) : load_checkpoint(checkpoint_file(step_dir, r));
    if (!c.ok()) return c.error();
    files.push_back(std::move(*c));
    for (const NamedTensor& t : files.back().tensors) found.emplace(t.name, &t.values);
  }
  LOOM_TRY(restore_params(params(), found, step_dir, "resume with the run's own model and stages"));
  LOOM_TRY(opt->restore(found, files.front().optimizer_steps));
  start_step_ = files.front().step;
  return {};
}

data::BatchSlice TrainingLoop::chunk_of_batch(std::int64_t batch_in_epoch, int chunk, int chunks) const {
  return data::shard_of_batch(batch_in_epoch, plan_.training.batch, chunk, chunks);
}

std::int64_t TrainingLoop::first_sample(std::int64_t step, std::int64_t batch_in_epoch,
                                        const data::BatchSlice& slice) const {
  return step * plan_.training.batch + (slice.begin - batch_in_epoch * plan_.training.batch);
}

// Loss and accuracy of the whole global batch, so every rank reports what a single
// process would, plus the stop votes. Three floats: negligible next to the gradients.
Status TrainingLoop::reduce_stats(StepStats& stats) {
  if (ranks_ == 1) return {};
  float values[3] = {float(stats.loss), float(stats.correct), stats.stop ? 1.0f : 0.0f};
  LOOM_TRY(comm_->allreduce_sum(values, 3));
  stats.loss = values[0];
  stats.correct = std::int64_t(values[1] + 0.5f);
  stats.stop = values[2] > 0.5f;
  return {};
}

Evaluation evaluate_model(Model& model, const data::Dataset& test, const std::vector<data::BatchSlice>& batches,
                          const std::vector<std::int64_t>& order, trace::Recorder* recorder) {
  Span span(recorder, EventKind::Evaluate, Stream::Compute, -1);
  kernels::Backend& backend = model.backend();
  Tensor input(backend), logits(backend), probs(backend);
  Buffer<std::int32_t> labels(backend);
  double loss_sum = 0;
  std::int64_t correct_sum = 0;
  for (const data::BatchSlice& batch : batches) {
    const std::int64_t n = batch.size;
    load_batch(test, order, batch, input, labels);
    // Per-layer spans are left out of evaluation: one Evaluate span says enough.
    Pass pass{false, -1, -1, 0, 0, nullptr};
    model.forward(input, logits, pass);
    const LossResult loss = softmax_xent(logits, labels, probs, nullptr, 0.0f);
    loss_sum += double(loss.loss) * double(n);
    correct_sum += loss.correct;
  }
  Evaluation eval;
  if (test.count() > 0) {
    eval.loss = loss_sum / double(test.count());
    eval.accuracy = double(correct_sum) / double(test.count());
  }
  return eval;
}

bool TrainingLoop::due_for_evaluation(std::int64_t steps_done, bool end_of_epoch) const {
  if (steps_done == total_steps_) return true;
  if (plan_.training.eval_every > 0) return steps_done % plan_.training.eval_every == 0;
  return end_of_epoch;
}

void TrainingLoop::report_step(std::int64_t step, int epoch, const StepStats& stats, const TrainerHooks& hooks) {
  const std::int64_t now = trace::now_ns();
  const double elapsed = double(now - start_ns_) * 1e-9;
  // Steady throughput, as the analysis defines it (docs/figures.md): the first step is
  // warm-up (allocation, first touches of every buffer), so the rate counts from its end.
  const std::int64_t done = step - start_step_;  // in this run
  if (done == 1) steady_start_ns_ = now, evaluation_ns_ = 0;
  const double steady_s = double(now - steady_start_ns_ - evaluation_ns_) * 1e-9;  // evaluations left out
  const double samples_per_s = done > 1 && steady_s > 0 ? double((done - 1) * plan_.training.batch) / steady_s
                               : elapsed > 0                ? double(done * plan_.training.batch) / elapsed
                                                            : 0.0;
  if (hooks.on_metrics) {
    const int rank = rank_;
    const double covered = double(stats.samples > 0 ? stats.samples : plan_.training.batch);
    std::vector<trace::MetricRecord> metrics = std::exchange(step_metrics_, {});
    metrics.insert(metrics.end(), {{rank, step - 1, now, "loss", stats.loss},
                                   {rank, step - 1, now, "train_accuracy", double(stats.correct) / covered},
                                   {rank, step - 1, now, "samples_per_s", samples_per_s}});
    hooks.on_metrics(std::move(metrics));
  }
  if (hooks.on_step) {
    const double eta = done > 0 ? elapsed / double(done) * double(total_steps_ - step) : 0.0;
    hooks.on_step({step, total_steps_, epoch, stats.loss, samples_per_s, elapsed, eta});
  }
}

void TrainingLoop::report_evaluation(std::int64_t step, const Evaluation& eval, const TrainerHooks& hooks) {
  if (!hooks.on_metrics) return;
  const std::int64_t now = trace::now_ns();
  hooks.on_metrics({{rank_, step - 1, now, "test_loss", eval.loss},
                    {rank_, step - 1, now, "test_accuracy", eval.accuracy}});
}

}  // namespace loom::engine
