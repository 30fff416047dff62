// One rank's body (see rank_body.h).
#include "loom/engine/rank_body.h"

#include <exception>
#include <new>

namespace loom::engine {
namespace {

RankEnd failed(const std::string& error, int exit_code) {
  RankEnd end;
  end.status = trace::RunStatus::Failed;
  end.error = error;
  end.exit_code = exit_code;
  return end;
}

// Build (a plan that cannot be built is misconfigured: exit 2) and resume.
Status build_and_resume(RankWork& work, const RankContext& context, const RankHooks& hooks, RankEnd& end) {
  const std::int64_t build_start = trace::now_ns();
  Status built = [&]() -> Status {
    try {
      return work.build(context, hooks);
    } catch (const std::bad_alloc&) {
      throw;  // out of memory is the run's failure, not a malformed plan
    } catch (const std::exception& e) {
      return make_error(ErrorCode::InvalidArgument, e.what());
    }
  }();
  if (!built.ok()) {
    end = failed(built.error().describe(), 2);
    return built;
  }
  if (!hooks.resume_step_dir.empty()) {
    Status resumed = work.resume(hooks.resume_step_dir);
    if (!resumed.ok()) {
      end = failed("cannot resume: " + resumed.error().describe(), 1);
      return resumed;
    }
  }
  if (work.builds_model()) trace::record_setup(context.recorder, trace::SetupPhase::BuildModel, build_start);
  return {};
}

RankEnd run_work(RankWork& work, const RankContext& context, const RankHooks& hooks) {
  RankEnd end;
  if (!build_and_resume(work, context, hooks, end).ok()) return end;
  end = work.run(context, hooks);
  if (!end.ok()) return end;
  if (hooks.flush) {
    Status flushed = hooks.flush();
    if (!flushed.ok()) return failed(flushed.error().describe(), 1);
  }
  Status finished = work.finish(context, hooks);
  if (!finished.ok()) return failed(finished.error().describe(), 1);
  return end;
}

}  // namespace

Status RankWork::resume(const std::string& /*step_dir*/) {
  return make_error(ErrorCode::InvalidArgument, "this rank's role keeps no checkpoints");
}

Status RankWork::finish(const RankContext& /*context*/, const RankHooks& /*hooks*/) { return {}; }

RankEnd run_rank_body(const RankContext& context, const RankHooks& hooks) {
  try {
    const std::unique_ptr<RankWork> work = make_rank_work(context);
    return run_work(*work, context, hooks);
  } catch (const std::bad_alloc&) {
    return failed("out of memory while training (make the model or the batch smaller; "
                  "loom-cli validate estimates the memory a plan needs)", 1);
  } catch (const std::exception& e) {
    return failed(std::string("training stopped by an exception: ") + e.what(), 1);
  }
}

}  // namespace loom::engine
