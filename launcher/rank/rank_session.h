// One rank's whole run under mpirun: connect the live stream to the host (when the host
// started this job), check the world, load data, align clocks, probe point-to-point
// bandwidth, train, align clocks again, and report Done with the number of events
// recorded, so the host can check that everything arrived.
#pragma once

#include <string>

#include "loom/comm/communicator.h"
#include "loom/core/plan.h"

namespace loom::rank {

struct RankOptions {
  std::string plan_path;
  std::string dump_params;  // rank 0 writes the final parameters here when set
};

// The host passes the stream endpoint, the run's secret and its id in these variables
// (mpirun -x exports them to every rank, on every host); without them the rank runs
// standalone and only prints its summary.
inline constexpr const char* kStreamEnv = "LOOM_STREAM";
inline constexpr const char* kSecretEnv = "LOOM_STREAM_SECRET";
inline constexpr const char* kRunIdEnv = "LOOM_RUN_ID";
// Checkpoints (engine/checkpoint.h): the directory this run's ranks save into, and the
// step directory a resumed run starts from. Set by the host; unset, nothing is saved.
inline constexpr const char* kCheckpointDirEnv = "LOOM_CHECKPOINT_DIR";
inline constexpr const char* kResumeFromEnv = "LOOM_RESUME_FROM";

// Returns the process exit code: 0 done (or stopped), 1 failed, 2 misconfigured.
int run_rank(comm::Communicator& comm, const Plan& plan, const RankOptions& options);

}  // namespace loom::rank
