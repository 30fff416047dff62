// Applies the plan's optimizer to a model's parameters, keeping per-parameter state
// (momentum buffers, Adam moments) beside them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/engine/checkpoint.h"
#include "loom/engine/tensor.h"

namespace loom::engine {

class Optimizer {
 public:
  Optimizer(const OptimizerSpec& spec, const std::vector<Param*>& params);
  // One update from the accumulated gradients; `lr_scale` lets asynchronous modes scale
  // the learning rate (staleness-aware SGD) without rebuilding the optimizer.
  void step(float lr_scale = 1.0f);
  std::int64_t steps_taken() const { return t_; }
  // The state kept beside the parameters, for a checkpoint: "<param>#m" and "<param>#v"
  // tensors (none for plain SGD).
  std::vector<NamedTensor> state() const;
  // Takes that state back (from tensors by name) and the step count; names the tensor
  // that is missing or of the wrong size.
  Status restore(const std::map<std::string, const std::vector<float>*>& tensors, std::int64_t steps_taken);

 private:
  OptimizerSpec spec_;
  std::vector<Param*> params_;
  std::vector<Buffer<float>> first_, second_;  // momentum / Adam m, Adam v (in the parameters' backend)
  std::int64_t t_ = 0;
};

}  // namespace loom::engine
