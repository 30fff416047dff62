// Replays one pipeline step with free communication: what a schedule's bubble would be for
// given per-stage op times. The analysis uses it twice per run (docs/figures.md):
//   with each stage's own mean op times  -> the bubble the schedule plus the measured stage
//                                          imbalance imply ("theory for these stages")
//   with every stage at the mean of all  -> the schedule's own bubble for these op sizes
// so a measured bubble splits into schedule + imbalance + the rest (communication, jitter).
// Uniform forwards and backwards with no other work replay to exactly (p-1)/(m+p-1) for
// GPipe and 1F1B alike (the test checks it).
#pragma once

#include <vector>

#include "loom/core/plan.h"

namespace loom::analysis {

// Mean durations of one stage's work, in any unit (the results are fractions).
struct StageOpTimes {
  double forward = 0;   // one micro-batch's forward (data loading and loss included)
  double backward = 0;  // one micro-batch's backward
  double other = 0;     // per step, after the last backward: the optimizer
  // From the end of this stage's forward (backward) until the next (previous) stage has
  // its input: 0 in the analysis's replays (free communication); the predictor's transfers.
  double to_next = 0, to_previous = 0;
  // The part of each transfer that holds the link (its bytes over the bandwidth): a later
  // message from this stage in the same direction waits for it. 0: messages never queue
  // (the analysis's replays; the predictor's calibrated messages on one machine).
  double to_next_wire = 0, to_previous_wire = 0;
  // Work that needs nothing from another stage (the predictor: a branch placed on this
  // stage and fed by the batch): the first `forward_ahead` of a forward may run before
  // its input arrives, and the last `backward_after_send` of a backward runs after its
  // gradient has left for the previous stage. 0 in the analysis's replays.
  double forward_ahead = 0, backward_after_send = 0;
};

// One stage's replayed step: it starts at 0, and every stage's window ends when the
// slowest stage has finished its backwards and its optimizer (the stages meet there).
struct ReplayedStage {
  double window = 0, busy = 0;
  double bubble_fraction() const { return window > 0 ? (window - busy) / window : 0.0; }
};

// One phase of one micro-batch, in the order a stage runs them.
struct ScheduledOp {
  bool forward = true;
  int microbatch = 0;
};

// The order stage `stage` of `stages` runs its ops in: GPipe runs every forward, then every
// backward, last micro-batch first; 1F1B runs stages - stage forwards (capped at m), then
// alternates a backward and a forward, then drains the backwards.
std::vector<ScheduledOp> stage_order(Schedule schedule, int stage, int stages, int microbatches);

// One op of a replayed step and when it ran.
struct TimedOp {
  ScheduledOp op;
  double start = 0, end = 0;
  double delivered = 0;  // when its output reaches the stage that needs it (queued on the link included)
};

// Each op starts when its stage is free and its input exists (the previous stage's forward,
// or the next stage's backward, of the same micro-batch, plus its transfer), less the
// forward's work ahead of its input. Per stage, its
// ops in the order it runs them; empty when stages is empty, microbatches < 1, or the
// orders deadlock.
std::vector<std::vector<TimedOp>> replay_ops(Schedule schedule, int microbatches, const std::vector<StageOpTimes>& stages);

// The step replay_ops gives, per stage: every stage's window ends when the slowest has run
// its last op and its `other`.
std::vector<ReplayedStage> replay_step(Schedule schedule, int microbatches, const std::vector<StageOpTimes>& stages);

}  // namespace loom::analysis
