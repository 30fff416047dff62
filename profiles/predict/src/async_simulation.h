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
// Where a host's ranks outnumber its cores, the cores are simulated too: a computing
// worker holds one (a waiting rank yields its core), and a server's task goes at full
// speed only while the cores the computing workers leave suffice for it (a transfer
// needs the server's and its worker's), else at a share of them. A worker's residual
// (the time the spans leave uncovered, solved from its runs) is work on its core. So
// crowded workers mostly compute in turn, a reply started during another's compute ends
// after it, and the staleness follows, as measured (docs/prediction.md).
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
// start unset), the residual (time no span covers), then a straggler's delay.
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
  // Crowded hosts (empty: every rank finds a core whenever it needs one): each rank's
  // host (workers, then servers), each host's cores, and the cores a computing worker's
  // threads take. A server's task that finds too few cores free goes at contended_share
  // x free cores / ranks waiting on its host (the server among them): the waiting ranks
  // take turns on what is free, and a transfer passes only while both its ranks get one.
  std::vector<int> host_of;
  std::vector<double> host_cores;
  double worker_threads = 1;
  double contended_share = 1;
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
