// The training window: the part of a run every training figure is measured over
// (steady steps, without setup, warm-up or evaluation), and a rank's steady step numbers.
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "loom/trace/event.h"

namespace loom::analysis {

// Every training figure is measured over steady training only (docs/figures.md is the
// one place these definitions are written out for users):
//   setup     = a rank's Setup spans: loading data, clock alignment, the bandwidth probe,
//               building the model (and the clock alignment after training)
//   warm-up   = the first kWarmupSteps steps of each rank (first touches of every buffer,
//               allocation, lazy initialisation)
//   training window = from the start of a rank's first steady step (the first step after
//               warm-up) to the end of its last step; a rank without Step spans (a
//               parameter server) uses its first to last event other than Setup. The
//               evaluations inside it (Evaluate spans on any stream: rank 0 evaluating,
//               the other ranks waiting for it) are not training and are left out of it.
inline constexpr int kWarmupSteps = 1;

struct TrainingWindow {
  std::int64_t start_ns = 0, end_ns = 0;  // empty (start == end) when nothing was recorded
  std::int64_t steady_steps = 0;          // Step spans inside the window
  std::int64_t warmup_ns = 0;             // union of the warm-up Step spans
  std::int64_t setup_ns = 0;              // union of the Setup spans (anywhere in the run)
  bool from_steps = false;                // false: no Step spans, the fallback above
  std::int64_t evaluation_ns = 0;         // union of the Evaluate spans inside [start, end)
  // The window's training time: its span less its evaluations.
  double seconds() const { return static_cast<double>(end_ns - start_ns - evaluation_ns) / 1e9; }
};

// The window of one rank's events (any order). While fewer than kWarmupSteps + 1 steps
// exist (a live view early in a run), the window covers the steps there are and
// steady_steps counts them.
TrainingWindow training_window(const std::vector<trace::Event>& events);

// A rank's steady step numbers in [from, to): the steps it ran (its Step spans, or for a
// rank without them, such as a parameter server, the steps its events name) less its
// first kWarmupSteps.
std::set<std::int32_t> steady_step_numbers(const std::vector<trace::Event>& events, std::int64_t from = 0,
                                           std::int64_t to = std::numeric_limits<std::int64_t>::max());

}  // namespace loom::analysis
