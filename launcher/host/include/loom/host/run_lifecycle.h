// One recorded run, start to finish, however its ranks are carried. The lifecycle owns
// what every run does once: the run record created in the store (status running, so a
// run that fails early is still stored, as failed, with its error), the heartbeat that
// tells readers its owner lives, the disk space kept for closing it, the stop request,
// the training figures stored with it, and its end (status, wall time, samples, error)
// written with the kept space when the disk has filled, checkpoints removed once it
// completed. A transport runs the ranks in between:
//   - in this process (in_process_transport.h): a one-rank plan, loom-cli run;
//   - as an mpirun or srun job (job.h): every plan of several ranks, and every run the
//     workbench starts (a crash of training never takes the window down with it).
// Both carry the same rank body (engine rank_body.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/host/store_feeder.h"
#include "loom/store/run_store.h"
#include "loom/store/space_reserve.h"

namespace loom::host {

struct RunOptions {
  std::function<void(const JobProgress&)> on_progress;      // on the calling thread
  std::function<void(std::int64_t run_id)> on_run_created;  // once, before any rank starts
  const std::atomic<bool>* stop = nullptr;  // set to stop at an agreed step, record kept
  // Resuming (loom-cli resume, the workbench's Resume): the run continued, the checkpoint
  // step directory every rank starts from and the steps it had completed.
  std::int64_t resumed_from = 0;
  std::string resume_step_dir;
  std::int64_t resume_step = 0;
};

// How a run ended, for every caller (loom-cli, the workbench, tests).
struct RunOutcome {
  std::int64_t run_id = 0;
  trace::RunStatus status = trace::RunStatus::Failed;  // completed, stopped, failed or hung
  std::string error;         // failed or hung: why
  double wall_s = 0;         // the whole job, loading data included
  std::int64_t samples = 0;  // trained in this run (a resumed run counts from its checkpoint)
  int exit_code = 0;         // the launcher's (mpirun, srun); 0 in process
  std::string command;       // the launch command as run; empty in process
};

// What a transport is given: the run as created, and the room kept for closing it (a
// transport that sees the store refuse writes gives it back to store the failure).
struct RunContext {
  const Plan& plan;
  const RunOptions& options;
  store::RunStore& store;
  std::int64_t run_id;
  store::SpaceReserve& reserve;
};

class RunTransport {
 public:
  virtual ~RunTransport() = default;
  // Runs the plan's ranks to their end, their record into the run; the outcome without
  // run_id. Never leaves a rank behind.
  virtual RunOutcome run(const RunContext& run) = 0;
};

class RunLifecycle {
 public:
  // Opens the store and creates the run; fails (without a run id) only when the run cannot
  // be created in the store.
  static Expected<std::unique_ptr<RunLifecycle>> start(const Plan& plan, const std::string& db_path,
                                                       const RunOptions& options);
  ~RunLifecycle();
  std::int64_t run_id() const { return run_id_; }
  // The ranks through `transport`, then the figures and the run's end. Fails only when
  // the end cannot be stored even with the kept space.
  Expected<RunOutcome> run(RunTransport& transport);

 private:
  RunLifecycle(const Plan& plan, const RunOptions& options, store::RunStore store, std::int64_t run_id);
  Status finish(const RunOutcome& outcome);

  const Plan& plan_;
  const RunOptions& options_;
  store::RunStore store_;
  std::int64_t run_id_;
  struct Guards;  // the heartbeat and the space reserve, alive while the run is
  std::unique_ptr<Guards> guards_;
};

// start, then run: what loom-cli, the workbench and the tests call.
Expected<RunOutcome> run_plan(const Plan& plan, const std::string& db_path, RunTransport& transport,
                              const RunOptions& options);

}  // namespace loom::host
