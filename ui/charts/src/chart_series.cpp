// Curves for the training charts (chart_series.h). MetricAccumulator keeps one entry per
// (metric, step, rank) rather than running sums, because a rank's time origin can move
// when an earlier record arrives late and duplicates must replace, not add; a curve is
// rebuilt from the entries on demand, which is linear in the records and cheap at the
// ~7 redraws per second the live view asks for.
#include "loom/ui/charts/chart_series.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <set>

namespace loom::ui::charts {

namespace {

bool by_x(const QPointF& a, const QPointF& b) { return a.x() < b.x(); }

}  // namespace

void MetricAccumulator::append(const std::vector<loom::trace::MetricRecord>& records) {
  bool changed = false;
  for (const auto& r : records) {
    if (r.step < 0) continue;
    insert(metrics_[r.name], r);
    auto [it, inserted] = first_t_ns_.try_emplace(r.rank, r.t_ns);
    if (!inserted) it->second = std::min(it->second, r.t_ns);
    changed = true;
  }
  if (changed) ++revision_;
}

void MetricAccumulator::insert(Steps& steps, const loom::trace::MetricRecord& r) {
  std::vector<Entry>& entries = steps[r.step];
  for (Entry& e : entries) {
    if (e.rank != r.rank) continue;
    if (r.t_ns >= e.t_ns) e = Entry{r.rank, r.value, r.t_ns};
    return;
  }
  entries.push_back(Entry{r.rank, r.value, r.t_ns});
}

void MetricAccumulator::clear() {
  metrics_.clear();
  first_t_ns_.clear();
  origin_.clear();
  ++revision_;
}

void MetricAccumulator::setOrigin(int rank, std::int64_t t_ns) {
  origin_[rank] = t_ns;
  ++revision_;
}

double MetricAccumulator::seconds(const Entry& e) const {
  auto given = origin_.find(e.rank);
  std::int64_t origin = 0;
  if (given != origin_.end()) {
    origin = given->second;
  } else {
    auto first = first_t_ns_.find(e.rank);
    if (first != first_t_ns_.end()) origin = first->second;
  }
  return static_cast<double>(e.t_ns - origin) * 1e-9;
}

QVector<QPointF> MetricAccumulator::series(const std::string& name, XAxis x) const {
  return series(name, x, std::numeric_limits<std::int64_t>::max());
}

QVector<QPointF> MetricAccumulator::series(const std::string& name, XAxis x, std::int64_t max_step) const {
  QVector<QPointF> points;
  auto metric = metrics_.find(name);
  if (metric == metrics_.end()) return points;
  points.reserve(static_cast<qsizetype>(metric->second.size()));
  for (const auto& [step, entries] : metric->second) {
    if (step > max_step) break;  // steps are the map's ascending keys
    double sum = 0, sum_s = 0;
    for (const Entry& e : entries) {
      sum += e.value;
      if (x == XAxis::Time) sum_s += seconds(e);
    }
    const double n = static_cast<double>(entries.size());
    const double key = x == XAxis::Time      ? sum_s / n
                       : x == XAxis::Samples ? static_cast<double>(step + 1) * samples_per_step_
                                             : static_cast<double>(step);
    points.append(QPointF(key, sum / n));
  }
  // Steps are ascending already; mean times of successive steps can swap only when the
  // set of reporting ranks changes, and a line chart needs ascending keys.
  if (x == XAxis::Time) std::stable_sort(points.begin(), points.end(), by_x);
  return points;
}

void MetricAccumulator::setSamplesPerStep(double samples) {
  if (samples == samples_per_step_) return;
  samples_per_step_ = samples;
  ++revision_;
}

std::vector<std::string> MetricAccumulator::names() const {
  std::vector<std::string> out;
  out.reserve(metrics_.size());
  for (const auto& [name, steps] : metrics_) out.push_back(name);
  return out;
}

int Histogram::total() const {
  int sum = 0;
  for (int b : bins) sum += b;
  return sum;
}

Histogram staleness_histogram(const std::vector<StalenessSample>& samples, int worker) {
  Histogram h;
  for (const auto& s : samples) {
    if ((worker >= 0 && s.worker != worker) || s.staleness < 0) continue;
    const auto bin = static_cast<std::size_t>(s.staleness);
    if (h.bins.size() <= bin) h.bins.resize(bin + 1, 0);
    ++h.bins[bin];
  }
  return h;
}

std::vector<StalenessSample> staleness_samples(const std::vector<loom::trace::UpdateRecord>& updates) {
  std::vector<StalenessSample> out;
  out.reserve(updates.size());
  for (const auto& u : updates) {
    const auto staleness = static_cast<int>(std::min<std::int64_t>(u.staleness, std::numeric_limits<int>::max()));
    out.push_back({u.worker, u.step, staleness, u.t_ns, u.server});
  }
  return out;
}

std::vector<int> staleness_workers(const std::vector<StalenessSample>& samples) {
  std::set<int> workers;
  for (const auto& s : samples) workers.insert(s.worker);
  return {workers.begin(), workers.end()};
}

namespace {

bool selected(const StalenessSample& s, int worker) { return (worker < 0 || s.worker == worker) && s.staleness >= 0; }

QVector<QPointF> staleness_per_step(const std::vector<StalenessSample>& samples, int worker) {
  std::map<std::int64_t, std::pair<double, int>> by_step;  // step -> (sum, count)
  for (const auto& s : samples) {
    if (!selected(s, worker)) continue;
    auto& [sum, count] = by_step[s.step];
    sum += s.staleness;
    ++count;
  }
  QVector<QPointF> points;
  points.reserve(static_cast<qsizetype>(by_step.size()));
  for (const auto& [step, acc] : by_step) points.append(QPointF(static_cast<double>(step), acc.first / acc.second));
  return points;
}

QVector<QPointF> staleness_per_bucket(const std::vector<StalenessSample>& samples, int worker) {
  // Per server, its earliest t_ns over all workers: "since the first update", not since
  // this worker's first, so a worker that joined late starts late on the axis too.
  std::map<int, std::int64_t> origin;
  for (const auto& s : samples) {
    if (s.staleness < 0) continue;
    auto [it, inserted] = origin.try_emplace(s.server, s.t_ns);
    if (!inserted) it->second = std::min(it->second, s.t_ns);
  }
  std::vector<std::pair<double, int>> timed;  // (seconds, staleness)
  double span = 0;
  for (const auto& s : samples) {
    if (!selected(s, worker)) continue;
    timed.emplace_back(static_cast<double>(s.t_ns - origin[s.server]) * 1e-9, s.staleness);
    span = std::max(span, timed.back().first);
  }
  const double width = span > 0 ? span / kStalenessTimeBuckets : 1.0;
  std::map<int, std::array<double, 3>> buckets;  // bucket -> (sum seconds, sum staleness, count)
  for (const auto& [t, staleness] : timed) {
    const int b = std::min(static_cast<int>(t / width), kStalenessTimeBuckets - 1);
    auto& acc = buckets[b];
    acc[0] += t;
    acc[1] += staleness;
    acc[2] += 1;
  }
  QVector<QPointF> points;
  points.reserve(static_cast<qsizetype>(buckets.size()));
  for (const auto& [b, acc] : buckets) points.append(QPointF(acc[0] / acc[2], acc[1] / acc[2]));
  return points;
}

}  // namespace

QVector<QPointF> staleness_over_time(const std::vector<StalenessSample>& samples, int worker, XAxis x) {
  return x == XAxis::Step ? staleness_per_step(samples, worker) : staleness_per_bucket(samples, worker);
}

BreakdownSegments breakdown_segments(const loom::analysis::RankBreakdown& rank) {
  BreakdownSegments s;
  s.compute = std::max(0.0, rank.compute_s);
  s.optimizer = std::max(0.0, rank.optimizer_s);
  s.data = std::max(0.0, rank.data_s);
  s.idle = std::max(0.0, rank.idle_s);
  s.descheduled = std::max(0.0, rank.descheduled_s);
  // exposed_comm is a part of comm by definition; clamp so a rounding error in either
  // cannot make the hidden part negative or the exposed part larger than the whole.
  const double comm = std::max(0.0, rank.comm_s);
  s.exposed_comm = std::clamp(rank.exposed_comm_s, 0.0, comm);
  s.hidden_comm = comm - s.exposed_comm;
  return s;
}

void ServingSeries::append(const std::vector<loom::trace::MetricRecord>& records) {
  for (const auto& m : records) {
    if (m.name == "latency_ms") latencies_ms_.emplace_back(m.t_ns, m.value);
    if (m.name == "batch_size") batch_sizes_.push_back(std::max(0, static_cast<int>(m.value)));
  }
}

void ServingSeries::clear() {
  latencies_ms_.clear();
  batch_sizes_.clear();
}

QVector<QPointF> ServingSeries::latency_over_time() const {
  QVector<QPointF> points;
  if (latencies_ms_.empty()) return points;
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
  for (const auto& [t, ms] : latencies_ms_) first = std::min(first, t);
  points.reserve(static_cast<qsizetype>(latencies_ms_.size()));
  for (const auto& [t, ms] : latencies_ms_) points.append(QPointF(static_cast<double>(t - first) * 1e-9, ms));
  return points;
}

std::vector<int> ServingSeries::batch_histogram() const {
  std::vector<int> bins;
  for (int size : batch_sizes_) {
    if (bins.size() <= static_cast<std::size_t>(size)) bins.resize(static_cast<std::size_t>(size) + 1, 0);
    ++bins[static_cast<std::size_t>(size)];
  }
  return bins;
}

loom::analysis::Percentiles ServingSeries::latency_ms() const {
  std::vector<double> values;
  values.reserve(latencies_ms_.size());
  for (const auto& [t, ms] : latencies_ms_) values.push_back(ms);
  return loom::analysis::percentiles_of(std::move(values));
}

}  // namespace loom::ui::charts
