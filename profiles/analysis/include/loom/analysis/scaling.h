// Scaling efficiency: a run's throughput against the newest completed single-rank run of
// the same plan.
#pragma once

#include <cstdint>
#include <string>

namespace loom::analysis {

// Throughput against the newest completed single-rank run of the same plan (the plan
// JSON with "parallel" and "name" removed compares equal):
//   efficiency = samples_per_s / (world_size * reference_samples_per_s).
struct Scaling {
  std::int64_t reference_run_id = 0;
  double reference_samples_per_s = 0;
  double efficiency = 0;
};

// True when two plan JSON texts describe the same training apart from "parallel" and
// "name" (the single-rank reference for scaling efficiency). False if either is unparsable.
bool same_plan_but_parallelism(const std::string& plan_json_a, const std::string& plan_json_b);

}  // namespace loom::analysis
