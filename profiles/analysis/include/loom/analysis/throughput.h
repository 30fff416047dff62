// Steady throughput of a run: samples over the steady steps of its first-stage workers,
// on rank 0's clock.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/core/plan.h"
#include "loom/trace/event.h"

namespace loom::analysis {

// Run throughput (docs/figures.md):
//   train_s       = from the earliest start of a steady step on any first-stage worker to
//                   the latest end of a step on any worker, on rank 0's clock
//   train_samples = steady Step spans of the first-stage workers x (global batch /
//                   data_parallel): each such step consumed that many samples
//   samples_per_s = train_samples / train_s ("steady steps"), or the job's samples / wall_s
//                   ("whole run") when no Step spans were recorded (tracing off)
//   wall_s        = the whole job, launch and setup included; wall_samples_per_s the same
//                   samples over it
struct Throughput {
  double train_s = 0;
  std::int64_t train_samples = 0, steady_steps = 0;
  bool from_steps = false;
};

// Steady throughput of a run from its ranks' events (see Throughput); offsets_ns[r] is rank
// r's clock minus rank 0's (0 where unknown). events_by_rank may hold only Step spans.
Throughput steady_throughput(const Plan& plan, const std::vector<std::vector<trace::Event>>& events_by_rank,
                             const std::vector<std::int64_t>& offsets_ns);

}  // namespace loom::analysis
