// The training loop of one rank, shared by every strategy: epochs and the data position,
// stopping, divergence, evaluation and checkpoints, each traced; metrics and progress
// reported through hooks so the caller decides where they go (a terminal, the run store, a
// live view). A strategy (data_parallel_trainer.h, pipeline_trainer.h, parameter_server.h)
// derives from TrainingLoop and supplies its step; training_loops.h picks one for a plan.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/batch.h"
#include "loom/engine/checkpoint.h"
#include "loom/engine/device_trace.h"
#include "loom/engine/model.h"
#include "loom/engine/optimizer.h"
#include "loom/trace/recorder.h"
#include "loom/trace/records.h"

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
  std::function<void(std::vector<trace::MetricRecord>&&)> on_metrics;
  // Set from a signal handler or another thread. With several ranks the decision is
  // collective: the flag travels with each step's loss all-reduce and every rank stops
  // after the same step, so none is left waiting in a collective its peers have left.
  const std::atomic<bool>* stop = nullptr;
  // This run's checkpoint directory (checkpoint.h); empty: no checkpoints. Every rank
  // saves there every `training.checkpoint_every` steps and when the run is stopped.
  std::string checkpoint_dir;
};

struct TrainResult {
  std::int64_t steps = 0;    // in this run (a resumed run counts from its checkpoint)
  std::int64_t last_step = 0;  // steps completed since the first run of the chain
  std::int64_t samples = 0;  // in this run
  double wall_s = 0;
  double final_loss = std::numeric_limits<double>::quiet_NaN();
  Evaluation test;
  bool stopped = false;
  std::string error;  // set when a step failed (a peer died, a collective failed)
  std::int64_t replayed_steps = 0;  // steps run as a replay of a captured step (training.graph)
  std::string graph_note;           // why a capture the plan allowed was not used, if one failed
};


// What a rank's backend memory holds at the end of a run, by part (docs/figures.md,
// "Device memory"). Buffers only grow, so the total is the run's peak. The rest is
// activations (every layer's outputs and their gradients, per pipeline slot), the batch
// and its labels, the loss rows, and gradient buckets kept in device memory.
struct DeviceMemory {
  std::int64_t total = 0, parameters = 0, gradients = 0, optimizer_state = 0, workspace = 0;
  std::int64_t activations_and_buffers() const { return total - parameters - gradients - optimizer_state - workspace; }
};

// The training loop shared by every strategy: epochs, shuffling, stopping, evaluation
// and reporting. A strategy supplies one optimizer step and one evaluation; with several
// ranks both are collective, so every rank runs the loop in lockstep.
class TrainingLoop {
 public:
  virtual ~TrainingLoop() = default;
  TrainResult run(const TrainerHooks& hooks);
  std::int64_t total_steps() const { return total_steps_; }
  // The parameters this rank holds (a pipeline stage holds only its own layers').
  virtual const std::vector<Param*>& params() const = 0;
  // Every parameter of the model, in model order, on rank 0 (empty elsewhere). Collective.
  virtual Expected<std::vector<NamedTensor>> gather_params() = 0;
  // Before run(): takes parameters and optimizer state from a complete checkpoint step
  // directory (checkpoint.h) and continues after its step. This rank's own file is
  // preferred; a rank the checkpoint's world did not have (resuming data parallelism
  // with more replicas) takes rank 0's, which synchronous replicas share.
  Status resume_from(const std::string& step_dir);
  std::int64_t first_step() const { return start_step_; }
  // This rank's backend memory by part (its backend's bytes in use, split).
  DeviceMemory device_memory();

 protected:
  TrainingLoop(const Plan& plan, const data::TrainTest& data, trace::Recorder* recorder, comm::Communicator* comm,
               kernels::Backend& backend);

  struct StepStats {
    double loss = 0;
    std::int64_t correct = 0;
    bool stop = false;  // some rank asked to stop (after reduce_stats: any rank)
    std::int64_t samples = 0;  // samples the loss and correct count cover; 0 = the global batch
  };
  // One optimizer step on the global batch `batch_in_epoch` of `order`; ends with
  // reduce_stats so every rank returns the global loss and the stop vote.
  virtual Expected<StepStats> train_step(std::int64_t step, const std::vector<std::int64_t>& order,
                                         std::int64_t batch_in_epoch, bool stop_requested) = 0;
  // Called on every rank when an evaluation is due; rank 0 gets the result to report.
  virtual Expected<std::optional<Evaluation>> evaluate_due() = 0;
  // After the last step, before the result is returned (extra end-of-run metrics).
  virtual void finish(const TrainerHooks& /*hooks*/, std::int64_t /*steps*/) {}
  // The optimizer whose state a checkpoint keeps; nullptr: an asynchronous worker, whose
  // parameters and state live on the servers (its checkpoint holds only its step).
  virtual Optimizer* optimizer() { return nullptr; }
  // What training.graph did: steps replayed, and why a capture failed (run() reports them).
  virtual std::int64_t replayed_steps() const { return 0; }
  virtual std::string graph_note() const { return {}; }
  // The layers' kernel scratch memory (DeviceMemory::workspace).
  virtual std::int64_t workspace_bytes() const = 0;
  // The parameters and gradients packed in one arena (padding included), where they are.
  virtual const ParamArena* packed_params() const { return nullptr; }

