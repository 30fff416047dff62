// Data parallelism and one process: every rank holds the whole model and trains on its
// shard of each global batch. Synchronous replicas sum their gradients by a bucketed
// all-reduce overlapped with backward (gradient_sync.h); local SGD replicas step on their
// own and average their parameters every `parallel.sync.period` steps. One process on a
// device may capture its step once and replay it (training.graph, data_parallel_graph.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/batch.h"
#include "loom/engine/gradient_sync.h"
#include "loom/engine/model.h"
#include "loom/engine/optimizer.h"
#include "loom/engine/straggler.h"
#include "loom/engine/training_loop.h"
#include "loom/trace/recorder.h"

namespace loom::engine {

// Data parallelism (and one process): every rank holds the whole model.
class Trainer final : public TrainingLoop {
 public:
  // With a communicator of more than one rank this is one data-parallel replica: it
  // trains on shard comm->rank() of every global batch and sums gradients across ranks.
  Trainer(const Plan& plan, const ModelInfo& info, const data::TrainTest& data, trace::Recorder* recorder,
          comm::Communicator* comm = nullptr, kernels::Backend& backend = default_backend());

  Evaluation evaluate();
  Model& model() { return model_; }
  const std::vector<Param*>& params() const override { return model_.params(); }
  Expected<std::vector<NamedTensor>> gather_params() override;

 private:
  Expected<StepStats> train_step(std::int64_t step, const std::vector<std::int64_t>& order,
                                 std::int64_t batch_in_epoch, bool stop_requested) override;
  Expected<std::optional<Evaluation>> evaluate_due() override;
  // Rank 0 reports "param_norm", the L2 norm of every parameter after the last step: a
  // figure of the parameters themselves, which runs meant to be equivalent share.
  void finish(const TrainerHooks& hooks, std::int64_t steps) override;
  Optimizer* optimizer() override { return &optimizer_; }
  std::int64_t workspace_bytes() const override { return model_.workspace_bytes(); }
  const ParamArena* packed_params() const override { return &arena_; }
  Expected<StepStats> local_sgd_step(std::int64_t step, StepStats& stats);
  // The captured step (data_parallel_graph.cpp, docs/plan-format.md training.graph): captured at
  // the end of the warm-up step, replayed every step after; nullopt: run it eagerly.
  std::optional<Expected<StepStats>> graphed_step(std::int64_t step, const std::vector<std::int64_t>& order,
                                                  std::int64_t batch_in_epoch, bool stop_requested);
  void capture_after_warmup(std::int64_t step);
  std::int64_t replayed_steps() const override { return replayed_; }
  std::string graph_note() const override { return graph_note_; }
  // Adds the step's losses (read now: on a device, its one wait) to stats.
  void take_losses(StepStats& stats);
  // reduce_stats traced as a Wait: the replicas' last meeting in a step, where a
  // straggler's peers wait for it.
  Status meet_replicas(std::int64_t step, StepStats& stats);
  // Local SGD: every `period` steps the replicas average their parameters; returns the
  // divergence before averaging, sqrt(mean over replicas of |theta_r - mean theta|^2).
  Expected<double> average_parameters(std::int64_t step);

  Model model_;
  ParamArena arena_;  // model_'s parameters and gradients, packed
  std::vector<float> own_params_;  // local SGD: this rank's values before averaging
  Optimizer optimizer_;
  std::unique_ptr<GradientSync> sync_;
  bool local_sgd_ = false;
  StragglerInjector straggler_;
  Tensor input_, logits_, dlogits_, probs_;
  Buffer<std::int32_t> labels_;
  // A captured step with dropout: the batch's first sample in device memory, written
  // before each replay as the batch is (data_parallel_graph.cpp).
  Buffer<std::uint64_t> first_sample_;
  bool keyed_dropout_ = false;
  StepLosses losses_;
  enum class GraphState { Off, Waiting, Captured };
  GraphState graph_ = GraphState::Off;
  std::int64_t replayed_ = 0;
  std::string graph_note_;
};

// Whether a step of `plan` on `backend` with `ranks` ranks may be captured and replayed
// (training.graph): one rank on a device, nothing that changes from step to step.
bool step_graph_allowed(const Plan& plan, int ranks, const kernels::Backend& backend);
// Whether any layer, in a branch too, drops out (p > 0).
bool has_dropout(const std::vector<LayerSpec>& layers);

}  // namespace loom::engine
