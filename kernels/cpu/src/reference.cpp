// Loop-only reference versions of the GEMM-based kernels. They are the specification:
// written for reading, not speed, with every index spelled out, and the fast paths in
// layers.cpp / conv_pool.cpp are tested against them.
#include "loom/kernels/cpu.h"

#include <algorithm>

namespace loom::cpu::ref {

template <class T>
void linear_forward(const T* x, const T* W, const T* b, T* y, int N, int in, int out) {
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < out; ++o) {
      T s = b ? b[o] : T(0);
      for (int i = 0; i < in; ++i) s += x[n * in + i] * W[o * in + i];
      y[n * out + o] = s;
    }
}

template <class T>
void linear_backward(const T* x, const T* W, const T* dy, T* dx, T* dW, T* db, int N, int in, int out) {
  if (dx)
    for (int n = 0; n < N; ++n)
      for (int i = 0; i < in; ++i) {
        T s = T(0);
        for (int o = 0; o < out; ++o) s += dy[n * out + o] * W[o * in + i];
        dx[n * in + i] = s;  // input gradient: overwritten
      }
  for (int o = 0; o < out; ++o) {
    for (int i = 0; i < in && dW; ++i) {
      T s = T(0);
      for (int n = 0; n < N; ++n) s += dy[n * out + o] * x[n * in + i];
      dW[o * in + i] += s;  // parameter gradient: accumulated
    }
    if (db)
      for (int n = 0; n < N; ++n) db[o] += dy[n * out + o];
  }
}

// y[n,k,oh,ow] = b[k] + sum_{c,r,s} W[k,c,r,s] * x[n,c,oh*stride-pad+r, ow*stride-pad+s]
template <class T>
void conv2d_forward(const T* x, const T* W, const T* b, T* y, const ConvGeometry& g) {
  const int OH = g.out_h(), OW = g.out_w(), R = g.R;
  for (int n = 0; n < g.N; ++n)
    for (int k = 0; k < g.K; ++k)
      for (int oh = 0; oh < OH; ++oh)
        for (int ow = 0; ow < OW; ++ow) {
          T s = b ? b[k] : T(0);
          for (int c = 0; c < g.C; ++c)
            for (int r = 0; r < R; ++r)
              for (int q = 0; q < R; ++q) {
                const int ih = oh * g.stride - g.pad + r, iw = ow * g.stride - g.pad + q;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;  // zero padding
                s += W[((k * g.C + c) * R + r) * R + q] * x[((n * g.C + c) * g.H + ih) * g.W + iw];
              }
          y[((n * g.K + k) * OH + oh) * OW + ow] = s;
        }
}

// The same sum differentiated term by term: each (output, tap) pair sends dy to dW and dx.
template <class T>
void conv2d_backward(const T* x, const T* W, const T* dy, T* dx, T* dW, T* db, const ConvGeometry& g) {
  const int OH = g.out_h(), OW = g.out_w(), R = g.R;
  if (dx) std::fill(dx, dx + std::int64_t(g.N) * g.C * g.H * g.W, T(0));
  for (int n = 0; n < g.N; ++n)
    for (int k = 0; k < g.K; ++k)
      for (int oh = 0; oh < OH; ++oh)
        for (int ow = 0; ow < OW; ++ow) {
          const T d = dy[((n * g.K + k) * OH + oh) * OW + ow];
          if (db) db[k] += d;
          for (int c = 0; c < g.C; ++c)
            for (int r = 0; r < R; ++r)
              for (int q = 0; q < R; ++q) {
                const int ih = oh * g.stride - g.pad + r, iw = ow * g.stride - g.pad + q;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                const int xi = ((n * g.C + c) * g.H + ih) * g.W + iw;
                const int wi = ((k * g.C + c) * R + r) * R + q;
                if (dW) dW[wi] += d * x[xi];
                if (dx) dx[xi] += d * W[wi];
              }
        }
}

#define LOOM_INSTANTIATE_REF(T)                                                                    \
  template void linear_forward<T>(const T*, const T*, const T*, T*, int, int, int);                \
  template void linear_backward<T>(const T*, const T*, const T*, T*, T*, T*, int, int, int);       \
  template void conv2d_forward<T>(const T*, const T*, const T*, T*, const ConvGeometry&);          \
  template void conv2d_backward<T>(const T*, const T*, const T*, T*, T*, T*, const ConvGeometry&);

LOOM_INSTANTIATE_REF(float)
LOOM_INSTANTIATE_REF(double)

}  // namespace loom::cpu::ref
