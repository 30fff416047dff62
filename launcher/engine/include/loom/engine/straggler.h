// Straggler injection for teaching: the plan can make a rank's compute `slowdown` times
// slower and add a random delay per step, so the cost of waiting (synchronous modes) and
// of staleness (asynchronous modes) can be shown on demand. The injected time is a sleep
// recorded as its own InjectedDelay span, never hidden inside compute spans.
#pragma once

#include <cstdint>
#include <random>

#include "loom/core/plan.h"
#include "loom/trace/recorder.h"

namespace loom::engine {

class StragglerInjector {
 public:
  StragglerInjector(const Plan& plan, int rank);
  bool active() const { return active_; }
  // After a step's compute took `compute_ns`: sleeps (slowdown - 1) x compute plus the
  // step's random delay. The delay sequence depends only on the plan's seed and the rank.
  void inject(std::int32_t step, std::int64_t compute_ns, trace::Recorder* recorder);
  // The delay of the next step in ns, drawn from the plan's distribution (mean delay_ms).
  std::int64_t draw_delay_ns();

 private:
  bool active_ = false;
  StragglerSpec spec_;
  std::mt19937_64 rng_;
};

}  // namespace loom::engine
