// The asynchronous modes' figures: gradient staleness from the updates the parameter
// servers applied, time workers waited, and local SGD's parameter divergence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/analysis/stats.h"
#include "loom/core/plan.h"
#include "loom/trace/event.h"
#include "loom/trace/records.h"

namespace loom::analysis {

// Gradient staleness in the asynchronous modes, from the updates the parameter servers
// applied (run_store.h UpdateRecord: staleness = version_applied - version_read, versions
// counting updates in parameter_server mode and completed clocks in ssp mode).
// Percentiles are nearest-rank: the p-th percentile of n values is the smallest value
// with at least p% of the values <= it, i.e. the ceil(p*n/100)-th smallest; it is always
// one of the observed values. Per worker (a rank whose plan role is Worker, plus any rank
// named by an update), the same over that worker's updates; a worker without updates has
// zeros. wait_s = the union of that rank's Wait spans (blocked on a pull or on the
// staleness bound), in seconds of its own clock.
struct WorkerStaleness {
  int rank = 0;
  std::int64_t updates = 0;
  double mean = 0, p50 = 0, p95 = 0;
  std::int64_t max = 0;
  double wait_s = 0;
};

struct StalenessStats {
  bool present = false;  // the run recorded any update
  std::string mode;      // sync_mode_name(plan.parallel.sync.mode)
  int bound = -1;        // plan.parallel.sync.bound in ssp mode, else -1
  double mean = 0, p50 = 0, p95 = 0;
  std::int64_t max = 0;
  std::vector<WorkerStaleness> workers;  // ordered by rank
};

// Pure, like pipeline_stats: events_by_rank[r] = rank r's events (only Wait spans are read).
StalenessStats staleness_stats(const std::vector<trace::UpdateRecord>& updates,
                               const std::vector<std::vector<trace::Event>>& events_by_rank, const Plan& plan);

// Parameter divergence across local-SGD replicas: the "param_divergence" metrics.
struct DivergenceStats {
  std::int64_t count = 0;
  double mean = kNaN, last = kNaN;  // last = the latest by step, then time
};

}  // namespace loom::analysis
