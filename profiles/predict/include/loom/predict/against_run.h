// A prediction beside a measured run of the same plan: the step, and per rank and span
// kind the time per step each says (docs/prediction.md, "Against a run").
#pragma once

#include <cstdint>
#include <vector>

#include "loom/predict/predictor.h"

namespace loom::predict {

struct KindAgainstRun {
  int rank = 0;
  trace::EventKind kind = trace::EventKind::Forward;
  double predicted_ms = 0;  // its spans' time in the predicted cycle, per step of it
  double measured_ms = 0;   // median over the run's steady steps of its spans' time per step
};

// A rank's memory: predicted (RankMemory) against what the rank reported at its end
// (the run's device_memory_* metrics: the engine's buffers in use, which keep their
// largest size, so the peak). -1 where the run recorded none.
struct MemoryAgainstRun {
  int rank = 0;
  std::int64_t predicted_total = 0, measured_total = -1;
  std::int64_t predicted_weights = 0, measured_weights = -1;  // parameters + gradients + optimizer state
  std::int64_t predicted_rest = 0, measured_rest = -1;        // activations, buffers and workspace
};

struct AgainstRun {
  double predicted_step_ms = 0;
  double measured_step_ms = 0;  // median over steady steps of the slowest rank's step
  std::int64_t steady_steps = 0;
  std::vector<KindAgainstRun> kinds;  // by rank, then kind; where either side has time
  std::vector<MemoryAgainstRun> memory;  // by rank
};

// The kinds compared: what a steady training step is made of.
bool compared_kind(trace::EventKind kind);

// NotFound for an unknown run; InvalidArgument when its ranks differ from the prediction's.
Expected<AgainstRun> against_run(const Prediction& prediction, store::RunStore& store, std::int64_t run_id);

}  // namespace loom::predict
