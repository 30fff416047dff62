// kernels::Backend in double precision: the float64 reference the training-equivalence
// tests judge every float32 run against (docs/tests.md, "float64 reference").
//
// The engine hands a backend float pointers and does float arithmetic on them (offsets
// into tensors, micro-batch slices), so each allocation is a real block of the requested
// bytes (the address the engine sees, which also keeps raw bytes for int32 data: labels
// and max-pool argmax) plus a shadow of bytes/4 doubles. A float pointer maps to the
// shadow element (ptr - base) / 4 of the block holding it (a sorted map of blocks, as the
// host executor's arena check does). upload writes the raw bytes and widens every float
// into the shadow; download narrows the shadow (raw bytes for a block used as int32);
// every operation runs kernels/cpu's templates with T = double on the shadows. So a run
// starts from the engine's float parameters and batches and then computes in double; only
// what crosses the interface is float (hyper-parameters, the reported loss, downloads).
//
// host_memory() is false, so the engine goes through upload/download as for a GPU. Not
// for communicators that take device memory (they would read the raw float bytes, which
// float operations leave stale): host-staged traffic only. One thread per backend.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "loom/kernels/cpu.h"
#include "loom/kernels/cpu_backend.h"

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

struct Block {
  std::int64_t bytes = 0;
  std::vector<double> shadow;  // bytes / 4 elements: the block's float data in double
  bool int32 = false;          // seen as an int32 operand: its raw bytes are the data
};

// The memory: raw blocks by base address, each with its shadow.
class Arena {
 public:
  ~Arena() {
    for (auto& [base, block] : blocks_) std::free(const_cast<char*>(base));
  }
  void* allocate(std::int64_t bytes) {
    const std::size_t rounded = (std::size_t(bytes > 0 ? bytes : 1) + 63) / 64 * 64;
    auto* base = static_cast<char*>(std::aligned_alloc(64, rounded));
    if (!base) return nullptr;
    std::memset(base, 0, rounded);
    Block& b = blocks_[base];
    b.bytes = bytes;
    b.shadow.assign(std::size_t((bytes + 3) / 4), 0.0);
    in_use_ += bytes;
    return base;
  }
  bool release(void* ptr) {
    const auto found = blocks_.find(static_cast<const char*>(ptr));
    if (found == blocks_.end()) return false;
    in_use_ -= found->second.bytes;
    blocks_.erase(found);
    std::free(ptr);
    return true;
  }
  // The block holding [p, p + bytes) and p's byte offset in it; nullptr when none does.
  std::pair<Block*, std::int64_t> find(const void* p, std::int64_t bytes) {
    const auto* at = static_cast<const char*>(p);
    auto after = blocks_.upper_bound(at);
    if (p == nullptr || after == blocks_.begin()) return {nullptr, 0};
    auto& [base, block] = *std::prev(after);
    const std::int64_t offset = at - base;
    if (offset + bytes > block.bytes || offset % 4 != 0) return {nullptr, 0};
    return {&block, offset};
  }
  std::int64_t in_use() const { return in_use_; }

 private:
  std::map<const char*, Block> blocks_;
  std::int64_t in_use_ = 0;
};

class CpuF64Backend final : public kernels::Backend {
 public:
  const char* name() const override { return "cpu-f64"; }
  bool host_memory() const override { return false; }
  Status status() const override { return status_; }

  void* allocate(std::int64_t bytes) override {
    void* p = arena_.allocate(bytes);
    if (!p) fail("allocate " + std::to_string(bytes) + " bytes: out of host memory");
    return p;
  }
  void release(void* ptr) override {
    if (ptr && !arena_.release(ptr)) fail("release of a pointer this backend did not allocate");
  }
  void* allocate_host(std::int64_t bytes) override {
    return std::aligned_alloc(64, (std::size_t(bytes > 0 ? bytes : 1) + 63) / 64 * 64);
  }
  void release_host(void* ptr) override { std::free(ptr); }
  void upload(void* dst, const void* host, std::int64_t bytes) override;
  void download(void* host, const void* src, std::int64_t bytes) override;
  void copy(void* dst, const void* src, std::int64_t bytes) override;
  void fill(float* x, float value, std::int64_t n) override {
    double* d = f64(x, n, "fill");
    if (ok()) std::fill_n(d, n, double(value));
  }
  void accumulate(float* y, const float* x, std::int64_t n) override {
    double* dy = f64(y, n, "accumulate");
    const double* dx = f64(x, n, "accumulate");
    if (ok())
      for (std::int64_t i = 0; i < n; ++i) dy[i] += dx[i];
  }
  void synchronize() override {}
  std::int64_t bytes_in_use() const override { return arena_.in_use(); }
  std::int32_t stamp() override {
    stamps_.push_back(kernels::host_now_ns());
    return std::int32_t(stamps_.size() - 1);
  }
  std::vector<std::int64_t> resolve_stamps() override { return std::exchange(stamps_, {}); }

