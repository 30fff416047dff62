// CPU kernels: forward and backward for every layer kind, the loss and the optimizers.
// Plain functions over raw row-major arrays, templated on the scalar type so that the
// same code runs in float (training) and double (finite-difference gradient checks).
// Conventions:
//  - batch-first, NCHW for images; linear weights are [out, in] (PyTorch layout);
//    conv weights are [K, C, R, R].
//  - Backward functions ACCUMULATE parameter gradients (dW += ..., db += ...) so that
//    micro-batches and accumulation steps add up; input gradients dx are OVERWRITTEN.
//    Passing dx == nullptr skips the input gradient (first layer).
//  - Gradients are named d<x>.
// The GEMM-based paths (linear, conv2d) go through CBLAS; the readable reference versions
// of the same operations live in namespace ref and the tests check one against the other.
#pragma once

#include <cstdint>

#include "loom/core/memory_layout.h"

namespace loom::cpu {

// ---- GEMM ---------------------------------------------------------------------------
// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major, through CBLAS.
template <class T>
void gemm(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, const T* B, T beta, T* C);

// Flushes subnormal floats to zero on the calling thread (FTZ/DAZ). Adam's second moment
// decays into the subnormal range, where every operation costs ~100 cycles; training
// threads call this once. Returns false where the CPU has no such mode.
bool flush_denormals_on_this_thread();

// BLAS threads for this process (0 = leave OpenBLAS's default).
void set_blas_threads(int threads);
int blas_threads();

// ---- Linear: y[N,out] = x[N,in] W[out,in]^T + b[out] --------------------------------
template <class T>
void linear_forward(const T* x, const T* W, const T* b, T* y, int N, int in, int out);
template <class T>
void linear_backward(const T* x, const T* W, const T* dy, T* dx, T* dW, T* db, int N, int in, int out);

// ---- Element-wise activations (n = total elements) ------------------------------------
template <class T> void relu_forward(const T* x, T* y, std::int64_t n);
template <class T> void relu_backward(const T* x, const T* dy, T* dx, std::int64_t n);
template <class T> void tanh_forward(const T* x, T* y, std::int64_t n);
template <class T> void tanh_backward(const T* y, const T* dy, T* dx, std::int64_t n);
// Exact GELU, x * Phi(x) with erf, as PyTorch's default.
template <class T> void gelu_forward(const T* x, T* y, std::int64_t n);
template <class T> void gelu_backward(const T* x, const T* dy, T* dx, std::int64_t n);

// ---- Dropout (inverted: kept values are scaled by 1/(1-p)) ----------------------------
// mask receives 0 or 1/(1-p) per element, drawn from a counter-based generator keyed by
// (seed, offset + i) so results do not depend on threads or call order.
template <class T>
void dropout_forward(const T* x, T* y, T* mask, std::int64_t n, double p, std::uint64_t seed, std::uint64_t offset);
template <class T>
void dropout_backward(const T* mask, const T* dy, T* dx, std::int64_t n);

// ---- Conv2d ---------------------------------------------------------------------------
struct ConvGeometry {
  int N = 0, C = 0, H = 0, W = 0;  // input
  int K = 0;                        // output channels
  int R = 0;                        // square kernel size
  int stride = 1, pad = 0;
  int out_h() const { return (H + 2 * pad - R) / stride + 1; }
  int out_w() const { return (W + 2 * pad - R) / stride + 1; }
  // Samples im2col'd together so that one GEMM covers the block: per-sample GEMMs are too
  // small for a second BLAS thread. Bounded by the block budget (core/memory_layout.h).
  std::int64_t per_sample_workspace() const {
    return conv_workspace_per_sample(std::int64_t(C) * R * R, K, std::int64_t(out_h()) * out_w());
  }
  int block_samples() const { return int(cpu_conv_block_samples(per_sample_workspace(), N)); }
  // Scratch elements conv2d_forward/backward need: a block's column matrix [C*R*R, nb*OH*OW]
  // plus its output (or output-gradient) block [K, nb*OH*OW]. Depends on N, so size the
  // workspace after setting N (it never exceeds N samples' worth or the budget by much).
  std::int64_t workspace_elems() const { return block_samples() * per_sample_workspace(); }
};
// y[N,K,OH,OW]; b may be nullptr (no bias). workspace: workspace_elems() scalars for this g
// (including its N); results do not depend on the contents of the workspace on entry.
template <class T>
void conv2d_forward(const T* x, const T* W, const T* b, T* y, const ConvGeometry& g, T* workspace);
template <class T>
void conv2d_backward(const T* x, const T* W, const T* dy, T* dx, T* dW, T* db, const ConvGeometry& g, T* workspace);

// ---- MaxPool2d ------------------------------------------------------------------------
struct PoolGeometry {
  int N = 0, C = 0, H = 0, W = 0;
  int kernel = 2, stride = 2;
  int out_h() const { return (H - kernel) / stride + 1; }
  int out_w() const { return (W - kernel) / stride + 1; }
};
// argmax receives, per output element, the flat input index (within its N,C plane) of the max.
template <class T>
void maxpool2d_forward(const T* x, T* y, std::int32_t* argmax, const PoolGeometry& g);
template <class T>
void maxpool2d_backward(const std::int32_t* argmax, const T* dy, T* dx, const PoolGeometry& g);

// ---- Concatenation of per-sample feature vectors (parallel branches) -------------------
// Each part p is [N, width[p]] (a flattened per-sample block, so NCHW channel concat is the
// same operation); out is [N, sum(width)].
template <class T>
void concat_forward(const T* const* parts, const std::int64_t* widths, int num_parts, T* out, int N);
template <class T>
void concat_backward(const T* dout, const std::int64_t* widths, int num_parts, T* const* dparts, int N);

// ---- Softmax cross-entropy (mean over the batch) --------------------------------------
// Returns the mean loss; probs[N,C] receives the softmax. `correct` (may be nullptr)
// receives the number of rows whose argmax equals the label.
template <class T>
T softmax_xent_forward(const T* logits, const std::int32_t* labels, T* probs, int N, int C, int* correct);
// dlogits = (probs - onehot) * scale; scale is 1/N for a plain mean. Micro-batches of a
// larger batch pass 1/global_batch so their gradients add up to the full batch's.
template <class T>
void softmax_xent_backward(const T* probs, const std::int32_t* labels, T* dlogits, int N, int C, T scale);

// ---- Optimizers (n = elements; state arrays zero-initialised by the caller) -----------
template <class T>
void sgd_step(T* w, const T* dw, std::int64_t n, T lr, T weight_decay);
// PyTorch's form: v = mu * v + g; w -= lr * v.
template <class T>
void momentum_step(T* w, const T* dw, T* v, std::int64_t n, T lr, T mu, T weight_decay);
// t is the 1-based step count used for bias correction.
template <class T>
void adam_step(T* w, const T* dw, T* m, T* v, std::int64_t n, T lr, T beta1, T beta2, T eps, T weight_decay, std::int64_t t);

// ---- Initialisation -------------------------------------------------------------------
// Kaiming-uniform like PyTorch's default for linear/conv: U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
// from a seeded generator so every rank builds identical weights.
template <class T>
void uniform_init(T* w, std::int64_t n, T bound, std::uint64_t seed);

// ---- Counter-based random numbers (shared by dropout and init; a GPU backend can match) --
// Bijective 64-bit finaliser of splitmix64.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
// The counter-th output of a splitmix64 stream whose state starts at mix64(seed); hashing the
// seed first keeps (seed, counter) and (seed + 1, counter - 1) unrelated.
constexpr std::uint64_t counter_random(std::uint64_t seed, std::uint64_t counter) {
  return mix64(mix64(seed) + (counter + 1) * 0x9e3779b97f4a7c15ULL);
}
// Uniform double in [0, 1) from the top 53 bits.
constexpr double counter_uniform(std::uint64_t seed, std::uint64_t counter) {
  return double(counter_random(seed, counter) >> 11) * 0x1.0p-53;
}

namespace ref {
// Readable, loop-only versions of the GEMM-based kernels: the specification the fast
// paths are tested against.
template <class T>
void linear_forward(const T* x, const T* W, const T* b, T* y, int N, int in, int out);
template <class T>
void linear_backward(const T* x, const T* W, const T* dy, T* dx, T* dW, T* db, int N, int in, int out);
template <class T>
void conv2d_forward(const T* x, const T* W, const T* b, T* y, const ConvGeometry& g);
template <class T>
void conv2d_backward(const T* x, const T* W, const T* dy, T* dx, T* dW, T* db, const ConvGeometry& g);
}  // namespace ref

}  // namespace loom::cpu
