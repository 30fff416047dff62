// Asynchronous data parallelism through parameter servers (plan sync modes
// parameter_server and ssp). Ranks 0..W-1 are workers, W..W+S-1 servers (core rank_role).
//
// Every parameter tensor lives on one server (greedy by size, see shard_params). A worker
// step: pull every server's tensors, compute a gradient on its shard of the global batch
// (scaled by 1/global batch, as in synchronous data parallelism, so the W gradients of
// one clock add up to the full batch's), push each server its part. A server applies each
// gradient as one optimizer step the moment it arrives.
//
// Versions. parameter_server: a server's version counts the gradients it has applied;
// a worker's pull records the version it read and staleness = version when its gradient
// is applied - version read (with W equal workers about W - 1). ssp: the version is the
// server's clock, the number of steps every unfinished worker has pushed; a pull for
// step c is answered only once clock >= c - bound, so staleness (in clocks) never
// exceeds the bound, and bound 0 is synchronous training.
//
// Messages (point-to-point through the communicator): a 24-byte request header on
// kRequestTag (pull, push, read, done), a push's packed gradient on kGradientTag, and the
// reply to a pull or read, an int64 version followed by the packed tensors, on kParamsTag.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/engine/message_tags.h"
#include "loom/engine/model.h"
#include "loom/engine/optimizer.h"
#include "loom/engine/straggler.h"
#include "loom/engine/training_loop.h"
#include "loom/trace/recorder.h"
#include "loom/trace/records.h"

namespace loom::engine {


bool uses_parameter_server(const Plan& plan);

// Server index of each tensor in `sizes`: largest first, each to the least loaded server
// (ties: lower index), so shards are balanced by bytes. Every rank computes the same.
std::vector<int> shard_params(const std::vector<std::int64_t>& sizes, int servers);

using UpdateHook = std::function<void(std::vector<trace::UpdateRecord>&&)>;

// One server rank: serves pulls and applies pushes until every worker is done.
class ParameterServer {
 public:
  // The shard and its optimizer state live in `backend` (the server rank's device).
  ParameterServer(const Plan& plan, const ModelInfo& info, trace::Recorder* recorder, comm::Communicator* comm,
                  kernels::Backend& backend = default_backend());
  ~ParameterServer();
  Status serve(const UpdateHook& on_updates);
  // Before serve(): save this server's shard and optimizer state under `run_dir`
  // (checkpoint.h) each time the slowest worker's clock reaches a multiple of
  // training.checkpoint_every, and when the workers stop before `total_steps`.
  void set_checkpoints(std::string run_dir, std::int64_t total_steps);
  // Before serve(): this server's shard and optimizer state from a checkpoint step
  // directory; every worker's clock starts at its step.
  Status resume_from(const std::string& step_dir);
  // After serve(): sends this server's tensors to rank 0 (for --dump-params).
  Status send_final_params();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// One worker rank of the asynchronous modes.
class AsyncWorker final : public TrainingLoop {
 public:
  AsyncWorker(const Plan& plan, const ModelInfo& info, const data::TrainTest& data, trace::Recorder* recorder,
              comm::Communicator* comm, kernels::Backend& backend = default_backend());
  ~AsyncWorker() override;
  const std::vector<Param*>& params() const override { return model_.params(); }
  // Rank 0 collects every server's final tensors (after all workers finished).
  Expected<std::vector<NamedTensor>> gather_params() override;

 private:
  Expected<StepStats> train_step(std::int64_t step, const std::vector<std::int64_t>& order,
                                 std::int64_t batch_in_epoch, bool stop_requested) override;
  Expected<std::optional<Evaluation>> evaluate_due() override;
  void finish(const TrainerHooks& hooks, std::int64_t steps) override;
  std::int64_t workspace_bytes() const override { return model_.workspace_bytes(); }
  Status pull(std::int32_t request, std::int64_t step);
  Status push(std::int64_t step);
  Evaluation evaluate();

  Model model_;
  int workers_ = 1;
  int servers_ = 1;
  std::vector<std::vector<Param*>> shards_;        // per server: its tensors, in model order
  std::vector<std::vector<char>> replies_;         // per server: version + its tensors, sized once
  std::vector<float> gradient_;                    // one server's packed gradient
  std::vector<std::int64_t> version_read_;         // per server, from the last pull
  StragglerInjector straggler_;
  Tensor input_, logits_, dlogits_, probs_;
  Buffer<std::int32_t> labels_;
  bool done_sent_ = false;
};

}  // namespace loom::engine