  void linear_forward(const float* x, const float* W, const float* b, float* y, int N, int in, int out) override {
    const double *dx = f64(x, std::int64_t(N) * in), *dW = f64(W, std::int64_t(out) * in), *db = f64(b, out);
    double* dy = f64(y, std::int64_t(N) * out);
    if (ok()) cpu::linear_forward(dx, dW, db, dy, N, in, out);
  }
  void linear_backward(const float* x, const float* W, const float* dy, float* dx, float* dW, float* db, int N,
                       int in, int out) override {
    const std::int64_t xs = std::int64_t(N) * in, ws = std::int64_t(out) * in, ys = std::int64_t(N) * out;
    const double *x64 = f64(x, xs), *W64 = f64(W, ws), *dy64 = f64(dy, ys);
    double *dx64 = f64(dx, xs), *dW64 = f64(dW, ws), *db64 = f64(db, out);
    if (ok()) cpu::linear_backward(x64, W64, dy64, dx64, dW64, db64, N, in, out);
  }
  void activation_forward(Activation a, const float* x, float* y, std::int64_t n) override;
  void activation_backward(Activation a, const float* x, const float* y, const float* dy, float* dx,
                           std::int64_t n) override;
  void dropout_forward(const float* x, float* y, float* mask, std::int64_t n, double p, std::uint64_t seed,
                       std::uint64_t offset) override {
    const double* x64 = f64(x, n);
    double *y64 = f64(y, n), *mask64 = f64(mask, n);
    if (ok()) cpu::dropout_forward(x64, y64, mask64, n, p, seed, offset);
  }
  void dropout_forward_keyed(const float* x, float* y, float* mask, std::int64_t n, double p, std::uint64_t seed,
                             const std::uint64_t* first_sample, std::uint64_t sample_size) override {
    dropout_forward(x, y, mask, n, p, seed, *first_sample * sample_size);
  }
  void dropout_backward(const float* mask, const float* dy, float* dx, std::int64_t n) override {
    const double *mask64 = f64(mask, n), *dy64 = f64(dy, n);
    double* dx64 = f64(dx, n);
    if (ok()) cpu::dropout_backward(mask64, dy64, dx64, n);
  }
  std::int64_t conv2d_workspace(const ConvDims& d) const override { return geometry(d).workspace_elems(); }
  void conv2d_forward(const float* x, const float* W, const float* b, float* y, const ConvDims& d,
                      float* workspace) override {
    const ConvGeometry g = geometry(d);
    const double *x64 = f64(x, in_elems(g)), *W64 = f64(W, w_elems(g)), *b64 = f64(b, g.K);
    double *y64 = f64(y, out_elems(g)), *work = f64(workspace, g.workspace_elems());
    if (ok()) cpu::conv2d_forward(x64, W64, b64, y64, g, work);
  }
  void conv2d_backward(const float* x, const float* W, const float* dy, float* dx, float* dW, float* db,
                       const ConvDims& d, float* workspace) override {
    const ConvGeometry g = geometry(d);
    const double *x64 = f64(x, in_elems(g)), *W64 = f64(W, w_elems(g)), *dy64 = f64(dy, out_elems(g));
    double *dx64 = f64(dx, in_elems(g)), *dW64 = f64(dW, w_elems(g)), *db64 = f64(db, g.K);
    double* work = f64(workspace, g.workspace_elems());
    if (ok()) cpu::conv2d_backward(x64, W64, dy64, dx64, dW64, db64, g, work);
  }
  void maxpool2d_forward(const float* x, float* y, std::int32_t* argmax, const PoolDims& d) override {
    const PoolGeometry g = geometry(d);
    const std::int64_t planes = std::int64_t(g.N) * g.C, outs = planes * g.out_h() * g.out_w();
    const double* x64 = f64(x, planes * g.H * g.W);
    double* y64 = f64(y, outs);
    std::int32_t* at = i32(argmax, outs);
    if (ok()) cpu::maxpool2d_forward(x64, y64, at, g);
  }
  void maxpool2d_backward(const std::int32_t* argmax, const float* dy, float* dx, const PoolDims& d) override {
    const PoolGeometry g = geometry(d);
    const std::int64_t planes = std::int64_t(g.N) * g.C, outs = planes * g.out_h() * g.out_w();
    const std::int32_t* at = i32(argmax, outs);
    const double* dy64 = f64(dy, outs);
    double* dx64 = f64(dx, planes * g.H * g.W);
    if (ok()) cpu::maxpool2d_backward(at, dy64, dx64, g);
  }
  void concat_forward(const float* const* parts, const std::int64_t* widths, int num_parts, float* out,
                      int N) override;
  void concat_backward(const float* dout, const std::int64_t* widths, int num_parts, float* const* dparts,
                       int N) override;

