// Memory per rank, counted as the engine's modules (engine/model.cpp) and trainers
// (one-stage, pipeline_trainer.cpp) allocate it; see rank_memory.h.
#include "rank_memory.h"

#include <map>

#include "loom/core/memory_layout.h"
#include "loom/core/stage_graph.h"
#include "step_parts.h"

namespace loom::predict {

namespace {

double floats_of(const Shape& shape) { return double(shape_elements(shape)); }

// One past the last row nested in the layer at `row` (pre-order).
std::size_t subtree_end(const ModelInfo& model, std::size_t row) {
  std::size_t end = row + 1;
  while (end < model.layers.size() && model.layers[end].depth > model.layers[row].depth) ++end;
  return end;
}

// A convolution's scratch: unfolded input rows C*R*R from its weights (K*C*R*R of them).
double conv_workspace(const LayerInfo& conv, std::int64_t samples, DeviceKind device) {
  const std::int64_t out_channels = conv.output.at(0);
  const std::int64_t per_sample = conv_workspace_per_sample((conv.params - conv.bias_params) / out_channels,
                                                            out_channels, conv.output.at(1) * conv.output.at(2));
  const std::int64_t block = device == DeviceKind::Gpu ? samples : cpu_conv_block_samples(per_sample, samples);
  return double(block * per_sample);
}

class ModuleCounter {
 public:
  ModuleCounter(const ModelInfo& model, std::int64_t samples, DeviceKind device, StageFloats& out)
      : model_(model), samples_(samples), device_(device), out_(out) {}

  // A Sequential over rows [first, end): every module's output per slot, and a gradient
  // buffer for every output but the last, once. Its first module gets an input gradient
  // only where the sequence has one to give (`has_dx`).
  void sequence(std::size_t first, std::size_t end, bool has_dx) {
    double last = 0;
    for (std::size_t row = first; row < end; row = subtree_end(model_, row)) {
      module(row, row == first ? has_dx : true);
      last = floats_of(model_.layers[row].output);
      out_.once += last;
    }
    out_.once -= last;
  }

 private:
  void module(std::size_t row, bool has_dx) {
    const LayerInfo& layer = model_.layers[row];
    out_.per_slot += floats_of(layer.output);
    if (layer.kind == LayerKind::Dropout || layer.kind == LayerKind::MaxPool2d) out_.per_slot += floats_of(layer.output);  // mask, argmax
    if (layer.kind == LayerKind::Conv2d) out_.workspace += conv_workspace(layer, samples_, device_);
    if (layer.kind == LayerKind::Parallel) block(row, has_dx);
  }

  // A parallel block: each branch a Sequential, its output copied out per slot and its
  // gradient once; the block's input gradient once, where it has one.
  void block(std::size_t row, bool has_dx) {
    const std::size_t end = subtree_end(model_, row);
    std::map<int, std::pair<std::size_t, std::size_t>> branches;  // branch -> its rows
    for (std::size_t r = row + 1; r < end; r = subtree_end(model_, r)) {
      auto it = branches.try_emplace(model_.layers[r].branch, r, r).first;
      it->second.second = subtree_end(model_, r);
    }
    for (const auto& [branch, rows] : branches) {
      sequence(rows.first, rows.second, has_dx);
      double branch_out = 0;
      for (std::size_t r = rows.first; r < rows.second; r = subtree_end(model_, r)) branch_out = floats_of(model_.layers[r].output);
      out_.per_slot += branch_out;
      out_.once += branch_out;
    }
    if (has_dx) out_.once += floats_of(model_.layers[row].input);
  }

  const ModelInfo& model_;
  std::int64_t samples_;
  DeviceKind device_;
  StageFloats& out_;
};

// The one-stage trainer: the model's Sequential, the batch and its labels, the logits
// copied out, the probabilities and their gradient; one slot.
StageFloats one_stage(const Plan& plan, const ModelInfo& model, std::int64_t samples, DeviceKind device) {
  StageFloats f;
  ModuleCounter(model, samples, device, f).sequence(0, model.layers.size(), false);
  f.per_slot += floats_of(plan.model.input) + 1 + floats_of(model.output) + 2.0 * dataset_classes(plan);
  return f;
}

// The gradients a stage receives or adds up for the values it produces: one received per
// consumer on another stage, and their sum where several consumers contribute.
double output_gradients(const StageGraph& graph, int stage) {
  double floats = 0;
  for (std::size_t v = 1; v < graph.values.size(); ++v) {
    const StageValue& value = graph.values[v];
    if (value.stage != stage || int(v) == graph.output) continue;
    int parts = 0;
    for (int c : value.consumers)
      for (int input : graph.units[std::size_t(c)].inputs) {
        if (input != int(v)) continue;
        ++parts;
        if (graph.units[std::size_t(c)].stage != stage) floats += floats_of(value.shape);
      }
    if (parts > 1) floats += floats_of(value.shape);
  }
  return floats;
}

// The pipeline trainer's stage: per slot, each unit's modules and its output copied out,
// every input received from another stage and the gradient it gives each input, the
// gradients of its outputs, the batch and labels where it loads them, and on the loss
// stage the probabilities and their gradient.
StageFloats pipeline_stage(const Plan& plan, const ModelInfo& model, const StageGraph& graph, int stage,
                           std::int64_t samples, DeviceKind device) {
  StageFloats f;
  bool loads_batch = stage == graph.loss_stage();
  for (const StageUnit& unit : graph.units) {
    if (unit.stage != stage) continue;
    const bool fed_by_batch = unit.inputs.front() == kModelInput;
    if (unit.kind == UnitKind::Layers)
      ModuleCounter(model, samples, device, f).sequence(unit.first_row, unit.first_row + unit.rows, !fed_by_batch);
    f.per_slot += floats_of(graph.values[std::size_t(unit.output)].shape);
    for (int v : unit.inputs) {
      const StageValue& value = graph.values[std::size_t(v)];
      if (v == kModelInput) loads_batch = true;
      if (v != kModelInput && value.stage != stage) f.per_slot += floats_of(value.shape);  // received
      if (v != kModelInput || unit.kind == UnitKind::Concat) f.per_slot += floats_of(value.shape);  // its gradient
    }
  }
  f.per_slot += output_gradients(graph, stage);
  if (loads_batch) f.per_slot += floats_of(plan.model.input) + 1;
  if (stage == graph.loss_stage()) f.per_slot += 2.0 * dataset_classes(plan);
  return f;
}

}  // namespace

std::int64_t stage_param_floats(const ModelInfo& model, int stage) {
  std::int64_t floats = 0;
  for (const LayerInfo& layer : model.layers) {
    if (layer.stage != stage) continue;
    for (std::int64_t bytes : tensor_bytes(layer)) floats += padded_param_floats(bytes / 4);
  }
  return floats;
}

Expected<StageFloats> stage_floats(const Plan& plan, const ModelInfo& model, int stage, std::int64_t samples,
                                   DeviceKind device) {
  const bool pipeline_trainer = plan.parallel.stages > 1 || plan.parallel.microbatches > 1;
  if (!pipeline_trainer) return one_stage(plan, model, samples, device);
  auto graph = build_stage_graph(plan, model);
  if (!graph.ok()) return graph.error();
  return pipeline_stage(plan, model, *graph, stage, samples, device);
}

}  // namespace loom::predict
