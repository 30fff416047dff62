// Linear (through GEMM), element-wise activations, dropout and concatenation. The
// element-wise loops are kept branch-light and free of aliasing surprises so the compiler
// vectorises them; only GELU calls into libm per element (erf/exp).
#include "loom/kernels/cpu.h"

#include <cmath>
#include <cstring>

namespace loom::cpu {

// ---- Linear -------------------------------------------------------------------------
template <class T>
void linear_forward(const T* x, const T* W, const T* b, T* y, int N, int in, int out) {
  // Seed y with the bias rows, then let the GEMM accumulate onto it (beta = 1): one pass.
  T beta = T(0);
  if (b) {
    for (int n = 0; n < N; ++n) std::memcpy(y + std::int64_t(n) * out, b, sizeof(T) * std::size_t(out));
    beta = T(1);
  }
  gemm<T>(false, true, N, out, in, T(1), x, W, beta, y);  // y = x W^T (+ b)
}

template <class T>
void linear_backward(const T* x, const T* W, const T* dy, T* dx, T* dW, T* db, int N, int in, int out) {
  if (dx) gemm<T>(false, false, N, in, out, T(1), dy, W, T(0), dx);  // dx = dy W
  if (dW) gemm<T>(true, false, out, in, N, T(1), dy, x, T(1), dW);   // dW += dy^T x
  if (db) {
    // Row-by-row column sum keeps the inner loop contiguous (vectorisable).
    for (int n = 0; n < N; ++n) {
      const T* row = dy + std::int64_t(n) * out;
      for (int o = 0; o < out; ++o) db[o] += row[o];
    }
  }
}

// ---- Activations ----------------------------------------------------------------------
template <class T>
void relu_forward(const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
}

template <class T>
void relu_backward(const T* x, const T* dy, T* dx, std::int64_t n) {
  // dy is loaded unconditionally so GCC turns the select into a vector blend; reading it
  // only when x > 0 compiles to a branch that mispredicts on every sign change.
  for (std::int64_t i = 0; i < n; ++i) {
    const T d = dy[i];
    dx[i] = x[i] > T(0) ? d : T(0);
  }
}

template <class T>
void tanh_forward(const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

template <class T>
void tanh_backward(const T* y, const T* dy, T* dx, std::int64_t n) {
  // Expressed through the output so the forward activation can be reused.
  for (std::int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (T(1) - y[i] * y[i]);
}

template <class T>
void gelu_forward(const T* x, T* y, std::int64_t n) {
  const T inv_sqrt2 = T(0.70710678118654752440);
  for (std::int64_t i = 0; i < n; ++i) y[i] = T(0.5) * x[i] * (T(1) + std::erf(x[i] * inv_sqrt2));
}

template <class T>
void gelu_backward(const T* x, const T* dy, T* dx, std::int64_t n) {
  // d/dx [x Phi(x)] = Phi(x) + x phi(x), phi the standard normal density.
  const T inv_sqrt2 = T(0.70710678118654752440);
  const T inv_sqrt_2pi = T(0.39894228040143267794);
  for (std::int64_t i = 0; i < n; ++i) {
    const T cdf = T(0.5) * (T(1) + std::erf(x[i] * inv_sqrt2));
    const T pdf = inv_sqrt_2pi * std::exp(T(-0.5) * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

// ---- Dropout --------------------------------------------------------------------------
template <class T>
void dropout_forward(const T* x, T* y, T* mask, std::int64_t n, double p, std::uint64_t seed,
                     std::uint64_t offset) {
  if (p <= 0.0) {
    // No draws at all: p == 0 must be an exact identity.
    for (std::int64_t i = 0; i < n; ++i) { mask[i] = T(1); y[i] = x[i]; }
    return;
  }
  // p >= 1 drops everything; guarding it avoids 1/(1-p) = inf and 0 * inf = NaN.
  const T keep_scale = p >= 1.0 ? T(0) : T(1.0 / (1.0 - p));
  for (std::int64_t i = 0; i < n; ++i) {
    const bool keep = counter_uniform(seed, offset + std::uint64_t(i)) >= p;
    mask[i] = keep ? keep_scale : T(0);
    y[i] = x[i] * mask[i];
  }
}

template <class T>
void dropout_backward(const T* mask, const T* dy, T* dx, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dx[i] = dy[i] * mask[i];
}

// ---- Concatenation --------------------------------------------------------------------
template <class T>
void concat_forward(const T* const* parts, const std::int64_t* widths, int num_parts, T* out, int N) {
  std::int64_t total = 0;
  for (int p = 0; p < num_parts; ++p) total += widths[p];
  for (int n = 0; n < N; ++n) {
    T* dst = out + n * total;
    for (int p = 0; p < num_parts; ++p) {
      std::memcpy(dst, parts[p] + n * widths[p], sizeof(T) * std::size_t(widths[p]));
      dst += widths[p];
    }
  }
}

template <class T>
void concat_backward(const T* dout, const std::int64_t* widths, int num_parts, T* const* dparts, int N) {
  std::int64_t total = 0;
  for (int p = 0; p < num_parts; ++p) total += widths[p];
  for (int n = 0; n < N; ++n) {
    const T* src = dout + n * total;
    for (int p = 0; p < num_parts; ++p) {
      // A null part is a branch that needs no input gradient (it starts at the model input).
      if (dparts[p]) std::memcpy(dparts[p] + n * widths[p], src, sizeof(T) * std::size_t(widths[p]));
      src += widths[p];
    }
  }
}

#define LOOM_INSTANTIATE_LAYERS(T)                                                                        \
  template void linear_forward<T>(const T*, const T*, const T*, T*, int, int, int);                       \
  template void linear_backward<T>(const T*, const T*, const T*, T*, T*, T*, int, int, int);              \
  template void relu_forward<T>(const T*, T*, std::int64_t);                                              \
  template void relu_backward<T>(const T*, const T*, T*, std::int64_t);                                   \
  template void tanh_forward<T>(const T*, T*, std::int64_t);                                              \
  template void tanh_backward<T>(const T*, const T*, T*, std::int64_t);                                   \
  template void gelu_forward<T>(const T*, T*, std::int64_t);                                              \
  template void gelu_backward<T>(const T*, const T*, T*, std::int64_t);                                   \
  template void dropout_forward<T>(const T*, T*, T*, std::int64_t, double, std::uint64_t, std::uint64_t); \
  template void dropout_backward<T>(const T*, const T*, T*, std::int64_t);                                \
  template void concat_forward<T>(const T* const*, const std::int64_t*, int, T*, int);                   \
  template void concat_backward<T>(const T*, const std::int64_t*, int, T* const*, int);

LOOM_INSTANTIATE_LAYERS(float)
LOOM_INSTANTIATE_LAYERS(double)

}  // namespace loom::cpu
