// Figures of a serving run (see serving.h).
#include "loom/analysis/serving.h"

#include <algorithm>
#include <cmath>

namespace loom::analysis {
namespace {

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json percentiles_json(const Percentiles& p) {
  return {{"p50", p.p50}, {"p95", p.p95}, {"p99", p.p99}, {"max", p.max}, {"mean", p.mean}};
}

}  // namespace

std::optional<ServingStats> serving_stats(const Plan& plan, const std::vector<trace::MetricRecord>& metrics) {
  if (!plan.serve) return std::nullopt;
  ServingStats s;
  s.serve = *plan.serve;
  s.batch_histogram.assign(std::size_t(std::max<std::int64_t>(0, s.serve.max_batch)) + 1, 0);
  std::vector<double> latency, wait;
  double compute_ms = 0, served = 0, correct = 0;
  std::int64_t first_arrival = std::numeric_limits<std::int64_t>::max(), last_end = 0;
  for (const trace::MetricRecord& m : metrics) {
    if (m.name == "latency_ms") {
      latency.push_back(m.value);
    } else if (m.name == "queue_wait_ms") {
      wait.push_back(m.value);
      first_arrival = std::min(first_arrival, m.t_ns);
    } else if (m.name == "batch_size") {
      ++s.batches;
      served += m.value;
      const auto size = std::size_t(std::max(0.0, m.value));
      if (size < s.batch_histogram.size()) ++s.batch_histogram[size];
    } else if (m.name == "batch_compute_ms") {
      compute_ms += m.value;
      last_end = std::max(last_end, m.t_ns + std::int64_t(m.value * 1e6));
    } else if (m.name == "batch_correct") {
      correct += m.value;
    }
  }
  s.requests = std::int64_t(latency.size());
  s.latency_ms = percentiles_of(std::move(latency));
  s.queue_wait_ms = percentiles_of(std::move(wait));
  s.served = std::int64_t(std::llround(served));
  if (s.batches > 0) {
    s.mean_batch = served / double(s.batches);
    s.batch_compute_ms = compute_ms / double(s.batches);
  }
  if (served > 0) s.accuracy = correct / served;
  if (last_end > first_arrival) {
    const double span_s = double(last_end - first_arrival) * 1e-9;
    s.throughput_per_s = served / span_s;
    s.busy_fraction = compute_ms * 1e-3 / span_s;
  }
  return s;
}

nlohmann::json serving_to_json(const ServingStats& s) {
  return {{"clients", s.serve.clients},
          {"max_batch", s.serve.max_batch},
          {"timeout_ms", s.serve.timeout_ms},
          {"rate", s.serve.rate},
          {"arrivals", arrivals_name(s.serve.arrivals)},
          {"requests", s.requests},
          {"latency_ms", percentiles_json(s.latency_ms)},
          {"queue_wait_ms", percentiles_json(s.queue_wait_ms)},
          {"batches", s.batches},
          {"mean_batch", s.mean_batch},
          {"batch_histogram", s.batch_histogram},
          {"batch_compute_ms", s.batch_compute_ms},
          {"throughput_per_s", s.throughput_per_s},
          {"busy_fraction", s.busy_fraction},
          {"accuracy", number_or_null(s.accuracy)}};
}

}  // namespace loom::analysis
