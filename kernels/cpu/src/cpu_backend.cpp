// kernels::Backend over kernels/cpu: each operation forwards to the CPU kernel of the same
// name; memory is ordinary aligned host memory.
#include "loom/kernels/cpu_backend.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "loom/kernels/cpu.h"

namespace loom::cpu {
namespace {

using kernels::Activation;
using kernels::ConvDims;
using kernels::PoolDims;

ConvGeometry geometry(const ConvDims& d) {
  ConvGeometry g;
  g.N = d.N, g.C = d.C, g.H = d.H, g.W = d.W, g.K = d.K, g.R = d.R, g.stride = d.stride, g.pad = d.pad;
  return g;
}

PoolGeometry geometry(const PoolDims& d) {
  PoolGeometry g;
  g.N = d.N, g.C = d.C, g.H = d.H, g.W = d.W, g.kernel = d.kernel, g.stride = d.stride;
  return g;
}

class CpuBackend final : public kernels::Backend {
 public:
  const char* name() const override { return "cpu"; }
  bool host_memory() const override { return true; }
  Status status() const override { return {}; }

  void* allocate(std::int64_t bytes) override {
    // 64-byte alignment (whole cache lines, what vectorised loops like); the size rides in
    // a header line before the block so release can keep bytes_in_use exact without a map.
    const std::size_t rounded = (std::size_t(bytes > 0 ? bytes : 1) + kAlign - 1) / kAlign * kAlign;
    auto* block = static_cast<char*>(std::aligned_alloc(kAlign, rounded + kAlign));
    if (!block) throw std::bad_alloc();
    std::memcpy(block, &rounded, sizeof rounded);
    in_use_ += std::int64_t(rounded);
    return block + kAlign;
  }
  void release(void* ptr) override {
    if (!ptr) return;
    char* block = static_cast<char*>(ptr) - kAlign;
    std::size_t rounded = 0;
    std::memcpy(&rounded, block, sizeof rounded);
    in_use_ -= std::int64_t(rounded);
    std::free(block);
  }
  void* allocate_host(std::int64_t bytes) override { return allocate(bytes); }
  void release_host(void* ptr) override { release(ptr); }
  void upload(void* dst, const void* host, std::int64_t bytes) override { copy(dst, host, bytes); }
  void download(void* host, const void* src, std::int64_t bytes) override { copy(host, src, bytes); }
  void copy(void* dst, const void* src, std::int64_t bytes) override {
    if (bytes > 0 && dst != src) std::memmove(dst, src, std::size_t(bytes));
  }
  void fill(float* x, float value, std::int64_t n) override {
    for (std::int64_t i = 0; i < n; ++i) x[i] = value;
  }
  void accumulate(float* y, const float* x, std::int64_t n) override {
    for (std::int64_t i = 0; i < n; ++i) y[i] += x[i];
  }
  void synchronize() override {}
  std::int64_t bytes_in_use() const override { return in_use_; }
  // The work has run when its call returns: a stamp is the host clock. (Locked: the shared
  // CPU backend serves ranks that are threads.)
  std::int32_t stamp() override {
    std::lock_guard lock(stamps_mutex_);
    stamps_.push_back(kernels::host_now_ns());
    return std::int32_t(stamps_.size() - 1);
  }
  std::vector<std::int64_t> resolve_stamps() override {
    std::lock_guard lock(stamps_mutex_);
    return std::exchange(stamps_, {});
  }

