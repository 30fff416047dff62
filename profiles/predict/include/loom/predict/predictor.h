// The predictor: one steady step of a plan, laid out per rank from a calibration, before
// anything runs (docs/prediction.md).
//
// Each replica's stages run their forward and backward ops in the plan's schedule order
// (analysis::replay_ops; one stage with gradient accumulation alternates forward and
// backward per micro-step), each op the sum of its layers' calibrated costs at the
// micro-batch's samples, the first and the last stage loading the batch (inputs, labels)
// and the last computing the loss;
// a stage's output reaches the next after a point-to-point transfer. Gradients are
// all-reduced across replicas in buckets (bucket_mb, last layer first, whole layers) on
// one communication thread per rank as the last backward finishes each bucket's layers,
// the slowest replica deciding when a bucket starts; what remains after the backward is a
// wait. Then a straggler's injected delay (its slowdown of the compute, plus its mean
// delay), the residual measured steps had beyond their costs (a gap: time no span
// covers), and the optimizer. Ranks on a host with more BLAS threads than cores take
// costs measured as crowded (the nearest crowding measured) or else unshared ones
// stretched by threads / cores. The step ends when the last rank's optimizer does.
//
// The asynchronous modes (async_predictor.cpp) are not one step but a process in time:
// parameter server and ssp are simulated event by event (workers pulling, computing and
// pushing; each server answering and applying in turn, under the engine's rules for
// versions and the ssp bound), which gives each worker's step, the throughput, and the
// staleness of every update; the spans are those of a window one step long in the steady
// part. Local SGD lays out one period: `period` local steps per replica, the last ending
// in the meeting (the wait for the slowest replica and the parameter all-reduces).
#pragma once

#include <string>
#include <vector>

#include "loom/analysis/staleness.h"
#include "loom/predict/calibration.h"
#include "loom/predict/cluster.h"
#include "loom/trace/event.h"

namespace loom::predict {

struct PredictedSpan {
  int rank = 0;
  trace::EventKind kind = trace::EventKind::Forward;
  trace::Stream stream = trace::Stream::Compute;
  int layer = -1;       // LayerId, as measured spans carry it
  int microbatch = -1;  // pipeline micro-batch or accumulation micro-step; -1 when one
  double start_ms = 0, end_ms = 0;
  std::int64_t bytes = 0;
  int step = 0;  // which step of the laid-out cycle (Prediction::cycle_steps) it belongs to
};

// What the plan will run on: this machine (its cores beside its calibration), or a cluster
// (cluster.h) whose hosts its ranks fill in order.
struct MachineShape {
  int cores = 1;
  const Cluster* cluster = nullptr;
  double device_speed = 1;  // what-if: every compute cost divided by this
};

// What a rank holds at its peak, in bytes: fp32 weights, their gradients, the optimizer's
// state (momentum: one tensor, Adam: two), the inputs each layer keeps for its backward
// for every micro-batch in flight at once (the schedule decides how many: GPipe all,
// 1F1B at most the stages after this one), and workspace (the widest layer's input and
// output gradient for one micro-batch, and the all-reduce buckets over NCCL, which live
// in device memory; over MPI they are host vectors outside the rank's tensors).
struct RankMemory {
  std::int64_t parameters = 0, gradients = 0, optimizer_state = 0, activations = 0, workspace = 0;
  int in_flight = 0;  // micro-batches whose activations it holds at once
  std::int64_t total() const { return parameters + gradients + optimizer_state + activations + workspace; }
};

struct Prediction {
  double step_ms = 0;          // median step of the slowest rank, as measured runs are summed up
  double samples_per_s = 0;    // samples trained per second (synchronous: the global batch per step)
  // The spans lay out this many consecutive steps, `cycle_ms` long: 1 and step_ms, except
  // local SGD (one period; its steps differ: the last one meets the other replicas).
  int cycle_steps = 1;
  double cycle_ms = 0;
  std::string device;          // the calibration's device tag of its ranks: "cpu 2t", "gpu NVIDIA H200"
  int threads_per_rank = 0;    // BLAS threads, as the launcher will set them
  double stretch = 1;          // compute time multiplier for ranks outnumbering cores
  std::vector<PredictedSpan> spans;  // one steady step, every rank, from 0
  std::vector<RankMemory> memory;    // by rank
  std::vector<std::string> notes;    // what was approximated, in words
  // Parameter server and ssp: the staleness of the simulated updates, defined as measured
  // runs define it (analysis::staleness_stats over the same records), and how many
  // updates had each staleness (index = staleness). Local SGD: mode set, no updates.
  analysis::StalenessStats staleness;
  std::vector<std::int64_t> staleness_counts;
  std::vector<trace::UpdateRecord> updates;  // the simulated ones (stored with a stored prediction)
};

// The notes as a person reads them: the costs approximated the same way at the same
// device tag (three or more, "forward linear 784->256 @cpu 1t shared x1.50: not measured,
// taken from forward linear 784->256 @cpu 1t shared x2.00", one per layer) said once,
// "14 costs @cpu 1t shared x1.50 not measured, taken from @cpu 1t shared x2.00: forward
// linear 784->256; backward linear 784->256; ...", where the first of them stood; every
// other note as it is. `Prediction::notes` keeps each (the JSON output lists them).
std::vector<std::string> grouped_notes(const std::vector<std::string>& notes);

// NotFound naming every cost the calibration lacks (with what would measure it);
// Unavailable for what the predictor does not cover (serving: serving_prediction.h; gpu
// ranks from a calibration).
Expected<Prediction> predict_step(const Plan& plan, const Calibration& calibration, const MachineShape& machine);

}  // namespace loom::predict
