// Interval arithmetic over [start, end) spans in nanoseconds: every time category is the
// length of a union of intervals, so nested spans count once.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace loom::analysis {

// Total length of the union of [start, end) intervals, in nanoseconds. Sorts its input by start.
std::int64_t union_length_ns(std::vector<std::pair<std::int64_t, std::int64_t>>& intervals);

// Length of (union of a) intersected with (union of b), in nanoseconds. Sorts its inputs by start.
std::int64_t overlap_length_ns(std::vector<std::pair<std::int64_t, std::int64_t>>& a,
                               std::vector<std::pair<std::int64_t, std::int64_t>>& b);

}  // namespace loom::analysis
