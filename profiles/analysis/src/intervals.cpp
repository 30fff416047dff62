// Interval arithmetic (see intervals.h and figure_parts.h).
#include "loom/analysis/intervals.h"

#include <algorithm>

#include "figure_parts.h"

namespace loom::analysis {

// Sorted, disjoint, non-empty intervals covering the same points as the input.
Intervals merged(Intervals& intervals) {
  sort_by_start(intervals);
  Intervals out;
  for (const auto& [s, e] : intervals) {
    if (e <= s) continue;
    if (!out.empty() && s <= out.back().second) {
      out.back().second = std::max(out.back().second, e);
    } else {
      out.emplace_back(s, e);
    }
  }
  return out;
}

std::int64_t overlap_length_ns(Intervals& a, Intervals& b) {
  const Intervals ma = merged(a), mb = merged(b);
  std::int64_t total = 0;
  std::size_t i = 0, j = 0;
  while (i < ma.size() && j < mb.size()) {
    const std::int64_t lo = std::max(ma[i].first, mb[j].first);
    const std::int64_t hi = std::min(ma[i].second, mb[j].second);
    if (hi > lo) total += hi - lo;
    // The interval that ends first cannot overlap anything further in the other list.
    if (ma[i].second < mb[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

std::int64_t union_length_ns(Intervals& intervals) {
  sort_by_start(intervals);
  std::int64_t total = 0;
  std::int64_t cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& [s, e] : intervals) {
    if (e <= s) continue;  // empty or malformed span
    if (open && s <= cur_end) {
      cur_end = std::max(cur_end, e);
      continue;
    }
    if (open) total += cur_end - cur_start;
    cur_start = s;
    cur_end = e;
    open = true;
  }
  if (open) total += cur_end - cur_start;
  return total;
}

// `intervals` less every point of `removed` (sorted, disjoint).
Intervals without(const Intervals& intervals, const Intervals& removed) {
  if (removed.empty()) return intervals;
  Intervals out;
  out.reserve(intervals.size());
  for (auto [s, e] : intervals) {
    auto it = std::upper_bound(removed.begin(), removed.end(), s,
                               [](std::int64_t t, const std::pair<std::int64_t, std::int64_t>& r) { return t < r.second; });
    for (; it != removed.end() && it->first < e && s < e; ++it) {
      if (it->first > s) out.emplace_back(s, it->first);
      s = std::max(s, it->second);
    }
    if (s < e) out.emplace_back(s, e);
  }
  return out;
}

}  // namespace loom::analysis
