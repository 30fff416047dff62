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
  // With `arena` (the params packed by ParamArena::pack, which must outlive this), the
  // state is packed the same way and one update runs over the whole arena: one kernel
  // launch per step instead of one per tensor, with the same result (every update is
  // element by element).
  Optimizer(const OptimizerSpec& spec, const std::vector<Param*>& params, ParamArena* arena = nullptr);
  // One update from the accumulated gradients; `lr_scale` lets asynchronous modes scale
  // the learning rate (staleness-aware SGD) without rebuilding the optimizer.
  // Queued on the parameters' backend: on a device it returns before the update has run
  // (a stamped ComputeSpan times it; the step's end waits for it).
  void step(float lr_scale = 1.0f);
  // Waits for the queued updates: for a caller that times the update on the host clock.
  void wait() const;
  std::int64_t steps_taken() const { return t_; }
  // Bytes of state kept beside the parameters (momentum, Adam's moments).
  std::int64_t state_bytes() const;
  // The state kept beside the parameters, for a checkpoint: "<param>#m" and "<param>#v"
  // tensors (none for plain SGD).
  std::vector<NamedTensor> state() const;
  // Takes that state back (from tensors by name) and the step count; names the tensor
  // that is missing or of the wrong size.
  Status restore(const std::map<std::string, const std::vector<float>*>& tensors, std::int64_t steps_taken);

 private:
  // One update of n floats from w, dw, m, v (m, v may be null when the optimizer has none).
  void update(kernels::Backend& be, float* w, const float* dw, float* m, float* v, std::int64_t n, float lr);

  OptimizerSpec spec_;
  std::vector<Param*> params_;
  ParamArena* arena_ = nullptr;
  Buffer<float> packed_first_, packed_second_;  // with an arena: the state, packed as it is
  std::vector<Buffer<float>> first_, second_;  // momentum / Adam m, Adam v (in the parameters' backend)
  std::int64_t t_ = 0;
};

}  // namespace loom::engine
