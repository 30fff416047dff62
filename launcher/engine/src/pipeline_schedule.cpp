#include "loom/engine/pipeline_schedule.h"

#include <algorithm>

namespace loom::engine {

std::vector<PipelineOp> stage_schedule(Schedule schedule, int stages, int stage, int microbatches) {
  std::vector<PipelineOp> ops;
  if (schedule == Schedule::GPipe) {
    for (int m = 0; m < microbatches; ++m) ops.push_back({true, m});
    for (int m = microbatches; m-- > 0;) ops.push_back({false, m});
    return ops;
  }
  const int warmup = std::clamp(stages - stage - 1, 0, microbatches);
  for (int m = 0; m < warmup; ++m) ops.push_back({true, m});
  for (int i = 0; warmup + i < microbatches; ++i) {
    ops.push_back({true, warmup + i});
    ops.push_back({false, i});
  }
  for (int m = microbatches - warmup; m < microbatches; ++m) ops.push_back({false, m});
  return ops;
}

int max_in_flight(const std::vector<PipelineOp>& ops) {
  int in_flight = 0, most = 0;
  for (const PipelineOp& op : ops) {
    in_flight += op.forward ? 1 : -1;
    most = std::max(most, in_flight);
  }
  return most;
}

}  // namespace loom::engine