  Status reduce_stats(StepStats& stats);
  // Metrics a step produced beyond loss and accuracy; reported with the step.
  std::vector<trace::MetricRecord> step_metrics_;
  // The slice of the global batch that `chunk` of `chunks` equal chunks covers.
  data::BatchSlice chunk_of_batch(std::int64_t batch_in_epoch, int chunk, int chunks) const;
  // Global index of a slice's first sample over the whole run (keys dropout masks).
  std::int64_t first_sample(std::int64_t step, std::int64_t batch_in_epoch, const data::BatchSlice& slice) const;
  // The test set in order, cut into evaluation batches: the slices, and the order they index.
  const std::vector<data::BatchSlice>& test_batches() const { return test_batches_; }
  const std::vector<std::int64_t>& test_order() const { return test_order_; }

  const Plan& plan_;
  const data::TrainTest& data_;
  trace::Recorder* recorder_;
  comm::Communicator* comm_;
  kernels::Backend& backend_;  // where the model and its batches live
  int rank_ = 0;
  int ranks_ = 1;
  // Traced on a device: its layer spans, stamped and resolved after each step; else null.
  std::unique_ptr<DeviceTrace> device_trace_;

 private:
  // Where run() stands: steps completed, the step of the last checkpoint, the last loss.
  struct Position {
    std::int64_t step = 0, saved_at = 0;
    double last_loss = std::numeric_limits<double>::quiet_NaN();
  };
  // One step of run() and what is due after it; false when the loop ends (result says why).
  bool step_once(Position& at, int epoch, std::int64_t batch, bool epoch_end, const std::vector<std::int64_t>& order,
                 const TrainerHooks& hooks, TrainResult& result);
  Status after_step(Position& at, bool epoch_end, const TrainerHooks& hooks, TrainResult& result);
  void report_step(std::int64_t step, int epoch, const StepStats& stats, const TrainerHooks& hooks);
  void report_evaluation(std::int64_t step, const Evaluation& eval, const TrainerHooks& hooks);
  bool due_for_evaluation(std::int64_t steps_done, bool end_of_epoch) const;
  Status save_checkpoint_at(const std::string& run_dir, std::int64_t step);

  std::int64_t total_steps_ = 0;
  std::int64_t start_step_ = 0;  // steps a resumed run's checkpoint had completed
  std::int64_t start_ns_ = 0;
  std::int64_t steady_start_ns_ = 0;  // end of the warm-up step (docs/figures.md)
  std::int64_t evaluation_ns_ = 0;    // evaluating since then: not training
  std::vector<std::int64_t> test_order_;
  std::vector<data::BatchSlice> test_batches_;
};

// Loss and accuracy of `model` on the test set, in evaluation batches (one Evaluate span).
Evaluation evaluate_model(Model& model, const data::Dataset& test, const std::vector<data::BatchSlice>& batches,
                          const std::vector<std::int64_t>& order, trace::Recorder* recorder);

// The end-of-run metrics of `loop`'s device memory: device_memory_bytes and one
// device_memory_<part>_bytes per part (docs/figures.md), for rank `rank` at `step`.
std::vector<trace::MetricRecord> device_memory_metrics(TrainingLoop& loop, int rank, std::int64_t step);

// "the loss diverged at step N (loss nan); ...": the error of a run stopped by divergence.
std::string diverged(std::int64_t step, double loss);

// Optimizer steps the plan trains for on a training set of `train_count` samples.
std::int64_t compute_total_steps(const Plan& plan, std::int64_t train_count);

// One rank's checkpoint file for `step` under `run_dir` (checkpoint.h), keeping the newest
// two steps of this rank.
Status save_rank_checkpoint(const std::string& run_dir, const Plan& plan, int rank, int world, std::int64_t step,
                            std::int64_t optimizer_steps, std::vector<NamedTensor> tensors);
// Copies each parameter's values from `found` (tensors of checkpoint files in `step_dir`,
// by name); a missing or differently sized one is an error with `hint`.
Status restore_params(const std::vector<Param*>& params, const std::map<std::string, const std::vector<float>*>& found,
                      const std::string& step_dir, const std::string& hint);
// A checkpoint file, refused when saved with another global batch or optimizer.
Expected<Checkpoint> load_matching_checkpoint(const std::string& path, const Plan& plan);

}  // namespace loom::engine
