// Run-time layers: each Module owns its parameters and scratch buffers, in its backend's
// memory, and computes through that backend. Modules are built in the same pre-order as model inference numbers layers, so a
// module's LayerId matches the row `loom-cli validate` prints.
#include "loom/engine/model.h"

#include <cmath>
#include <stdexcept>

#include "loom/engine/device_trace.h"
#include "loom/engine/gradient_sync.h"
#include "loom/kernels/cpu.h"  // uniform_init: weights are drawn on the host, then uploaded

namespace loom::engine {
namespace {

using trace::EventKind;
using trace::Stream;

// Seeds differ per layer and per tensor so weights are independent, yet identical in
// every process that builds the same plan.
std::uint64_t param_seed(std::uint64_t seed, LayerId layer, int tensor) {
  return seed * 0x9E3779B97F4A7C15ULL + std::uint64_t(layer.value) * 1000003ULL + std::uint64_t(tensor);
}

Param make_param(kernels::Backend& backend, const std::string& name, LayerId layer, std::int64_t size, float bound,
                 std::uint64_t seed) {
  Param p{name, layer.value, Buffer<float>(backend), Buffer<float>(backend)};
  std::vector<float> host(static_cast<std::size_t>(size));
  cpu::uniform_init(host.data(), size, bound, seed);
  p.value.assign(host);
  p.grad.resize(size);
  p.grad.fill(0.0f);
  return p;
}

kernels::Activation activation_of(LayerKind kind) {
  switch (kind) {
    case LayerKind::Relu: return kernels::Activation::Relu;
    case LayerKind::Tanh: return kernels::Activation::Tanh;
    default: return kernels::Activation::Gelu;
  }
}

int as_int(std::int64_t v) { return static_cast<int>(v); }

class Linear final : public Module {
 public:
  Linear(kernels::Backend& be, const LayerInfo& info, const LayerSpec& spec, std::uint64_t seed)
      : in_(as_int(info.input[0])), out_(as_int(spec.out)), has_bias_(spec.bias) {
    const float bound = 1.0f / std::sqrt(float(in_));
    weight_ = make_param(be, info.name + ".weight", info.id, std::int64_t(in_) * out_, bound,
                         param_seed(seed, info.id, 0));
    if (has_bias_) bias_ = make_param(be, info.name + ".bias", info.id, out_, bound, param_seed(seed, info.id, 1));
  }
  void forward(const Tensor& x, Tensor& y, const Pass&) override {
    y.resize(x.batch, out_shape);
    backend->linear_forward(x.ptr(), weight_.value.data(), has_bias_ ? bias_.value.data() : nullptr, y.ptr(),
                            as_int(x.batch), in_, out_);
  }
  void backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const Pass&) override {
    if (dx) dx->resize(x.batch, x.sample);
    backend->linear_backward(x.ptr(), weight_.value.data(), dy.ptr(), dx ? dx->ptr() : nullptr, weight_.grad.data(),
                         has_bias_ ? bias_.grad.data() : nullptr, as_int(x.batch), in_, out_);
  }
  void collect_params(std::vector<Param*>& out) override {
    out.push_back(&weight_);
    if (has_bias_) out.push_back(&bias_);
  }

 private:
  int in_, out_;
  bool has_bias_;
  Param weight_, bias_;
};

class Activation final : public Module {
 public:
  explicit Activation(LayerKind kind) : kind_(activation_of(kind)) {}
  void forward(const Tensor& x, Tensor& y, const Pass&) override {
    y.resize(x.batch, out_shape);
    backend->activation_forward(kind_, x.ptr(), y.ptr(), x.size());
  }
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const Pass&) override {
    if (!dx) return;
    dx->resize(x.batch, x.sample);
    backend->activation_backward(kind_, x.ptr(), y.ptr(), dy.ptr(), dx->ptr(), x.size());
  }

 private:
  kernels::Activation kind_;
};

// Flatten only reinterprets the shape; the copy keeps every module's output its own buffer.
class Flatten final : public Module {
 public:
  void forward(const Tensor& x, Tensor& y, const Pass&) override {
    y.resize(x.batch, out_shape);
    backend->copy(y.ptr(), x.ptr(), x.size() * std::int64_t(sizeof(float)));
  }
  void backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const Pass&) override {
    if (!dx) return;
    dx->resize(x.batch, x.sample);
    backend->copy(dx->ptr(), dy.ptr(), x.size() * std::int64_t(sizeof(float)));
  }
};