  // The mean loss in double, rounded once for the caller; the gradients stay double.
  float softmax_xent_forward(const float* logits, const std::int32_t* labels, float* probs, int N, int C,
                             int* correct) override {
    const std::int64_t n = std::int64_t(N) * C;
    const double* z = f64(logits, n);
    const std::int32_t* l = i32(labels, N);
    double* p = f64(probs, n);
    if (!ok()) return 0.0f;
    return float(cpu::softmax_xent_forward(z, l, p, N, C, correct));
  }
  void softmax_xent_backward(const float* probs, const std::int32_t* labels, float* dlogits, int N, int C,
                             float scale) override {
    const std::int64_t n = std::int64_t(N) * C;
    const double* p64 = f64(probs, n);
    const std::int32_t* l = i32(labels, N);
    double* d64 = f64(dlogits, n);
    if (ok()) cpu::softmax_xent_backward(p64, l, d64, N, C, double(scale));
  }
  void sgd_step(float* w, const float* dw, std::int64_t n, float lr, float weight_decay) override {
    double* w64 = f64(w, n);
    const double* g64 = f64(dw, n);
    if (ok()) cpu::sgd_step(w64, g64, n, double(lr), double(weight_decay));
  }
  void momentum_step(float* w, const float* dw, float* v, std::int64_t n, float lr, float mu,
                     float weight_decay) override {
    double *w64 = f64(w, n), *v64 = f64(v, n);
    const double* g64 = f64(dw, n);
    if (ok()) cpu::momentum_step(w64, g64, v64, n, double(lr), double(mu), double(weight_decay));
  }
  void adam_step(float* w, const float* dw, float* m, float* v, std::int64_t n, const kernels::AdamParams& a) override {
    double *w64 = f64(w, n), *m64 = f64(m, n), *v64 = f64(v, n);
    const double* g64 = f64(dw, n);
    if (ok())
      cpu::adam_step(w64, g64, m64, v64, n, double(a.lr), double(a.beta1), double(a.beta2), double(a.eps),
                     double(a.weight_decay), a.t);
  }

 private:
  static std::int64_t in_elems(const ConvGeometry& g) { return std::int64_t(g.N) * g.C * g.H * g.W; }
  static std::int64_t w_elems(const ConvGeometry& g) { return std::int64_t(g.K) * g.C * g.R * g.R; }
  static std::int64_t out_elems(const ConvGeometry& g) { return std::int64_t(g.N) * g.K * g.out_h() * g.out_w(); }

  bool ok() const { return status_.ok(); }
  void fail(std::string message) {
    if (status_.ok()) status_ = make_error(ErrorCode::Internal, "cpu-f64: " + std::move(message));
  }
  // The shadow of n floats at p (null stays null); a pointer outside this backend's memory
  // fails the backend, as an illegal address would on a GPU.
  double* f64(const float* p, std::int64_t n, const char* what = "kernel operand") {
    if (!p) return nullptr;
    auto [block, offset] = arena_.find(p, n * 4);
    if (!block) {
      fail(std::string(what) + ": a float pointer outside this backend's memory");
      return nullptr;
    }
    return block->shadow.data() + offset / 4;
  }
  // int32 operands are read and written in place (the raw bytes); the block is marked so
  // that downloads and copies of it take the raw bytes.
  std::int32_t* i32(const std::int32_t* p, std::int64_t n) {
    auto [block, offset] = arena_.find(p, n * 4);
    if (!block) {
      fail("an int32 pointer outside this backend's memory");
      return nullptr;
    }
    block->int32 = true;
    return const_cast<std::int32_t*>(p);
  }

