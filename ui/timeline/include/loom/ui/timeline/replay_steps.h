// Replay of a stored run, the arithmetic (no display needed): where "step forward" stops
// and how many steps had completed by a cursor. The controls are ReplayBar (replay_bar.h).
#pragma once

#include <optional>
#include <vector>

#include "loom/ui/timeline/timeline_data.h"

namespace loom::ui::timeline {

enum class ReplayUnit { Step, Microbatch };

// Ends (origin-relative ns, ascending, distinct) of every step, or of every micro-batch
// of every step, that the data holds: where "step forward" stops.
std::vector<double> replay_boundaries(const TimelineData& data, ReplayUnit unit);
// The first boundary after t (direction > 0) or the last before it (direction < 0), with
// 1 ns of slack so a cursor sitting on a boundary moves on; nullopt when there is none.
std::optional<double> next_boundary(const std::vector<double>& boundaries, double t_ns, int direction);
// Steps whose every event had ended by t: the charts show metrics of steps below this.
int steps_completed(const TimelineData& data, double t_ns);

}  // namespace loom::ui::timeline
