// Runs a plan in this process and records it in the run store: the single-rank path of
// `loom-cli run`. The run is created before the data is loaded, so a run that fails
// (missing dataset, write error) is still stored, as failed, with its error and with
// whatever it recorded.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/engine/training_loop.h"
#include "loom/store/run_store.h"
#include "loom/trace/recorder.h"

namespace loom::engine {

struct LocalRunOptions {
  std::function<void(const StepProgress&)> on_step;
  const std::atomic<bool>* stop = nullptr;
  // Resuming (loom-cli resume): the run continued and the checkpoint step directory to
  // start from; the new run records resumed_from.
  std::int64_t resumed_from = 0;
  std::string resume_step_dir;
};

struct LocalRunOutcome {
  std::int64_t run_id = 0;
  trace::RunStatus status = trace::RunStatus::Failed;  // completed, stopped or failed
  std::string error;   // set when failed
  TrainResult result;
};

// Fails (without a run id) only when the run cannot even be created in the store.
Expected<LocalRunOutcome> run_and_record(const Plan& plan, store::RunStore& store, const LocalRunOptions& options);

// BLAS threads for a rank: the plan's `training.threads`, else the cores this process may
// use (machine::cores_available: affinity, cgroup quota) divided among the ranks placed
// on this host. Returns the number applied.
int apply_thread_count(const Plan& plan, int ranks_on_host);

std::string loom_version();

// The recorder training records into: none under LOOM_TRACE=off (a benchmark switch,
// bench/tracing_cost.py), so the step-time cost of tracing can be measured against the
// samples_per_s metric, which the trainer computes without the recorder. Setup spans are
// recorded either way.
trace::Recorder* training_recorder(trace::Recorder& recorder);

}  // namespace loom::engine
