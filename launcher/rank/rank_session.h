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

// The host passes the stream endpoint, secret, run id and checkpoint directories in
// environment variables: loom/stream/launch_env.h.

// Returns the process exit code: 0 done (or stopped), 1 failed, 2 misconfigured.
int run_rank(comm::Communicator& comm, const Plan& plan, const RankOptions& options);

}  // namespace loom::rank
