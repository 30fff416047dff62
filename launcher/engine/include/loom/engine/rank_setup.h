// What a rank sets up around its body (rank_body.h), wherever it runs: its BLAS threads
// and the recorder training records into.
#pragma once

#include "loom/core/plan.h"
#include "loom/trace/recorder.h"

namespace loom::engine {

// BLAS threads for a rank: the plan's `training.threads`, else the cores this process may
// use (machine::cores_available: affinity, cgroup quota) divided among the ranks placed
// on this host. Returns the number applied.
int apply_thread_count(const Plan& plan, int ranks_on_host);

// The recorder training records into: none under LOOM_TRACE=off (a benchmark switch,
// bench/tracing_cost.py), so the step-time cost of tracing can be measured against the
// samples_per_s metric, which the trainer computes without the recorder. Setup spans are
// recorded either way.
trace::Recorder* training_recorder(trace::Recorder& recorder);

}  // namespace loom::engine
