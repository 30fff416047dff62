// Preparing a resumed run (see resume.h).
#include "loom/host/resume.h"

#include "loom/store/checkpoint_files.h"

namespace loom::host {
namespace {

std::string run_name(std::int64_t run_id) { return "run " + std::to_string(run_id); }

// Another replica count for a data-parallel plan: extra ranks go where the last one was.
Status change_replicas(Plan& plan, int replicas) {
  const ParallelSpec& p = plan.parallel;
  if (!replicas_can_change(plan))
    return make_error(ErrorCode::InvalidArgument,
                      "--replicas changes data-parallel all-reduce runs only; this one has " +
                          std::to_string(p.stages) + " stage(s) and sync mode " + std::string(sync_mode_name(p.sync.mode)),
                      "resume it without --replicas");
  const DeviceSpec last = p.devices.empty() ? DeviceSpec{} : p.devices.back();
  plan.parallel.data_parallel = replicas;
  plan.parallel.devices.resize(std::size_t(world_size(plan)), last);
  return {};
}

Status check_plan(const Plan& plan) {
  const auto errors = validate_plan(plan);
  if (errors.empty()) return {};
  return make_error(ErrorCode::InvalidArgument,
                    "the resumed plan is not valid: " + errors.front().path + ": " + errors.front().reason);
}

}  // namespace

bool replicas_can_change(const Plan& plan) {
  return plan.parallel.stages == 1 && plan.parallel.sync.mode == SyncMode::AllReduce;
}

Expected<ResumeRequest> prepare_resume(store::RunStore& store, std::int64_t run_id, int replicas) {
  auto run = store.load_run(run_id);
  if (!run.ok()) return run.error();
  if (!trace::resumable(run->status))
    return make_error(ErrorCode::InvalidArgument, run_name(run_id) + " is " + std::string(trace::to_text(run->status)) + "; only a failed, stopped, hung or interrupted run can be resumed",
                      run->status == trace::RunStatus::Running ? "stop it first" : "start a new run instead");
  PlanResult parsed = parse_plan(run->plan_json);
  if (!parsed.ok())
    return make_error(ErrorCode::Corrupt, run_name(run_id) + "'s stored plan no longer parses: " +
                                              parsed.errors.front().path + ": " + parsed.errors.front().reason);
  ResumeRequest request{std::move(*parsed.plan), run_id, "", 0, 0};
  auto step_dir = store::latest_checkpoint(store::checkpoint_dir(store.path(), run_id));
  if (!step_dir.ok())
    return make_error(ErrorCode::NotFound, run_name(run_id) + " saved no complete checkpoint (looked in " +
                                               store::checkpoint_dir(store.path(), run_id) + ")",
                      "set training.checkpoint_every in the plan; a stopped run also saves one when it stops");
  auto header = store::load_checkpoint_header(store::checkpoint_file(*step_dir, 0));
  if (!header.ok()) return header.error();
  request.step_dir = *step_dir;
  request.step = header->step;
  request.saved_world = header->world;
  if (replicas > 0 && replicas != request.plan.parallel.data_parallel)
    LOOM_TRY(change_replicas(request.plan, replicas));
  LOOM_TRY(check_plan(request.plan));
  return request;
}

}  // namespace loom::host
