// Serving predicted before it runs (docs/prediction.md, "Serving"): the plan's requests
// arrive as its clients will send them (core serve_schedule.h: the same times for the
// same seed), queue at the server, and are served in batches by its rule (max_batch
// queued, or the oldest waited timeout_ms), each batch taking the calibrated forward pass
// at its size; a request's latency is its wait, its batch and a calibrated per-request
// overhead (messages both ways and their handling). An event simulation, not a formula:
// bursts, timeouts and queues behind a long batch come out as they happen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/analysis/serving.h"
#include "loom/predict/calibration.h"
#include "loom/predict/predictor.h"

namespace loom::predict {

struct ServingPrediction {
  analysis::Percentiles latency_ms;     // nearest-rank, as the measured figures
  analysis::Percentiles queue_wait_ms;  // arrival to the start of its batch
  std::int64_t requests = 0, batches = 0;
  double mean_batch = 0;
  double batch_compute_ms = 0;  // mean per batch
  double busy_fraction = 0;     // batches' compute over first arrival to last batch end
  double throughput_per_s = 0;
  int threads = 0;              // the server's BLAS threads
  std::vector<std::string> notes;
};

// NotFound naming the missing cost; InvalidArgument for a plan without "serve".
Expected<ServingPrediction> predict_serving(const Plan& plan, const Calibration& calibration, const MachineShape& machine);

}  // namespace loom::predict