class Dropout final : public Module {
 public:
  Dropout(double p, LayerId id) : p_(p), layer_salt_(std::uint64_t(id.value) * 0xD1B54A32D192ED03ULL) {}
  void forward(const Tensor& x, Tensor& y, const Pass& pass) override {
    y.resize(x.batch, out_shape);
    Tensor& mask = slot_tensor(masks_, pass.slot, *backend);
    mask.resize(x.batch, out_shape);
    if (!pass.training || p_ == 0.0) {
      mask.data.fill(1.0f);
      backend->copy(y.ptr(), x.ptr(), x.size() * std::int64_t(sizeof(float)));
      return;
    }
    // Keyed by the global sample index, so a sample gets the same mask whichever rank
    // or micro-batch processes it.
    const auto per_sample = std::uint64_t(x.sample_size());
    if (pass.device_first_sample) {
      backend->dropout_forward_keyed(x.ptr(), y.ptr(), mask.ptr(), x.size(), p_, pass.seed ^ layer_salt_,
                                     pass.device_first_sample, per_sample);
      return;
    }
    backend->dropout_forward(x.ptr(), y.ptr(), mask.ptr(), x.size(), p_, pass.seed ^ layer_salt_,
                             std::uint64_t(pass.first_sample) * per_sample);
  }
  void backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const Pass& pass) override {
    if (!dx) return;
    dx->resize(x.batch, x.sample);
    backend->dropout_backward(slot_tensor(masks_, pass.slot, *backend).ptr(), dy.ptr(), dx->ptr(), x.size());
  }

 private:
  double p_;
  std::uint64_t layer_salt_;
  std::vector<Tensor> masks_;  // per slot
};

class Conv2d final : public Module {
 public:
  Conv2d(kernels::Backend& be, const LayerInfo& info, const LayerSpec& spec, std::uint64_t seed)
      : has_bias_(spec.bias), workspace_(be) {
    geometry_.C = as_int(info.input[0]);
    geometry_.H = as_int(info.input[1]);
    geometry_.W = as_int(info.input[2]);
    geometry_.K = as_int(spec.out_channels);
    geometry_.R = as_int(spec.kernel);
    geometry_.stride = as_int(spec.stride > 0 ? spec.stride : 1);
    geometry_.pad = as_int(spec.padding);
    const std::int64_t fan_in = std::int64_t(geometry_.C) * geometry_.R * geometry_.R;
    const float bound = 1.0f / std::sqrt(float(fan_in));
    weight_ = make_param(be, info.name + ".weight", info.id, fan_in * geometry_.K, bound, param_seed(seed, info.id, 0));
    if (has_bias_)
      bias_ = make_param(be, info.name + ".bias", info.id, geometry_.K, bound, param_seed(seed, info.id, 1));
  }
  void forward(const Tensor& x, Tensor& y, const Pass&) override {
    y.resize(x.batch, out_shape);
    set_batch(x.batch);
    backend->conv2d_forward(x.ptr(), weight_.value.data(), has_bias_ ? bias_.value.data() : nullptr, y.ptr(),
                            geometry_, workspace_.data());
  }
  void backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const Pass&) override {
    if (dx) dx->resize(x.batch, x.sample);
    set_batch(x.batch);
    backend->conv2d_backward(x.ptr(), weight_.value.data(), dy.ptr(), dx ? dx->ptr() : nullptr, weight_.grad.data(),
                             has_bias_ ? bias_.grad.data() : nullptr, geometry_, workspace_.data());
  }
  void collect_params(std::vector<Param*>& out) override {
    out.push_back(&weight_);
    if (has_bias_) out.push_back(&bias_);
  }
  std::int64_t workspace_bytes() const override { return workspace_.capacity_bytes(); }

 private:
  // The kernels' workspace holds a block of samples, so its size depends on the batch;
  // it only grows, so a smaller last batch reuses it.
  void set_batch(std::int64_t batch) {
    geometry_.N = as_int(batch);
    workspace_.resize(backend->conv2d_workspace(geometry_));  // keeps the larger allocation
  }

  kernels::ConvDims geometry_;
  bool has_bias_;
  Param weight_, bias_;
  Buffer<float> workspace_;
};

class MaxPool2d final : public Module {
 public:
  MaxPool2d(const LayerInfo& info, const LayerSpec& spec) {
    geometry_.C = as_int(info.input[0]);
    geometry_.H = as_int(info.input[1]);
    geometry_.W = as_int(info.input[2]);
    geometry_.kernel = as_int(spec.kernel);
    geometry_.stride = as_int(spec.stride > 0 ? spec.stride : spec.kernel);
  }
  void forward(const Tensor& x, Tensor& y, const Pass& pass) override {
    y.resize(x.batch, out_shape);
    geometry_.N = as_int(x.batch);
    auto& argmax = slot_state(argmax_, pass.slot);
    argmax.bind(*backend);
    argmax.resize(y.size());
    backend->maxpool2d_forward(x.ptr(), y.ptr(), argmax.data(), geometry_);
  }
  void backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const Pass& pass) override {
    if (!dx) return;
    dx->resize(x.batch, x.sample);
    geometry_.N = as_int(x.batch);
    backend->maxpool2d_backward(slot_state(argmax_, pass.slot).data(), dy.ptr(), dx->ptr(), geometry_);
  }

 private:
  kernels::PoolDims geometry_;
  std::vector<Buffer<std::int32_t>> argmax_;  // per slot
};