  Arena arena_;
  std::vector<std::int64_t> stamps_;
  Status status_;
};

void CpuF64Backend::upload(void* dst, const void* host, std::int64_t bytes) {
  auto [block, offset] = arena_.find(dst, bytes);
  if (!block) return fail("upload: a destination outside this backend's memory");
  std::memcpy(dst, host, std::size_t(bytes));
  const auto* values = static_cast<const float*>(host);
  double* shadow = block->shadow.data() + offset / 4;
  for (std::int64_t i = 0; i < bytes / 4; ++i) shadow[i] = double(values[i]);
}

void CpuF64Backend::download(void* host, const void* src, std::int64_t bytes) {
  auto [block, offset] = arena_.find(src, bytes);
  if (!block) return fail("download: a source outside this backend's memory");
  if (block->int32) {
    std::memcpy(host, src, std::size_t(bytes));
    return;
  }
  auto* values = static_cast<float*>(host);
  const double* shadow = block->shadow.data() + offset / 4;
  for (std::int64_t i = 0; i < bytes / 4; ++i) values[i] = float(shadow[i]);
}

void CpuF64Backend::copy(void* dst, const void* src, std::int64_t bytes) {
  auto [to, to_offset] = arena_.find(dst, bytes);
  auto [from, from_offset] = arena_.find(src, bytes);
  if (!to || !from) return fail("copy: a pointer outside this backend's memory");
  std::memmove(dst, src, std::size_t(bytes));
  std::copy_n(from->shadow.data() + from_offset / 4, bytes / 4, to->shadow.data() + to_offset / 4);
  to->int32 = to->int32 || from->int32;
}

void CpuF64Backend::activation_forward(Activation a, const float* x, float* y, std::int64_t n) {
  const double* dx = f64(x, n);
  double* dy = f64(y, n);
  if (!ok()) return;
  switch (a) {
    case Activation::Relu: relu_forward(dx, dy, n); break;
    case Activation::Tanh: tanh_forward(dx, dy, n); break;
    case Activation::Gelu: gelu_forward(dx, dy, n); break;
  }
}

void CpuF64Backend::activation_backward(Activation a, const float* x, const float* y, const float* dy, float* dx,
                                        std::int64_t n) {
  const double* dx64 = nullptr;
  double* out = f64(dx, n);
  const double* g = f64(dy, n);
  if (a == Activation::Tanh) dx64 = f64(y, n);
  else dx64 = f64(x, n);
  if (!ok()) return;
  switch (a) {
    case Activation::Relu: relu_backward(dx64, g, out, n); break;
    case Activation::Tanh: tanh_backward(dx64, g, out, n); break;
    case Activation::Gelu: gelu_backward(dx64, g, out, n); break;
  }
}

void CpuF64Backend::concat_forward(const float* const* parts, const std::int64_t* widths, int num_parts, float* out,
                                   int N) {
  std::vector<const double*> shadows(std::size_t(num_parts > 0 ? num_parts : 0));
  std::int64_t total = 0;
  for (int p = 0; p < num_parts; ++p) {
    shadows[std::size_t(p)] = f64(parts[p], std::int64_t(N) * widths[p]);
    total += widths[p];
  }
  double* o = f64(out, std::int64_t(N) * total);
  if (ok()) cpu::concat_forward(shadows.data(), widths, num_parts, o, N);
}

void CpuF64Backend::concat_backward(const float* dout, const std::int64_t* widths, int num_parts, float* const* dparts,
                                    int N) {
  std::vector<double*> shadows(std::size_t(num_parts > 0 ? num_parts : 0));
  std::int64_t total = 0;
  for (int p = 0; p < num_parts; ++p) {
    shadows[std::size_t(p)] = f64(dparts[p], std::int64_t(N) * widths[p]);  // null stays null: skipped
    total += widths[p];
  }
  const double* d = f64(dout, std::int64_t(N) * total);
  if (ok()) cpu::concat_backward(d, widths, num_parts, shadows.data(), N);
}

}  // namespace

std::unique_ptr<kernels::Backend> make_cpu_f64_backend() { return std::make_unique<CpuF64Backend>(); }

}  // namespace loom::cpu
