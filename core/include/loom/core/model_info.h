// Shape, parameter and memory inference for a model: what the designer shows as a user
// edits and what `loom-cli validate` prints. Layers are numbered in pre-order (a parallel
// block, then its first branch's layers, then the next branch's...); that number is the
// LayerId that trace events carry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/ids.h"
#include "loom/core/plan.h"

namespace loom {

struct LayerInfo {
  LayerId id;
  std::string name;
  LayerKind kind = LayerKind::Relu;
  std::string json_path;  // "/model/layers/2" or "/model/layers/4/branches/1/layers/0"
  int depth = 0;          // nesting level: 0 top-level, 1 inside a branch, ...
  LayerId parent;         // enclosing parallel block (invalid at top level)
  int branch = -1;        // branch index inside the parent
  int stage = 0;          // pipeline stage it runs on
  Shape input;
  Shape output;
  std::int64_t params = 0;           // trainable scalars
  std::int64_t bias_params = 0;      // of them, the bias's (linear, conv2d with bias)
  std::int64_t param_bytes = 0;      // params * 4 (fp32)
  std::int64_t activation_bytes = 0; // output activation for the whole global batch, fp32
  std::int64_t forward_flops = 0;    // per sample (multiply-add = 2 flops)
};

struct ModelInfo {
  std::vector<LayerInfo> layers;  // pre-order
  Shape output;                   // model output per sample
  std::int64_t total_params = 0;
  std::int64_t total_param_bytes = 0;
  std::int64_t total_activation_bytes = 0;
  std::int64_t forward_flops = 0;  // per sample
  // Memory a stage needs for one replica: weights + gradients + optimizer state +
  // activations of its layers for the global batch. Index = stage.
  std::vector<std::int64_t> stage_memory_bytes;
  std::vector<std::int64_t> stage_params;
};

// Infers shapes through the model. Problems (a conv kernel larger than its input, a
// linear layer after an unflattened image, branches whose outputs cannot be concatenated)
// are appended to `errors` with the layer's JSON path; inference continues where it can.
ModelInfo infer_model(const Plan& plan, std::vector<PlanError>* errors);

// The table `loom-cli validate` prints: layer, output shape, parameters, memory.
std::string format_model_table(const ModelInfo& info);
std::string format_shape(const Shape& shape);  // "1x28x28"
std::string format_bytes(std::int64_t bytes);  // "1.2 MiB"

}  // namespace loom
