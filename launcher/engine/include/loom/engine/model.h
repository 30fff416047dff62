// The model at run time: one Module per layer of the plan, built from the plan's layer
// specs and the inferred shapes, computing through one kernel backend (CPU or CUDA) whose
// memory holds its parameters and activations. Forward and backward of every layer are
// traced with the layer's LayerId.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/engine/tensor.h"
#include "loom/trace/recorder.h"

namespace loom::engine {

class BackwardObserver;
class DeviceTrace;

// What one forward/backward pass needs to know besides its input.
struct Pass {
  bool training = true;
  std::int32_t step = 0;
  std::int16_t microbatch = -1;
  std::uint64_t seed = 0;             // dropout stream
  std::int64_t first_sample = 0;      // global index of this batch's first sample (dropout)
  trace::Recorder* recorder = nullptr;
  BackwardObserver* observer = nullptr;  // told after each layer's backward (gradient sync)
  // Which set of saved activations this pass uses. A pipeline keeps several micro-batches
  // between their forward and backward; each gets its own slot, and backward must name
  // the slot its forward used.
  int slot = 0;
  // Where a device's layer spans are stamped instead of host-timed (device_trace.h); null
  // on the CPU and untraced.
  DeviceTrace* device_trace = nullptr;
  // Where a captured step keeps first_sample in device memory (dropout reads it when it
  // runs, so each replay draws its own masks); null: first_sample as given.
  const std::uint64_t* device_first_sample = nullptr;
};

// The per-slot part of a module's state (activations saved for backward), grown on demand.
template <class T>
T& slot_state(std::vector<T>& per_slot, int slot) {  // ("slots" is a Qt macro)
  if (per_slot.size() <= static_cast<std::size_t>(slot)) per_slot.resize(static_cast<std::size_t>(slot) + 1);
  return per_slot[static_cast<std::size_t>(slot)];
}

// The same for per-slot tensors, created in `backend`'s memory.
inline Tensor& slot_tensor(std::vector<Tensor>& per_slot, int slot, kernels::Backend& backend) {
  while (per_slot.size() <= static_cast<std::size_t>(slot)) per_slot.emplace_back(backend);
  return per_slot[static_cast<std::size_t>(slot)];
}

class Module {
 public:
  virtual ~Module() = default;
  virtual void forward(const Tensor& x, Tensor& y, const Pass& pass) = 0;
  // dy is the loss gradient w.r.t. y; dx (when not null) receives it w.r.t. x.
  // Parameter gradients accumulate.
  virtual void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const Pass& pass) = 0;
  virtual void collect_params(std::vector<Param*>& /*out*/) {}
  // Bytes of scratch memory the layer keeps for its kernels (a convolution's im2col
  // columns), for the device memory by part (docs/figures.md).
  virtual std::int64_t workspace_bytes() const { return 0; }

  LayerId id;
  Shape out_shape;  // per-sample output shape
  kernels::Backend* backend = nullptr;  // where it computes; set by the builder
};

// Layers run one after another; keeps each layer's output for the backward pass.
class Sequential final : public Module {
 public:
  void add(std::unique_ptr<Module> module);
  void forward(const Tensor& x, Tensor& y, const Pass& pass) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const Pass& pass) override;
  void collect_params(std::vector<Param*>& out) override;
  std::int64_t workspace_bytes() const override;
  bool empty() const { return modules_.empty(); }

 private:
  std::vector<std::unique_ptr<Module>> modules_;
  std::vector<std::vector<Tensor>> outputs_;  // [slot][i] = output of module i (the last is copied to y)
  std::vector<Tensor> gradients_;  // gradients_[i] = loss gradient w.r.t. outputs_[i] (scratch)
};

// Builds the modules for `specs`, a run of consecutive layers (top-level or one branch's)
// whose first row in the pre-order numbering of `info` is `first_row`. A pipeline stage
// builds only its own layers this way, with the same weights the whole model would have.
std::unique_ptr<Sequential> build_layers(const std::vector<const LayerSpec*>& specs, const ModelInfo& info,
                                         std::size_t first_row, std::uint64_t seed,
                                         kernels::Backend& backend = default_backend());

class Model {
 public:
  // Builds every layer of the plan with weights initialised from training.seed, so two
  // processes building the same plan hold identical parameters.
  static Model build(const Plan& plan, const ModelInfo& info, kernels::Backend& backend = default_backend());

  // logits: [batch, classes]
  void forward(const Tensor& x, Tensor& logits, const Pass& pass);
  void backward(const Tensor& x, const Tensor& logits, const Tensor& dlogits, const Pass& pass);
  void zero_grad();
  const std::vector<Param*>& params() const { return params_; }
  std::int64_t parameter_count() const;
  std::int64_t workspace_bytes() const { return body_->workspace_bytes(); }
  kernels::Backend& backend() const { return *backend_; }

 private:
  kernels::Backend* backend_ = nullptr;
  std::unique_ptr<Sequential> body_;
  std::vector<Param*> params_;
};

}  // namespace loom::engine
