// The training loop of one rank: data loading, forward, loss, backward, optimizer and
// evaluation, each traced; metrics and progress reported through hooks so the caller
// decides where they go (a terminal, the run store, a live view).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/gradient_sync.h"
#include "loom/engine/model.h"
#include "loom/engine/optimizer.h"
#include "loom/profiles/recorder.h"
#include "loom/profiles/run_store.h"

namespace loom::engine {

struct StepProgress {
  std::int64_t step = 0;         // steps completed
  std::int64_t total_steps = 0;
  int epoch = 0;
  double loss = 0;
  double samples_per_s = 0;      // over the run so far
  double elapsed_s = 0;
  double eta_s = 0;
};

struct Evaluation {
  double loss = std::numeric_limits<double>::quiet_NaN();
  double accuracy = std::numeric_limits<double>::quiet_NaN();
};

struct TrainerHooks {
  std::function<void(const StepProgress&)> on_step;
  std::function<void(std::vector<store::MetricRecord>&&)> on_metrics;
  // Set from a signal handler or another thread. With several ranks the decision is
  // collective: the flag travels with each step's loss all-reduce and every rank stops
  // after the same step, so none is left waiting in a collective its peers have left.
  const std::atomic<bool>* stop = nullptr;
};

struct TrainResult {
  std::int64_t steps = 0;
  std::int64_t samples = 0;
  double wall_s = 0;
  double final_loss = std::numeric_limits<double>::quiet_NaN();
  Evaluation test;
  bool stopped = false;
  std::string error;  // set when a step failed (a peer died, a collective failed)
};


class Trainer {
 public:
  // With a communicator of more than one rank this is one data-parallel replica: it
  // trains on shard comm->rank() of every global batch and sums gradients across ranks.
  Trainer(const Plan& plan, const ModelInfo& info, const data::TrainTest& data, trace::Recorder* recorder,
          comm::Communicator* comm = nullptr);

  TrainResult run(const TrainerHooks& hooks);
  Evaluation evaluate();
  std::int64_t total_steps() const { return total_steps_; }
  Model& model() { return model_; }

 private:
  struct StepStats {
    double loss = 0;
    std::int64_t correct = 0;
    bool stop = false;  // some rank asked to stop (after reduce_stats: any rank)
  };
  Status reduce_stats(StepStats& stats);
  Expected<StepStats> train_step(std::int64_t step, const std::vector<std::int64_t>& order, std::int64_t batch_in_epoch,
                                 bool stop_requested);
  void report_step(std::int64_t step, int epoch, const StepStats& stats, const TrainerHooks& hooks);
  void report_evaluation(std::int64_t step, const Evaluation& eval, const TrainerHooks& hooks);
  bool due_for_evaluation(std::int64_t steps_done, bool end_of_epoch) const;

  const Plan& plan_;
  const data::TrainTest& data_;
  trace::Recorder* recorder_;
  comm::Communicator* comm_;
  int rank_ = 0;
  int ranks_ = 1;
  Model model_;
  Optimizer optimizer_;
  std::unique_ptr<GradientSync> sync_;
  std::int64_t total_steps_ = 0;
  Tensor input_, logits_, dlogits_, probs_;
  std::vector<std::int32_t> labels_;
  std::int64_t start_ns_ = 0;
};

}  // namespace loom::engine
