// The shared statistics (see stats.h).
#include "loom/analysis/stats.h"

namespace loom::analysis {

double percentile(std::vector<double> values, int percent, double if_empty) {
  if (values.empty()) return if_empty;
  std::sort(values.begin(), values.end());
  return nearest_rank(values, percent);
}

double median(std::vector<double> values, double if_empty) {
  if (values.empty()) return if_empty;
  // nth_element, not a sort: the phase diff takes medians of thousands of spans per phase.
  const auto mid = values.begin() + std::ptrdiff_t(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  const double upper = *mid;
  if (values.size() % 2 == 1) return upper;
  return (*std::max_element(values.begin(), mid) + upper) / 2;
}

Percentiles percentiles_of(std::vector<double> values) {
  Percentiles p;
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  p.p50 = nearest_rank(values, 50);
  p.p95 = nearest_rank(values, 95);
  p.p99 = nearest_rank(values, 99);
  p.max = values.back();
  p.mean = mean(values);
  return p;
}

}  // namespace loom::analysis
