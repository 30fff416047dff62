// Optimizer state, kept in the parameters' backend, and the per-parameter update loop
// through that backend's kernels.
#include "loom/engine/optimizer.h"

namespace loom::engine {

namespace {
Buffer<float> zeros(kernels::Backend& backend, std::int64_t n) {
  Buffer<float> state(backend);
  state.resize(n);
  state.fill(0.0f);
  return state;
}
}  // namespace

Optimizer::Optimizer(const OptimizerSpec& spec, const std::vector<Param*>& params, ParamArena* arena)
    : spec_(spec), params_(params), arena_(arena && !params.empty() ? arena : nullptr) {
  const bool needs_first = spec.kind != OptimizerKind::Sgd;
  const bool needs_second = spec.kind == OptimizerKind::Adam;
  if (arena_) {
    kernels::Backend& be = arena_->values.backend();
    packed_first_ = zeros(be, needs_first ? arena_->size() : 0);
    packed_second_ = zeros(be, needs_second ? arena_->size() : 0);
  }
  // With an arena each tensor's state is a view of the packed state (checkpoints name it
  // per tensor); without one it is a buffer of its own.
  auto state_of = [&](std::size_t i, bool needed, Buffer<float>& packed) {
    const Param& p = *params_[i];
    const auto n = std::int64_t(needed ? p.value.size() : 0);
    if (!arena_ || !needed) return zeros(p.value.backend(), n);
    return Buffer<float>::view(p.value.backend(), packed.data() + arena_->offsets[i], n);
  };
  for (std::size_t i = 0; i < params_.size(); ++i) {
    first_.push_back(state_of(i, needs_first, packed_first_));
    second_.push_back(state_of(i, needs_second, packed_second_));
  }
}

void Optimizer::step(float lr_scale) {
  ++t_;
  const float lr = float(spec_.lr) * lr_scale;
  if (arena_) {
    update(arena_->values.backend(), arena_->values.data(), arena_->grads.data(), packed_first_.data(), packed_second_.data(),
           arena_->size(), lr);
    return;
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Param& p = *params_[i];
    update(p.value.backend(), p.value.data(), p.grad.data(), first_[i].data(), second_[i].data(),
           std::int64_t(p.value.size()), lr);
  }
}

void Optimizer::update(kernels::Backend& be, float* w, const float* dw, float* m, float* v, std::int64_t n,
                       float lr) {
  const float wd = float(spec_.weight_decay);
  switch (spec_.kind) {
    case OptimizerKind::Sgd: be.sgd_step(w, dw, n, lr, wd); break;
    case OptimizerKind::Momentum: be.momentum_step(w, dw, m, n, lr, float(spec_.momentum), wd); break;
    case OptimizerKind::Adam:
      be.adam_step(w, dw, m, v, n, kernels::AdamParams{lr, float(spec_.beta1), float(spec_.beta2), float(spec_.eps), wd, t_});
      break;
  }
}

void Optimizer::wait() const {
  if (!params_.empty()) params_.front()->value.backend().synchronize();
}

std::int64_t Optimizer::state_bytes() const {
  if (arena_) return packed_first_.capacity_bytes() + packed_second_.capacity_bytes();
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) bytes += first_[i].capacity_bytes() + second_[i].capacity_bytes();
  return bytes;
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
