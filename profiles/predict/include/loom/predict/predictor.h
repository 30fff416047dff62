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

// What the machine the plan will run on offers, beyond its calibration.
struct MachineShape {
  int cores = 1;
};

struct Prediction {
  double step_ms = 0;
  double samples_per_s = 0;    // the global batch per step
  int threads_per_rank = 0;    // BLAS threads, as the launcher will set them
  double stretch = 1;          // compute time multiplier for ranks outnumbering cores
  std::vector<PredictedSpan> spans;  // one steady step, every rank, from 0
  std::vector<std::string> notes;    // what was approximated, in words
};

// NotFound naming every cost the calibration lacks (with what would measure it);
// Unavailable for what the predictor does not cover yet (asynchronous modes, serving).
Expected<Prediction> predict_step(const Plan& plan, const Calibration& calibration, const MachineShape& machine);

}  // namespace loom::predict