// Branches see the same input; their outputs are concatenated per sample (along channels
// for images, features for vectors: the same operation on flattened samples).
class Parallel final : public Module {
 public:
  void add_branch(std::unique_ptr<Sequential> branch) { branches_.push_back(std::move(branch)); }
  void forward(const Tensor& x, Tensor& y, const Pass& pass) override {
    auto& outputs = slot_outputs(pass.slot);
    for (std::size_t b = 0; b < branches_.size(); ++b) branches_[b]->forward(x, outputs[b], pass);
    y.resize(x.batch, out_shape);
    std::vector<const float*> parts(branches_.size());
    for (std::size_t b = 0; b < branches_.size(); ++b) parts[b] = outputs[b].ptr();
    backend->concat_forward(parts.data(), widths_.data(), int(parts.size()), y.ptr(), as_int(x.batch));
  }
  void backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const Pass& pass) override {
    auto& outputs = slot_outputs(pass.slot);
    std::vector<float*> dparts(branches_.size());
    for (std::size_t b = 0; b < branches_.size(); ++b) {
      doutputs_[b].resize(x.batch, outputs[b].sample);
      dparts[b] = doutputs_[b].ptr();
    }
    backend->concat_backward(dy.ptr(), widths_.data(), int(dparts.size()), dparts.data(), as_int(x.batch));
    if (dx) {
      dx->resize(x.batch, x.sample);
      dx->data.fill(0.0f);
    }
    branch_dx_.data.bind(*backend);
    for (std::size_t b = 0; b < branches_.size(); ++b) {
      branches_[b]->backward(x, outputs[b], doutputs_[b], dx ? &branch_dx_ : nullptr, pass);
      if (dx) backend->accumulate(dx->ptr(), branch_dx_.ptr(), x.size());
    }
  }
  void collect_params(std::vector<Param*>& out) override {
    for (auto& branch : branches_) branch->collect_params(out);
  }
  std::int64_t workspace_bytes() const override {
    std::int64_t bytes = 0;
    for (const auto& branch : branches_) bytes += branch->workspace_bytes();
    return bytes;
  }
  void set_widths(std::vector<std::int64_t> widths) { widths_ = std::move(widths); }

 private:
  std::vector<Tensor>& slot_outputs(int slot) {
    auto& outputs = slot_state(outputs_, slot);
    outputs.resize(branches_.size());
    doutputs_.resize(branches_.size());
    for (auto& t : outputs) t.data.bind(*backend);
    for (auto& t : doutputs_) t.data.bind(*backend);
    return outputs;
  }
  std::vector<std::unique_ptr<Sequential>> branches_;
  std::vector<std::int64_t> widths_;  // per-sample output size of each branch
  std::vector<std::vector<Tensor>> outputs_;  // [slot][branch]
  std::vector<Tensor> doutputs_;             // scratch
  Tensor branch_dx_;
};

// Walks the layer specs in the same pre-order as infer_model, pairing each spec with its
// LayerInfo.
class Builder {
 public:
  Builder(const ModelInfo& info, std::uint64_t seed, kernels::Backend& backend, std::size_t first_row = 0)
      : info_(info), seed_(seed), backend_(backend), next_(first_row) {}

  std::unique_ptr<Sequential> sequence(const std::vector<LayerSpec>& specs) {
    auto seq = std::make_unique<Sequential>();
    seq->backend = &backend_;
    for (const LayerSpec& spec : specs) seq->add(layer(spec));
    return seq;
  }
  std::unique_ptr<Sequential> sequence(const std::vector<const LayerSpec*>& specs) {
    auto seq = std::make_unique<Sequential>();
    seq->backend = &backend_;
    for (const LayerSpec* spec : specs) seq->add(layer(*spec));
    return seq;
  }

 private:
  std::unique_ptr<Module> layer(const LayerSpec& spec) {
    const LayerInfo& info = info_.layers.at(next_++);
    std::unique_ptr<Module> module = make(spec, info);
    module->id = info.id;
    module->out_shape = info.output;
    module->backend = &backend_;
    return module;
  }

