// The order in which one pipeline stage runs the forward and backward passes of the
// micro-batches of one flush (one optimizer step's worth, or one accumulation micro-step).
//   GPipe: every forward, then every backward (last micro-batch first, as in the GPipe
//          paper), so a stage holds the activations of all M micro-batches at once.
//   1F1B:  stage s of p first runs min(p - s - 1, M) forwards (warm-up), then alternates
//          one forward and one backward, then finishes the remaining backwards
//          (cool-down); a stage holds at most p - s micro-batches (PipeDream-Flush).
// Both have the same bubble under equal stage times: (p - 1) / (M + p - 1) of the flush.
#pragma once

#include <vector>

#include "loom/core/plan.h"

namespace loom::engine {

struct PipelineOp {
  bool forward = true;
  int microbatch = 0;

  bool operator==(const PipelineOp&) const = default;
};

std::vector<PipelineOp> stage_schedule(Schedule schedule, int stages, int stage, int microbatches);

// The largest number of micro-batches between their forward and their backward.
int max_in_flight(const std::vector<PipelineOp>& ops);

}  // namespace loom::engine
