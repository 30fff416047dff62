// Parameter-server training simulated event by event (internal to loom_predict), from
// costs alone, under the rules the engine's servers follow (launcher/engine
// parameter_server.h): a worker pulls every server's shard, computes, then pushes each
// server its part in turn (a push blocks until that server takes it); a server handles
// one message at a time in arrival order: a pull is answered (parameter_server at once;
// ssp once the slowest unfinished worker's clock is within `bound` of the step), a push
// is received, then applied as one optimizer step (ssp: only once every unfinished worker
// has read the parameters of that step). Versions and staleness are counted as the engine
// counts them, so analysis::staleness_stats reads the simulated updates as measured ones.
//
// Times in ms from 0. Pure: the same input gives the same spans and updates.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "loom/predict/predictor.h"
#include "loom/trace/records.h"

namespace loom::predict {

// One worker's step apart from its messages: its compute spans in order (rank, stream and
// start unset), then a straggler's delay and the residual (time no span covers).
struct AsyncWorkerWork {
  std::vector<PredictedSpan> compute;  // kind, layer and length (end_ms - start_ms) only
  double injected_ms = 0;
  double residual_ms = 0;
};

struct AsyncSetup {
  bool ssp = false;
  int bound = 0;
  std::int64_t steps = 20;  // per worker
  std::vector<AsyncWorkerWork> workers;          // ranks 0..W-1
  std::vector<std::int64_t> shard_bytes;         // per server (ranks W..W+S-1)
  std::vector<double> apply_ms;                  // per server: one gradient's optimizer step
  std::function<double(int from, int to, double bytes)> message_ms;  // requests and replies
  std::function<double(int from, int to, double bytes)> push_ms;     // a server taking a gradient
};

// A worker's step as simulated: from its pull to the end of its last push.
struct SimulatedStep {
  int worker = 0;
  std::int64_t step = 0;
  double start_ms = 0, end_ms = 0;
};

struct AsyncTimeline {
  std::vector<PredictedSpan> spans;          // every rank, every step (`step` = the worker's step)
  std::vector<trace::UpdateRecord> updates;  // t_ns: when applied, in ns from 0
  std::vector<SimulatedStep> steps;          // in the order they ended
  double end_ms = 0;
};

AsyncTimeline simulate_parameter_servers(const AsyncSetup& setup);

}  // namespace loom::predict
