// Figures of a serving run (plan section "serve"), from the metrics its ranks recorded
// (launcher/engine serving.h names them). Definitions, also in docs/figures.md "Serving":
//   latency       = reply received - request sent, per request, on the client's clock
//   queue wait    = request arrived at the server - start of the batch that served it
//   throughput    = requests served / (end of the last batch - arrival of the first
//                   request), both on the server's clock
//   busy fraction = the batches' compute time / that same span; idle is the rest
//   accuracy      = correct predictions / requests served
// Percentiles are nearest-rank (as for staleness): always an observed value.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/analysis/stats.h"
#include "loom/core/plan.h"
#include "loom/trace/records.h"

namespace loom::analysis {

struct ServingStats {
  ServeSpec serve;                 // as the plan asked
  std::int64_t requests = 0;       // replies the clients timed
  Percentiles latency_ms;
  Percentiles queue_wait_ms;
  std::int64_t batches = 0;
  std::int64_t served = 0;         // requests the batches held (the server's count)
  double mean_batch = 0;
  std::vector<std::int64_t> batch_histogram;  // [b] = batches of b requests, b = 0..max_batch
  double batch_compute_ms = 0;     // mean per batch
  double throughput_per_s = 0;
  double busy_fraction = 0;
  double accuracy = std::numeric_limits<double>::quiet_NaN();
};

// From all of a run's metrics (any order); nullopt for a plan without "serve".
std::optional<ServingStats> serving_stats(const Plan& plan, const std::vector<trace::MetricRecord>& metrics);

nlohmann::json serving_to_json(const ServingStats& s);

}  // namespace loom::analysis
