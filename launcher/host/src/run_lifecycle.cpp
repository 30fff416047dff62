// One recorded run, start to finish (see run_lifecycle.h).
#include "loom/host/run_lifecycle.h"

#include "loom/analysis/analysis.h"
#include "loom/store/checkpoint_files.h"
#include "loom/store/run_heartbeat.h"

namespace loom::host {

struct RunLifecycle::Guards {
  Guards(const std::string& db_path, std::int64_t run_id)
      : heartbeat(db_path, run_id),
        reserve(store::space_reserve_path(db_path, run_id), store::kRunSpaceReserveBytes) {}
  store::RunHeartbeat heartbeat;
  store::SpaceReserve reserve;  // given back when the store refuses a write
};

RunLifecycle::RunLifecycle(const Plan& plan, const RunOptions& options, store::RunStore store, std::int64_t run_id)
    : plan_(plan), options_(options), store_(std::move(store)), run_id_(run_id),
      guards_(std::make_unique<Guards>(store_.path(), run_id)) {}

RunLifecycle::~RunLifecycle() = default;

Expected<std::unique_ptr<RunLifecycle>> RunLifecycle::start(const Plan& plan, const std::string& db_path,
                                                            const RunOptions& options) {
  auto store = store::RunStore::open(db_path);
  if (!store.ok()) return store.error();
  trace::RunRecord record = store::new_run_record(plan, LOOM_VERSION);
  record.resumed_from = options.resumed_from;
  auto run_id = store->create_run(record);
  if (!run_id.ok()) return run_id.error();
  if (options.on_run_created) options.on_run_created(*run_id);
  return std::unique_ptr<RunLifecycle>(new RunLifecycle(plan, options, std::move(*store), *run_id));
}

Expected<RunOutcome> RunLifecycle::run(RunTransport& transport) {
  RunOutcome outcome = transport.run({plan_, options_, store_, run_id_, guards_->reserve});
  outcome.run_id = run_id_;
  LOOM_TRY(finish(outcome));
  return outcome;
}

Status RunLifecycle::finish(const RunOutcome& outcome) {
  // Before the status changes, so a list that sees the run finished sees its figures too.
  Status figures = analysis::store_training_figures(store_, run_id_);
  if (!figures.ok()) (void)store_.append_log(run_id_, "analysis: " + figures.error().describe() + "\n");
  auto write_end = [&] { return store_.finish_run(run_id_, outcome.status, outcome.wall_s, outcome.samples, outcome.error); };
  Status finished = write_end();
  if (!finished.ok() && guards_->reserve.release()) finished = write_end();  // a full disk: the room kept for this
  if (!finished.ok()) return finished;
  if (outcome.status == trace::RunStatus::Completed) store::remove_checkpoints(store::checkpoint_dir(store_.path(), run_id_));
  return {};
}

Expected<RunOutcome> run_plan(const Plan& plan, const std::string& db_path, RunTransport& transport,
                              const RunOptions& options) {
  auto lifecycle = RunLifecycle::start(plan, db_path, options);
  if (!lifecycle.ok()) return lifecycle.error();
  return (*lifecycle)->run(transport);
}

}  // namespace loom::host
