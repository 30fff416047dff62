// Pipeline stage statistics: busy time and bubbles per stage over steady steps, against
// the textbook, the schedule's own and the replayed theory; imbalance across stages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/analysis/stats.h"
#include "loom/core/plan.h"
#include "loom/trace/event.h"
#include "loom/trace/records.h"

namespace loom::analysis {

// Pipeline bubbles per stage, over steady steps only. Per worker rank:
//   window = the union of its steady Step spans (time inside optimizer steps)
//   busy   = the union of Forward, Backward, Loss, Optimizer and DataLoad spans on the
//            compute stream, intersected with the window
//   bubble = window - busy (the compute thread waited: Idle spans, receives, all-reduce)
// A stage's busy_s and bubble_s are the means over its ranks that have events. One
// convention for every schedule: bubble_fraction = bubble / window, never above 100%.
// Its references, in the same convention (pipeline_replay.h replays one step with free
// communication):
//   bubble_textbook = (p-1) / (m+p-1): uniform stages, only forwards and backwards
//   bubble_schedule = replay with every stage at the mean op times of all stages: the
//                     schedule's own bubble for this model's op sizes
//   bubble_theory   = replay with each stage's own mean op times: what the schedule and
//                     the stages' imbalance imply; bubble_theory - bubble_schedule is the
//                     cost of imbalance, bubble_fraction - bubble_theory communication and
//                     jitter. NaN where no replay applies (branches on other stages, a
//                     stage without steady steps).
// A rank without Step spans has busy = bubble = 0; a stage without time has fraction NaN.
// max_in_flight (micro-batches whose forward started and backward has not finished) and
// peak_activation_bytes are the maxima over the stage's ranks of the metrics of those
// names that each worker records at the end of training; 0 when absent.
struct StageStats {
  int stage = 0;
  std::vector<int> ranks;            // world ranks of this stage's replicas
  double busy_s = 0, bubble_s = 0;   // per rank, mean over the stage's ranks
  double bubble_fraction = kNaN, bubble_theory = kNaN, bubble_schedule = kNaN, bubble_textbook = kNaN;
  double forward_ms = kNaN, backward_ms = kNaN;  // mean op per micro-batch, steady steps
  std::int64_t max_in_flight = 0, peak_activation_bytes = 0;
};

struct PipelineStats {
  std::string schedule;           // "gpipe" / "1f1b"
  int stages = 1, microbatches = 1;
  std::string bubble_convention;  // always "of stage step time"
  // Busiest stage's busy time over the idlest's, minus one (0 = balanced); NaN for one stage.
  double imbalance = kNaN;
  // Set when imbalance > kImbalanceWarning: plain words on what dominates the bubble.
  std::string warning;
  std::vector<StageStats> stages_stats;  // one per stage, ordered; JSON key "stages"
};

// Stages whose busy times differ by more than this are called unbalanced.
inline constexpr double kImbalanceWarning = 0.25;

// Pure, for stored runs and live views alike. events_by_rank[r] = rank r's events (any
// order, own clock); ranks beyond the vector have no events. Metrics of other names are
// ignored.
PipelineStats pipeline_stats(const Plan& plan, const std::vector<std::vector<trace::Event>>& events_by_rank,
                             const std::vector<trace::MetricRecord>& metrics);

}  // namespace loom::analysis