  void linear_forward(const float* x, const float* W, const float* b, float* y, int N, int in, int out) override {
    cpu::linear_forward(x, W, b, y, N, in, out);
  }
  void linear_backward(const float* x, const float* W, const float* dy, float* dx, float* dW, float* db, int N,
                       int in, int out) override {
    cpu::linear_backward(x, W, dy, dx, dW, db, N, in, out);
  }
  void activation_forward(Activation a, const float* x, float* y, std::int64_t n) override {
    switch (a) {
      case Activation::Relu: relu_forward(x, y, n); break;
      case Activation::Tanh: tanh_forward(x, y, n); break;
      case Activation::Gelu: gelu_forward(x, y, n); break;
    }
  }
  void activation_backward(Activation a, const float* x, const float* y, const float* dy, float* dx,
                           std::int64_t n) override {
    switch (a) {
      case Activation::Relu: relu_backward(x, dy, dx, n); break;
      case Activation::Tanh: tanh_backward(y, dy, dx, n); break;
      case Activation::Gelu: gelu_backward(x, dy, dx, n); break;
    }
  }
  void dropout_forward(const float* x, float* y, float* mask, std::int64_t n, double p, std::uint64_t seed,
                       std::uint64_t offset) override {
    cpu::dropout_forward(x, y, mask, n, p, seed, offset);
  }
  void dropout_forward_keyed(const float* x, float* y, float* mask, std::int64_t n, double p, std::uint64_t seed,
                             const std::uint64_t* first_sample, std::uint64_t sample_size) override {
    cpu::dropout_forward(x, y, mask, n, p, seed, *first_sample * sample_size);
  }
  void dropout_backward(const float* mask, const float* dy, float* dx, std::int64_t n) override {
    cpu::dropout_backward(mask, dy, dx, n);
  }
  std::int64_t conv2d_workspace(const ConvDims& d) const override { return geometry(d).workspace_elems(); }
  void conv2d_forward(const float* x, const float* W, const float* b, float* y, const ConvDims& d,
                      float* workspace) override {
    cpu::conv2d_forward(x, W, b, y, geometry(d), workspace);
  }
  void conv2d_backward(const float* x, const float* W, const float* dy, float* dx, float* dW, float* db,
                       const ConvDims& d, float* workspace) override {
    cpu::conv2d_backward(x, W, dy, dx, dW, db, geometry(d), workspace);
  }
  void maxpool2d_forward(const float* x, float* y, std::int32_t* argmax, const PoolDims& d) override {
    cpu::maxpool2d_forward(x, y, argmax, geometry(d));
  }
  void maxpool2d_backward(const std::int32_t* argmax, const float* dy, float* dx, const PoolDims& d) override {
    cpu::maxpool2d_backward(argmax, dy, dx, geometry(d));
  }
  void concat_forward(const float* const* parts, const std::int64_t* widths, int num_parts, float* out,
                      int N) override {
    cpu::concat_forward(parts, widths, num_parts, out, N);
  }
  void concat_backward(const float* dout, const std::int64_t* widths, int num_parts, float* const* dparts,
                       int N) override {
    cpu::concat_backward(dout, widths, num_parts, dparts, N);
  }
  float softmax_xent_forward(const float* logits, const std::int32_t* labels, float* probs, int N, int C,
                             int* correct) override {
    return cpu::softmax_xent_forward(logits, labels, probs, N, C, correct);
  }
  void softmax_xent_backward(const float* probs, const std::int32_t* labels, float* dlogits, int N, int C,
                             float scale) override {
    cpu::softmax_xent_backward(probs, labels, dlogits, N, C, scale);
  }
  void sgd_step(float* w, const float* dw, std::int64_t n, float lr, float weight_decay) override {
    cpu::sgd_step(w, dw, n, lr, weight_decay);
  }
  void momentum_step(float* w, const float* dw, float* v, std::int64_t n, float lr, float mu,
                     float weight_decay) override {
    cpu::momentum_step(w, dw, v, n, lr, mu, weight_decay);
  }
  void adam_step(float* w, const float* dw, float* m, float* v, std::int64_t n, const kernels::AdamParams& a) override {
    cpu::adam_step(w, dw, m, v, n, a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, a.t);
  }

 private:
  static constexpr std::size_t kAlign = 64;
  std::atomic<std::int64_t> in_use_{0};
  std::mutex stamps_mutex_;
  std::vector<std::int64_t> stamps_;
};

}  // namespace

std::unique_ptr<kernels::Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

kernels::Backend& shared_cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace loom::cpu
