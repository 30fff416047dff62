// Replay arithmetic (replay_steps.h).
#include "loom/ui/timeline/replay_steps.h"

#include <algorithm>

namespace loom::ui::timeline {

std::vector<double> replay_boundaries(const TimelineData& data, ReplayUnit unit) {
  std::vector<double> ends;
  for (int step = 0; step < data.step_count(); ++step) {
    if (unit == ReplayUnit::Microbatch) {
      for (const auto& range : data.microbatch_ranges(step))
        if (range) ends.push_back(static_cast<double>(range->end_ns));
    }
    if (const auto range = data.step_range(step)) ends.push_back(static_cast<double>(range->end_ns));
  }
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  return ends;
}

std::optional<double> next_boundary(const std::vector<double>& boundaries, double t_ns, int direction) {
  if (direction > 0) {
    auto it = std::upper_bound(boundaries.begin(), boundaries.end(), t_ns + 1.0);
    return it == boundaries.end() ? std::nullopt : std::optional<double>(*it);
  }
  auto it = std::lower_bound(boundaries.begin(), boundaries.end(), t_ns - 1.0);
  return it == boundaries.begin() ? std::nullopt : std::optional<double>(*std::prev(it));
}

int steps_completed(const TimelineData& data, double t_ns) {
  int completed = 0;
  while (completed < data.step_count()) {
    const auto range = data.step_range(completed);
    if (!range || static_cast<double>(range->end_ns) > t_ns) break;
    ++completed;
  }
  return completed;
}

}  // namespace loom::ui::timeline
