// The statistics every figure shares, written once: nearest-rank percentiles (staleness,
// serving latency, step times), medians (the phase diff, calibration) and means. Pure,
// no store; predict links analysis and uses the same median.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace loom::analysis {

// A figure that is not known (no values, no time to divide by): JSON null, "-" in text.
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Nearest-rank percentile of ascending values (docs/figures.md): the smallest value with
// at least `percent`% of the values <= it, i.e. the ceil(percent*n/100)-th smallest, so
// always one of the observed values. `sorted` must not be empty.
template <class T>
T nearest_rank(const std::vector<T>& sorted, int percent) {
  const std::size_t rank = (sorted.size() * std::size_t(percent) + 99) / 100;  // ceil, exact in integers
  return sorted[std::max<std::size_t>(rank, 1) - 1];
}

// The nearest-rank percentile of unsorted values; `if_empty` for none.
double percentile(std::vector<double> values, int percent,
                  double if_empty = std::numeric_limits<double>::quiet_NaN());

// The median: the middle value, or the mean of the middle two for an even count;
// `if_empty` for none (a comparison shows NaN as "-", the predictor counts a cost never
// observed as 0).
double median(std::vector<double> values, double if_empty = std::numeric_limits<double>::quiet_NaN());

// The arithmetic mean, summed in the values' order (figures stay bit-for-bit what they
// were); `if_empty` for none.
template <class T>
double mean(const std::vector<T>& values, double if_empty = std::numeric_limits<double>::quiet_NaN()) {
  if (values.empty()) return if_empty;
  double sum = 0;
  for (const T& v : values) sum += double(v);
  return sum / double(values.size());
}

// Nearest-rank p50, p95 and p99 with the maximum and mean, as serving and the charts show
// them; zeros for no values.
struct Percentiles {
  double p50 = 0, p95 = 0, p99 = 0, max = 0, mean = 0;
};
Percentiles percentiles_of(std::vector<double> values);

}  // namespace loom::analysis
