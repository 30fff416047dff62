// One rank's work, the same wherever the rank runs: in loom-cli's process (a one-rank
// plan, launcher/host in_process_transport.h) or as a loom-rank process under mpirun or
// srun (launcher/rank). The transport loads the data, opens the device and connects its
// record's sink; the body does the rest in this order:
//   build the rank's work (recorded as the BuildModel setup phase), resume it from a
//   checkpoint when asked, run it, add what the device held, let the transport flush
//   (loom-rank aligns clocks there), and finish (the final parameters, when asked).
// A rank's work follows its role (core plan.h rank_role): a training loop, a parameter
// server, serving's inference server (rank 0) or one of its clients.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/data/dataset.h"
#include "loom/engine/training_loop.h"
#include "loom/kernels/backend.h"
#include "loom/trace/recorder.h"

namespace loom::engine {

// What a rank has before its body runs.
struct RankContext {
  const Plan& plan;
  const ModelInfo& info;
  const data::TrainTest& data;
  trace::Recorder& recorder;
  comm::Communicator* comm;   // null: one process
  kernels::Backend& backend;  // this rank's device
  std::int64_t started_ns = 0;  // when training may start (after the transport's probes)
  int rank() const { return comm ? comm->rank() : 0; }
};

// What the transport asks of the body and where the body's records go.
struct RankHooks {
  const std::atomic<bool>* stop = nullptr;  // the Stop button, SIGUSR1, Ctrl-C
  std::string checkpoint_dir;               // empty: no checkpoints
  std::string resume_step_dir;              // empty: start from scratch
  std::string dump_params;                  // rank 0 writes the final parameters here when set
  std::function<void(const StepProgress&)> on_step;
  std::function<void(std::vector<trace::MetricRecord>&&)> on_metrics;
  std::function<void(std::vector<trace::UpdateRecord>&&)> on_updates;  // a server's applied updates
  // Between the run and finishing: the transport's last records out (loom-rank aligns
  // clocks first, a collective). Its error fails the rank.
  std::function<Status()> flush;
};

// How a rank's body ended.
struct RankEnd {
  trace::RunStatus status = trace::RunStatus::Failed;  // completed, stopped or failed
  std::string error;          // failed: why, in words for the run's error
  int exit_code = 1;          // loom-rank's: 0 ended (completed or stopped), 1 failed, 2 not buildable
  std::string note;           // said once in the run's log (a graph capture the device refused)
  TrainResult train;          // a training rank's result; empty for the others
  bool ok() const { return exit_code == 0; }
};

// What a rank does, by the role the plan gives it (loom::RankRole). The body calls build,
// then resume (only with a step directory), run, and finish (only when run succeeded and
// the transport flushed).
class RankWork {
 public:
  virtual ~RankWork() = default;
  // Builds the model (or shard, or server); may throw for a plan too large or malformed.
  virtual Status build(const RankContext& context, const RankHooks& hooks) = 0;
  // Whether build made a model worth a BuildModel setup span (a serving client has none).
  virtual bool builds_model() const { return true; }
  virtual Status resume(const std::string& step_dir);
  virtual RankEnd run(const RankContext& context, const RankHooks& hooks) = 0;
  // After the records are flushed: collective work such as gathering final parameters.
  virtual Status finish(const RankContext& context, const RankHooks& hooks);
};

// The work of the role the plan gives this rank.
std::unique_ptr<RankWork> make_rank_work(const RankContext& context);

// The body above, for `context`'s rank; exceptions (std::bad_alloc for a model this
// machine cannot hold, a bug) end it as failed with their message.
RankEnd run_rank_body(const RankContext& context, const RankHooks& hooks);

}  // namespace loom::engine