  std::unique_ptr<Module> make(const LayerSpec& spec, const LayerInfo& info) {
    switch (spec.kind) {
      case LayerKind::Linear: return std::make_unique<Linear>(backend_, info, spec, seed_);
      case LayerKind::Conv2d: return std::make_unique<Conv2d>(backend_, info, spec, seed_);
      case LayerKind::MaxPool2d: return std::make_unique<MaxPool2d>(info, spec);
      case LayerKind::Flatten: return std::make_unique<Flatten>();
      case LayerKind::Dropout: return std::make_unique<Dropout>(spec.p, info.id);
      case LayerKind::Parallel: return parallel(spec);
      default: return std::make_unique<Activation>(spec.kind);
    }
  }

  std::unique_ptr<Module> parallel(const LayerSpec& spec) {
    auto block = std::make_unique<Parallel>();
    std::vector<std::int64_t> widths;
    for (const BranchSpec& branch : spec.branches) {
      auto seq = sequence(branch.layers);
      // A branch's output shape is its last layer's; the info row just emitted is it.
      widths.push_back(shape_elements(info_.layers.at(next_ - 1).output));
      block->add_branch(std::move(seq));
    }
    block->set_widths(std::move(widths));
    return block;
  }

  const ModelInfo& info_;
  std::uint64_t seed_;
  kernels::Backend& backend_;
  std::size_t next_ = 0;
};

}  // namespace

std::unique_ptr<Sequential> build_layers(const std::vector<const LayerSpec*>& specs, const ModelInfo& info,
                                         std::size_t first_row, std::uint64_t seed, kernels::Backend& backend) {
  return Builder(info, seed, backend, first_row).sequence(specs);
}

void Sequential::add(std::unique_ptr<Module> module) {
  modules_.push_back(std::move(module));
  gradients_.resize(modules_.size());
  for (auto& t : gradients_) t.data.bind(*backend);
}

void Sequential::forward(const Tensor& x, Tensor& y, const Pass& pass) {
  auto& outputs = slot_state(outputs_, pass.slot);
  outputs.resize(modules_.size());
  for (auto& t : outputs) t.data.bind(*backend);
  const Tensor* input = &x;
  LayerSpans spans(pass.recorder, pass.device_trace);
  for (std::size_t i = 0; i < modules_.size(); ++i) {
    spans.next(EventKind::Forward, Stream::Compute, pass.step, modules_[i]->id.value, pass.microbatch);
    modules_[i]->forward(*input, outputs[i], pass);
    // A device runs the layer after its launch returns: a host-timed span must wait for
    // it to measure the layer's work, not the launch; stamped spans need no wait
    // (docs/figures.md, GPU ranks).
    if (pass.recorder && !pass.device_trace) backend->synchronize();
    input = &outputs[i];
  }
  spans.close();
  y.resize(input->batch, input->sample);
  backend->copy(y.ptr(), input->ptr(), input->size() * std::int64_t(sizeof(float)));
}

void Sequential::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const Pass& pass) {
  auto& outputs = slot_state(outputs_, pass.slot);
  const Tensor* upstream = &dy;
  LayerSpans spans(pass.recorder, pass.device_trace);
  for (std::size_t i = modules_.size(); i-- > 0;) {
    const Tensor& input = i == 0 ? x : outputs[i - 1];
    Tensor* target = i == 0 ? dx : &gradients_[i - 1];
    spans.next(EventKind::Backward, Stream::Compute, pass.step, modules_[i]->id.value, pass.microbatch);
    modules_[i]->backward(input, outputs[i], *upstream, target, pass);
    if (pass.recorder && !pass.device_trace) backend->synchronize();  // as in forward
    if (pass.observer) {
      // Outside the span: starting a bucket's all-reduce is communication, not backward.
      spans.close();
      pass.observer->layer_done(modules_[i]->id.value);
    }
    upstream = target;
  }
  spans.close();
}

std::int64_t Sequential::workspace_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& module : modules_) bytes += module->workspace_bytes();
  return bytes;
}

void Sequential::collect_params(std::vector<Param*>& out) {
  for (auto& module : modules_) module->collect_params(out);
}

Model Model::build(const Plan& plan, const ModelInfo& info, kernels::Backend& backend) {
  Model model;
  model.backend_ = &backend;
  Builder builder(info, plan.training.seed, backend);
  model.body_ = builder.sequence(plan.model.layers);
  model.body_->collect_params(model.params_);
  return model;
}

void Model::forward(const Tensor& x, Tensor& logits, const Pass& pass) { body_->forward(x, logits, pass); }

void Model::backward(const Tensor& x, const Tensor& logits, const Tensor& dlogits, const Pass& pass) {
  body_->backward(x, logits, dlogits, nullptr, pass);
}

void Model::zero_grad() {
  for (Param* p : params_) p->grad.fill(0.0f);
}

std::int64_t Model::parameter_count() const {
  std::int64_t n = 0;
  for (const Param* p : params_) n += static_cast<std::int64_t>(p->value.size());
  return n;
}

}  // namespace loom::engine
