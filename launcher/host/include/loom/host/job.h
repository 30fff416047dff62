// Runs a multi-rank plan as a real job: creates the run in the store, starts the stream
// server and `mpirun` (through QProcess, with the argument list from launch_command.h),
// stores the ranks' live record as it arrives, forwards mpirun's output into the run's
// log, and decides how the run ended:
//  - completed: mpirun exited 0 and every rank reported Done;
//  - stopped:   the caller asked to stop (SIGUSR1 to mpirun, which forwards it to the
//               ranks: they finish the step, flush and report; SIGTERM after a grace
//               period, SIGKILL after another); everything that arrived stays stored;
//  - failed:    a rank died or reported an error (the run is marked failed as soon as the
//               host learns of it, the job is then ended), or mpirun failed.
// Blocking; call it from a worker thread where a GUI must stay responsive.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/host/store_feeder.h"

namespace loom::host {

struct JobOptions {
  std::string rank_executable;  // loom-rank (see default_rank_executable)
  std::string mpirun = "mpirun";
  std::function<void(const JobProgress&)> on_progress;  // on the calling thread, every ~100 ms
  std::function<void(const std::string&)> on_output;    // each line mpirun prints
  std::function<void(std::int64_t run_id)> on_run_created;  // once, before mpirun starts
  const std::atomic<bool>* stop = nullptr;
  std::chrono::milliseconds stop_grace{10000};   // SIGUSR1 to SIGTERM, and SIGTERM to SIGKILL
  std::chrono::milliseconds drain_grace{3000};   // after mpirun ends, for the last frames
  // Resuming (loom-cli resume, the workbench's Resume): the run continued and the
  // checkpoint step directory every rank starts from; the new run records resumed_from.
  std::int64_t resumed_from = 0;
  std::string resume_step_dir;
  std::int64_t resume_step = 0;  // the steps that checkpoint had completed
};

struct JobOutcome {
  std::int64_t run_id = 0;
  trace::RunStatus status = trace::RunStatus::Failed;  // completed, stopped, failed or hung
  std::string error;
  double wall_s = 0;
  std::int64_t samples = 0;
  int exit_code = 0;   // mpirun's
  std::string command;  // as run (describe_command)
};

// Fails without a run id only when the run cannot be created in the store.
Expected<JobOutcome> run_job(const Plan& plan, const std::string& db_path, const JobOptions& options);

// loom-rank next to `this_executable` (installed layout) or in the build tree
// (app/loom-cli -> launcher/rank/loom-rank); $LOOM_RANK overrides both.
std::string default_rank_executable(const std::string& this_executable);

}  // namespace loom::host
