// Optimizer state, kept in the parameters' backend, and the per-parameter update loop
// through that backend's kernels.
#include "loom/engine/optimizer.h"

namespace loom::engine {

Optimizer::Optimizer(const OptimizerSpec& spec, const std::vector<Param*>& params) : spec_(spec), params_(params) {
  const bool needs_first = spec.kind != OptimizerKind::Sgd;
  const bool needs_second = spec.kind == OptimizerKind::Adam;
  auto zeros = [](const Param& p, bool needed) {
    Buffer<float> state(p.value.backend());
    state.resize(needed ? std::int64_t(p.value.size()) : 0);
    state.fill(0.0f);
    return state;
  };
  for (const Param* p : params_) {
    first_.push_back(zeros(*p, needs_first));
    second_.push_back(zeros(*p, needs_second));
  }
}

void Optimizer::step(float lr_scale) {
  ++t_;
  const float lr = float(spec_.lr) * lr_scale;
  const float wd = float(spec_.weight_decay);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Param& p = *params_[i];
    const auto n = static_cast<std::int64_t>(p.value.size());
    kernels::Backend& be = p.value.backend();
    switch (spec_.kind) {
      case OptimizerKind::Sgd: be.sgd_step(p.value.data(), p.grad.data(), n, lr, wd); break;
      case OptimizerKind::Momentum:
        be.momentum_step(p.value.data(), p.grad.data(), first_[i].data(), n, lr, float(spec_.momentum), wd);
        break;
      case OptimizerKind::Adam:
        be.adam_step(p.value.data(), p.grad.data(), first_[i].data(), second_[i].data(), n,
                     kernels::AdamParams{lr, float(spec_.beta1), float(spec_.beta2), float(spec_.eps), wd, t_});
        break;
    }
  }
  // The traced Optimizer span around step() then covers a device's update, not its launch.
  if (!params_.empty()) params_.front()->value.backend().synchronize();
}

std::vector<NamedTensor> Optimizer::state() const {
  std::vector<NamedTensor> out;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (first_[i].size() > 0) out.push_back({params_[i]->name + "#m", first_[i].to_host()});
    if (second_[i].size() > 0) out.push_back({params_[i]->name + "#v", second_[i].to_host()});
  }
  return out;
}

Status Optimizer::restore(const std::map<std::string, const std::vector<float>*>& tensors, std::int64_t steps_taken) {
  auto take = [&](const std::string& name, Buffer<float>& into) -> Status {
    if (into.size() == 0) return {};
    const auto found = tensors.find(name);
    if (found == tensors.end())
      return make_error(ErrorCode::Corrupt, "the checkpoint has no optimizer state '" + name + "'",
                        "was it saved with another optimizer? resume with the run's own plan");
    if (found->second->size() != into.size())
      return make_error(ErrorCode::Corrupt, "optimizer state '" + name + "' has " +
                                                std::to_string(found->second->size()) + " values in the checkpoint, " +
                                                std::to_string(into.size()) + " in this model");
    into.assign(*found->second);
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
