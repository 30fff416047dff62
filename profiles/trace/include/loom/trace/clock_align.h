// Clock alignment: maps a rank's steady-clock timestamps onto rank 0's clock, using the
// offsets the launcher estimated by ping-pong at the start and end of a run (stored in
// RankRecord). Between the two estimates the offset is interpolated linearly
// (constant drift); outside them it is extrapolated along the same line. Pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/trace/event.h"
#include "loom/trace/records.h"

namespace loom::clock {

// Rank clock minus rank-0 clock at rank-clock time `rank_clock_ns`. Constant offset_ns
// when there is no usable end estimate (sync_end_ns <= sync_start_ns).
std::int64_t offset_at(const trace::RankRecord& r, std::int64_t rank_clock_ns);

// `t` (this rank's clock) expressed on rank 0's clock: t - offset_at(r, t).
std::int64_t to_reference_clock(const trace::RankRecord& r, std::int64_t t);

// Rewrites start_ns and end_ns of every event onto rank 0's clock.
void align_events(const trace::RankRecord& r, std::vector<trace::Event>& events);

// Drift of this rank's clock against rank 0's, in parts per million (0 without an end
// estimate): (offset_end_ns - offset_ns) / (sync_end_ns - sync_start_ns) * 1e6.
double drift_ppm(const trace::RankRecord& r);

// True when the record carries a usable end estimate.
bool has_end_estimate(const trace::RankRecord& r);

}  // namespace loom::clock
