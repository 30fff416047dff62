// The pieces of a predicted step that every strategy's predictor shares (internal to
// loom_predict): a stage's work and its costs, the layout of replicas, stages and
// micro-batches, buckets as GradientSync forms them, an op's spans, and the BLAS threads
// the launcher will give each rank.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/analysis/pipeline_replay.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/predict/predictor.h"
#include "step_costs.h"

namespace loom::predict {

struct Bucket {
  std::int64_t bytes = 0;
  std::size_t last_layer = 0;  // index in the stage's layers whose backward completes it
};

// One stage of one replica: its layers and what each op costs.
struct StageWork {
  std::vector<const LayerInfo*> layers;  // forward order
  std::vector<double> forward_ms, backward_ms;
  double data_ms = 0, loss_ms = 0, optimizer_ms = 0, delay_ms = 0, slowdown = 1;
  double to_next_ms = 0, to_previous_ms = 0;
  double to_next_wire_ms = 0, to_previous_wire_ms = 0;  // what of them holds the link (StageOpTimes)
  // Its leading layers that need nothing from another stage (a branch fed by the batch):
  // their forward (with the data loading) runs before the input arrives, their backward
  // after the gradient has been sent back.
  double ahead_ms = 0, after_send_ms = 0;
  std::int64_t output_bytes = 0;  // what crosses to the next stage per micro-batch
  std::vector<Bucket> buckets;
};

struct Layout {
  int replicas = 1, stages = 1, chunks = 1;  // chunks: micro-batches x accumulation micro-steps
  double samples = 0;                        // per chunk
};

double sum(const std::vector<double>& v);
std::int64_t elements(const Shape& shape);
// A layer's parameter tensors' bytes in the engine's order: the weight, then the bias.
std::vector<std::int64_t> tensor_bytes(const LayerInfo& layer);
// Buckets as GradientSync forms them: tensor by tensor from the last parameter back.
std::vector<Bucket> buckets_of(const std::vector<const LayerInfo*>& layers, double bucket_mb);
Layout layout_of(const Plan& plan);
// A stage's layers in forward order; a parallel block split over stages adds its
// concatenation on the stage where the block ends.
std::vector<const LayerInfo*> stage_layers(const ModelInfo& model, int stage);
StageWork stage_work(const Plan& plan, const ModelInfo& model, int stage, int rank, StepCosts& costs);
// The spans of one timed op on its stage.
void add_op_spans(const analysis::TimedOp& t, const StageWork& w, int rank, int chunks, std::vector<PredictedSpan>& out);
// When the last backward op finishes each of the stage's layers (index in w.layers).
std::vector<double> layer_done_times(const analysis::TimedOp& last_backward, const StageWork& w);
// BLAS threads per rank as the launcher will set them, and how far the busiest host's
// threads outnumber its cores (out.threads_per_rank, out.stretch, a note).
void set_threads(const Plan& plan, const MachineShape& machine, Prediction& out);

// The most ranks the plan puts on one of its hosts (0 without devices).
int most_ranks_on_a_host(const Plan& plan);

}  // namespace loom::predict
