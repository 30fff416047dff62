// Optimizer state and the per-parameter update loop over the CPU kernels.
#include "loom/engine/optimizer.h"

#include "loom/kernels/cpu.h"

namespace loom::engine {

Optimizer::Optimizer(const OptimizerSpec& spec, const std::vector<Param*>& params) : spec_(spec), params_(params) {
  const bool needs_first = spec.kind != OptimizerKind::Sgd;
  const bool needs_second = spec.kind == OptimizerKind::Adam;
  for (const Param* p : params_) {
    first_.emplace_back(needs_first ? p->value.size() : 0, 0.0f);
    second_.emplace_back(needs_second ? p->value.size() : 0, 0.0f);
  }
}

void Optimizer::step(float lr_scale) {
  ++t_;
  const float lr = float(spec_.lr) * lr_scale;
  const float wd = float(spec_.weight_decay);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Param& p = *params_[i];
    const auto n = static_cast<std::int64_t>(p.value.size());
    switch (spec_.kind) {
      case OptimizerKind::Sgd: cpu::sgd_step(p.value.data(), p.grad.data(), n, lr, wd); break;
      case OptimizerKind::Momentum:
        cpu::momentum_step(p.value.data(), p.grad.data(), first_[i].data(), n, lr, float(spec_.momentum), wd);
        break;
      case OptimizerKind::Adam:
        cpu::adam_step(p.value.data(), p.grad.data(), first_[i].data(), second_[i].data(), n, lr, float(spec_.beta1),
                       float(spec_.beta2), float(spec_.eps), wd, t_);
        break;
    }
  }
}

}  // namespace loom::engine
