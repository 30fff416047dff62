#include "loom/engine/straggler.h"

#include <chrono>
#include <thread>

namespace loom::engine {

StragglerInjector::StragglerInjector(const Plan& plan, int rank)
    : rng_(plan.training.seed * 0x9E3779B97F4A7C15ull + std::uint64_t(rank) + 1) {
  for (const StragglerSpec& s : plan.parallel.stragglers) {
    if (s.rank != rank) continue;
    spec_ = s;
    active_ = s.slowdown > 1.0 || (s.delay != DelayDistribution::None && s.delay_ms > 0);
  }
}

std::int64_t StragglerInjector::draw_delay_ns() {
  const double mean_ns = spec_.delay_ms * 1e6;
  switch (spec_.delay) {
    case DelayDistribution::None: return 0;
    case DelayDistribution::Constant: return std::int64_t(mean_ns);
    case DelayDistribution::Uniform: return std::int64_t(std::uniform_real_distribution<double>(0, 2 * mean_ns)(rng_));
    case DelayDistribution::Exponential:
      return mean_ns > 0 ? std::int64_t(std::exponential_distribution<double>(1.0 / mean_ns)(rng_)) : 0;
  }
  return 0;
}

void StragglerInjector::inject(std::int32_t step, std::int64_t compute_ns, trace::Recorder* recorder) {
  if (!active_) return;
  const std::int64_t extra = std::int64_t(double(compute_ns) * (spec_.slowdown - 1.0)) + draw_delay_ns();
  if (extra <= 0) return;
  trace::Span span(recorder, trace::EventKind::InjectedDelay, trace::Stream::Compute, step);
  std::this_thread::sleep_for(std::chrono::nanoseconds(extra));
}

}  // namespace loom::engine
