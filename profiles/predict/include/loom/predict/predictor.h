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
// covers), and the optimizer. Ranks on a host with more BLAS threads than cores have their
// compute stretched by threads / cores. The step ends when the last rank's optimizer does.
#pragma once

#include <string>
#include <vector>

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
  double step_ms = 0;
  double samples_per_s = 0;    // the global batch per step
  int threads_per_rank = 0;    // BLAS threads, as the launcher will set them
  double stretch = 1;          // compute time multiplier for ranks outnumbering cores
  std::vector<PredictedSpan> spans;  // one steady step, every rank, from 0
  std::vector<RankMemory> memory;    // by rank
  std::vector<std::string> notes;    // what was approximated, in words
};

// NotFound naming every cost the calibration lacks (with what would measure it);
// Unavailable for what the predictor does not cover yet (asynchronous modes, serving).
Expected<Prediction> predict_step(const Plan& plan, const Calibration& calibration, const MachineShape& machine);

}  // namespace loom::predict
