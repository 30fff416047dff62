// The model cut into pipeline stages: a small data-flow graph of units (runs of layers,
// branches of a parallel block placed apart, the concatenation where such a block ends)
// joined by values (the tensors between them). Each unit runs on one stage; a value whose
// consumer sits on another stage crosses between ranks: forward sends the value, backward
// sends its gradient back. The graph is the same on every rank, so sender and receiver
// agree on what each message is without negotiating. It lives in core because the engine
// runs it and the predictor counts what each stage's micro-batches keep from it.
//
// Placement rules (checked by validate_plan, repeated here as errors for hand-built plans):
// stages follow model order, so every value flows from a stage to the same or a later one.
// A parallel block whose branches all run on the stage where the block ends stays one
// module; otherwise every branch becomes its own unit on its own stage, fed with the
// block's input, and their outputs are concatenated on the stage where the block ends: the
// stage of the next layer, or the last branch's stage when the block ends the model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/core/status.h"

namespace loom {

inline constexpr int kModelInput = 0;  // value id of the batch itself; every consumer loads it

enum class UnitKind { Layers, Concat };

struct StageUnit {
  UnitKind kind = UnitKind::Layers;
  int stage = 0;
  std::vector<const LayerSpec*> layers;  // Layers: consecutive layers of one sequence
  std::size_t first_row = 0;             // Layers: pre-order row of layers[0] in ModelInfo
  std::size_t rows = 0;                  // Layers: rows its layers span (nested blocks included)
  std::vector<int> inputs;               // Layers: one value; Concat: one per branch, in order
  int output = -1;
  std::vector<std::int64_t> widths;      // Concat: per-sample size of each input
  std::int32_t layer = -1;               // Concat: the parallel block's LayerId (tracing)
};

struct StageValue {
  int producer = -1;           // unit index; -1 for the model input
  int stage = -1;              // producer's stage; -1 for the model input (loaded where used)
  Shape shape;                 // per sample
  std::vector<int> consumers;  // unit indices, ascending
};

struct StageGraph {
  std::vector<StageUnit> units;    // in model (topological) order
  std::vector<StageValue> values;  // values[kModelInput] is the input batch
  int output = -1;                 // the logits' value
  int stages = 1;
  int loss_stage() const { return values[static_cast<std::size_t>(output)].stage; }
  // Stages that consume `value`, other than its producer's, ascending, each once.
  std::vector<int> remote_consumer_stages(int value) const;
};

// Fails with the layer's JSON path when a placement cannot run (a nested block placed
// apart from its branch, a stage beyond parallel.stages).
Expected<StageGraph> build_stage_graph(const Plan& plan, const ModelInfo& info);

}  // namespace loom
