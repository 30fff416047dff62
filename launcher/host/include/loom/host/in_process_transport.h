// The transport that trains a one-rank plan in this process (loom-cli run): the dataset
// loaded, the plan's device opened, the rank body (engine rank_body.h) run on this thread
// with its record written straight into the store every 100 ms. Its own target
// (loom_host_in_process), so that only what trains in process links the engine.
#pragma once

#include "loom/host/run_lifecycle.h"

namespace loom::host {

class InProcessTransport final : public RunTransport {
 public:
  RunOutcome run(const RunContext& run) override;
};

}  // namespace loom::host
