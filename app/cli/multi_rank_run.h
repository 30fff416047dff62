// `loom-cli run` for plans of more than one rank: a real mpirun (or srun) job supervised
// by launcher/host, with the same progress bar, Ctrl-C handling and exit codes as the
// in-process path.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "loom/core/plan.h"
#include "loom/host/resume.h"

namespace loom::cli {

struct MultiRankResult {
  int exit_code = 0;
  std::int64_t run_id = 0;  // 0 when no run was created
};

// `resume` (may be null): the checkpoint the ranks start from (loom-cli resume).
MultiRankResult run_multi_rank(const Plan& plan, const std::string& db_path, const std::atomic<bool>& stop,
                               const host::ResumeRequest* resume = nullptr);

}  // namespace loom::cli
