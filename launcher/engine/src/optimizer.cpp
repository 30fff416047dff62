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

std::vector<NamedTensor> Optimizer::state() const {
  std::vector<NamedTensor> out;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!first_[i].empty()) out.push_back({params_[i]->name + "#m", first_[i]});
    if (!second_[i].empty()) out.push_back({params_[i]->name + "#v", second_[i]});
  }
  return out;
}

Status Optimizer::restore(const std::map<std::string, const std::vector<float>*>& tensors, std::int64_t steps_taken) {
  auto take = [&](const std::string& name, std::vector<float>& into) -> Status {
    if (into.empty()) return {};
    const auto found = tensors.find(name);
    if (found == tensors.end())
      return make_error(ErrorCode::Corrupt, "the checkpoint has no optimizer state '" + name + "'",
                        "was it saved with another optimizer? resume with the run's own plan");
    if (found->second->size() != into.size())
      return make_error(ErrorCode::Corrupt, "optimizer state '" + name + "' has " +
                                                std::to_string(found->second->size()) + " values in the checkpoint, " +
                                                std::to_string(into.size()) + " in this model");
    into = *found->second;
    return {};
  };
  for (std::size_t i = 0; i < params_.size(); ++i) {
    LOOM_TRY(take(params_[i]->name + "#m", first_[i]));
    LOOM_TRY(take(params_[i]->name + "#v", second_[i]));
  }
  t_ = steps_taken;
  return {};
}

}  // namespace loom::engine
