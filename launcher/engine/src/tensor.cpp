// The home of buffers never given a backend (tensor.h).
#include "loom/engine/tensor.h"

#include "loom/core/memory_layout.h"
#include "loom/kernels/cpu_backend.h"

namespace loom::engine {

kernels::Backend& default_backend() { return cpu::shared_cpu_backend(); }

ParamArena ParamArena::pack(const std::vector<Param*>& params, kernels::Backend& backend) {
  ParamArena arena{Buffer<float>(backend), Buffer<float>(backend), {}};
  std::int64_t total = 0;
  for (const Param* p : params) {
    arena.offsets.push_back(total);
    total += padded_param_floats(std::int64_t(p->value.size()));
  }
  arena.values.resize(total);
  arena.grads.resize(total);
  arena.values.fill(0.0f);
  arena.zero_grads();
  for (std::size_t i = 0; i < params.size(); ++i) {
    Param& p = *params[i];
    const auto n = std::int64_t(p.value.size());
    float* value = arena.values.data() + arena.offsets[i];
    backend.copy(value, p.value.data(), n * std::int64_t(sizeof(float)));
    p.value = Buffer<float>::view(backend, value, n);
    p.grad = Buffer<float>::view(backend, arena.grads.data() + arena.offsets[i], n);
  }
  return arena;
}

}  // namespace loom::engine
