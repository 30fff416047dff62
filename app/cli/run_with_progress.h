// `loom-cli run`, `resume` and `lesson`: a plan through the run lifecycle (host
// run_lifecycle.h) with a progress bar on standard error. One rank trains in this process
// (InProcessTransport), several as an mpirun or srun job (MpirunTransport); a run that
// fails or hangs is said on standard error, with its launch command.
#pragma once

#include <atomic>
#include <string>

#include "loom/core/plan.h"
#include "loom/host/resume.h"
#include "loom/host/run_lifecycle.h"

namespace loom::cli {

// `resume` (may be null): the checkpoint the ranks start from (loom-cli resume).
Expected<host::RunOutcome> run_with_progress(const Plan& plan, const std::string& db_path,
                                             const std::atomic<bool>& stop, const host::ResumeRequest* resume);

// loom-cli's exit code for how the run ended: kOk, kStopped or kFailed.
int exit_code_of(const Expected<host::RunOutcome>& outcome);

}  // namespace loom::cli
