// Softmax cross-entropy, the optimizers (PyTorch semantics so runs compare with PyTorch
// step for step) and seeded weight initialisation.
#include "loom/kernels/cpu.h"

#include <algorithm>
#include <cmath>

namespace loom::cpu {

// ---- Softmax cross-entropy ------------------------------------------------------------
template <class T>
T softmax_xent_forward(const T* logits, const std::int32_t* labels, T* probs, int N, int C, int* correct) {
  T total = T(0);
  int hits = 0;
  for (int n = 0; n < N; ++n) {
    const T* z = logits + std::int64_t(n) * C;
    T* p = probs + std::int64_t(n) * C;
    // Subtracting the row max keeps exp() from overflowing; it also locates the argmax.
    const int argmax = int(std::max_element(z, z + C) - z);
    const T zmax = z[argmax];
    T sum = T(0);
    for (int c = 0; c < C; ++c) {
      p[c] = std::exp(z[c] - zmax);
      sum += p[c];
    }
    const T inv = T(1) / sum;
    for (int c = 0; c < C; ++c) p[c] *= inv;
    // -log softmax[label] = log(sum) - (z[label] - zmax): exact even when p[label] underflows.
    total += std::log(sum) - (z[labels[n]] - zmax);
    hits += argmax == labels[n] ? 1 : 0;
  }
  if (correct) *correct = hits;
  return N > 0 ? total / T(N) : T(0);
}

template <class T>
void softmax_xent_backward(const T* probs, const std::int32_t* labels, T* dlogits, int N, int C, T scale) {
  for (int n = 0; n < N; ++n) {
    const T* p = probs + std::int64_t(n) * C;
    T* d = dlogits + std::int64_t(n) * C;
    for (int c = 0; c < C; ++c) d[c] = p[c] * scale;
    d[labels[n]] -= scale;
  }
}

// ---- Optimizers -----------------------------------------------------------------------
// weight_decay is L2 folded into the gradient (g + wd * w), as torch.optim.SGD/Adam do.
template <class T>
void sgd_step(T* w, const T* dw, std::int64_t n, T lr, T weight_decay) {
  for (std::int64_t i = 0; i < n; ++i) w[i] -= lr * (dw[i] + weight_decay * w[i]);
}

template <class T>
void momentum_step(T* w, const T* dw, T* v, std::int64_t n, T lr, T mu, T weight_decay) {
  // PyTorch seeds the buffer with g on the first step; with v zero-initialised mu*0 + g is the same.
  for (std::int64_t i = 0; i < n; ++i) {
    v[i] = mu * v[i] + (dw[i] + weight_decay * w[i]);
    w[i] -= lr * v[i];
  }
}

template <class T>
void adam_step(T* w, const T* dw, T* m, T* v, std::int64_t n, T lr, T beta1, T beta2, T eps, T weight_decay,
               std::int64_t t) {
  // Same operation order as torch.optim.Adam (non-fused): eps is added after dividing
  // sqrt(v) by sqrt(1 - beta2^t), and the first-moment correction is folded into the step.
  const T bias_correction1 = T(1) - T(std::pow(double(beta1), double(t)));
  const T bias_correction2_sqrt = T(std::sqrt(1.0 - std::pow(double(beta2), double(t))));
  const T step_size = lr / bias_correction1;
  for (std::int64_t i = 0; i < n; ++i) {
    const T g = dw[i] + weight_decay * w[i];
    m[i] = beta1 * m[i] + (T(1) - beta1) * g;
    v[i] = beta2 * v[i] + (T(1) - beta2) * g * g;
    const T denom = std::sqrt(v[i]) / bias_correction2_sqrt + eps;
    w[i] -= step_size * m[i] / denom;
  }
}

// ---- Initialisation -------------------------------------------------------------------
template <class T>
void uniform_init(T* w, std::int64_t n, T bound, std::uint64_t seed) {
  // Drawn in double and rounded once, so float and double runs start from the same values.
  const double b = double(bound);
  for (std::int64_t i = 0; i < n; ++i) w[i] = T((2.0 * counter_uniform(seed, std::uint64_t(i)) - 1.0) * b);
}

#define LOOM_INSTANTIATE_LOSS_OPTIM(T)                                                                    \
  template T softmax_xent_forward<T>(const T*, const std::int32_t*, T*, int, int, int*);                  \
  template void softmax_xent_backward<T>(const T*, const std::int32_t*, T*, int, int, T);                 \
  template void sgd_step<T>(T*, const T*, std::int64_t, T, T);                                            \
  template void momentum_step<T>(T*, const T*, T*, std::int64_t, T, T, T);                                \
  template void adam_step<T>(T*, const T*, T*, T*, std::int64_t, T, T, T, T, T, std::int64_t);            \
  template void uniform_init<T>(T*, std::int64_t, T, std::uint64_t);

LOOM_INSTANTIATE_LOSS_OPTIM(float)
LOOM_INSTANTIATE_LOSS_OPTIM(double)

}  // namespace loom::cpu
