// Conv2d as im2col + GEMM (one sample at a time, so the scratch buffer stays one sample's
// column matrix) and max pooling with recorded argmax. A 1x1, stride-1, unpadded conv
// needs no im2col: the input plane already is the column matrix.
#include "loom/kernels/cpu.h"

#include <algorithm>
#include <cstring>

namespace loom::cpu {

namespace {

bool is_pointwise(const ConvGeometry& g) { return g.R == 1 && g.stride == 1 && g.pad == 0; }

// col[(c*R + kr)*R + ks, oh*OW + ow] = x[c, oh*stride - pad + kr, ow*stride - pad + ks] (0 outside).
template <class T>
void im2col(const T* x, T* col, const ConvGeometry& g) {
  const int OH = g.out_h(), OW = g.out_w();
  for (int c = 0; c < g.C; ++c) {
    const T* plane = x + std::int64_t(c) * g.H * g.W;
    for (int kr = 0; kr < g.R; ++kr) {
      for (int ks = 0; ks < g.R; ++ks) {
        T* row = col + (std::int64_t(c * g.R + kr) * g.R + ks) * OH * OW;
        // Output columns whose input column lies inside the image: [ow_lo, ow_hi).
        const int ow_lo = std::clamp((g.pad - ks + g.stride - 1) / g.stride, 0, OW);
        const int ow_hi = std::clamp((g.W + g.pad - ks + g.stride - 1) / g.stride, ow_lo, OW);
        for (int oh = 0; oh < OH; ++oh) {
          T* out = row + std::int64_t(oh) * OW;
          const int ih = oh * g.stride - g.pad + kr;
          if (ih < 0 || ih >= g.H) {
            std::fill(out, out + OW, T(0));
            continue;
          }
          const T* in = plane + std::int64_t(ih) * g.W + (ow_lo * g.stride - g.pad + ks);
          std::fill(out, out + ow_lo, T(0));
          if (g.stride == 1) {
            std::memcpy(out + ow_lo, in, sizeof(T) * std::size_t(ow_hi - ow_lo));
          } else {
            for (int j = 0; j < ow_hi - ow_lo; ++j) out[ow_lo + j] = in[j * g.stride];
          }
          std::fill(out + ow_hi, out + OW, T(0));
        }
      }
    }
  }
}

// The adjoint of im2col: dx = 0, then every column entry is added back to its input pixel.
template <class T>
void col2im(const T* col, T* dx, const ConvGeometry& g) {
  const int OH = g.out_h(), OW = g.out_w();
  std::fill(dx, dx + std::int64_t(g.C) * g.H * g.W, T(0));
  for (int c = 0; c < g.C; ++c) {
    T* plane = dx + std::int64_t(c) * g.H * g.W;
    for (int kr = 0; kr < g.R; ++kr) {
      for (int ks = 0; ks < g.R; ++ks) {
        const T* row = col + (std::int64_t(c * g.R + kr) * g.R + ks) * OH * OW;
        const int ow_lo = std::clamp((g.pad - ks + g.stride - 1) / g.stride, 0, OW);
        const int ow_hi = std::clamp((g.W + g.pad - ks + g.stride - 1) / g.stride, ow_lo, OW);
        for (int oh = 0; oh < OH; ++oh) {
          const int ih = oh * g.stride - g.pad + kr;
          if (ih < 0 || ih >= g.H) continue;
          const T* in = row + std::int64_t(oh) * OW + ow_lo;
          T* out = plane + std::int64_t(ih) * g.W + (ow_lo * g.stride - g.pad + ks);
          for (int j = 0; j < ow_hi - ow_lo; ++j) out[j * g.stride] += in[j];
        }
      }
    }
  }
}

}  // namespace

template <class T>
void conv2d_forward(const T* x, const T* W, const T* b, T* y, const ConvGeometry& g, T* workspace) {
  const std::int64_t spatial = std::int64_t(g.out_h()) * g.out_w();
  const int CRR = g.C * g.R * g.R;
  const std::int64_t in_size = std::int64_t(g.C) * g.H * g.W;
  for (int n = 0; n < g.N; ++n) {
    const T* xn = x + n * in_size;
    T* yn = y + n * g.K * spatial;
    const T* col = xn;
    if (!is_pointwise(g)) {
      im2col(xn, workspace, g);
      col = workspace;
    }
    // Bias first, then the GEMM accumulates onto it (beta = 1) instead of a second pass.
    T beta = T(0);
    if (b) {
      for (int k = 0; k < g.K; ++k) std::fill(yn + k * spatial, yn + (k + 1) * spatial, b[k]);
      beta = T(1);
    }
    gemm<T>(false, false, g.K, int(spatial), CRR, T(1), W, col, beta, yn);  // y_n = W col
  }
}

template <class T>
void conv2d_backward(const T* x, const T* W, const T* dy, T* dx, T* dW, T* db, const ConvGeometry& g,
                     T* workspace) {
  const std::int64_t spatial = std::int64_t(g.out_h()) * g.out_w();
  const int CRR = g.C * g.R * g.R;
  const std::int64_t in_size = std::int64_t(g.C) * g.H * g.W;
  const bool pointwise = is_pointwise(g);
  for (int n = 0; n < g.N; ++n) {
    const T* xn = x + n * in_size;
    const T* dyn = dy + n * g.K * spatial;
    if (db) {
      for (int k = 0; k < g.K; ++k) {
        T s = T(0);
        for (std::int64_t i = 0; i < spatial; ++i) s += dyn[k * spatial + i];
        db[k] += s;
      }
    }
    if (dW) {
      const T* col = xn;
      if (!pointwise) {
        im2col(xn, workspace, g);
        col = workspace;
      }
      gemm<T>(false, true, g.K, CRR, int(spatial), T(1), dyn, col, T(1), dW);  // dW += dy_n col^T
    }
    if (dx) {
      T* dxn = dx + n * in_size;
      if (pointwise) {
        gemm<T>(true, false, CRR, int(spatial), g.K, T(1), W, dyn, T(0), dxn);  // dx_n = W^T dy_n
      } else {
        // The column matrix is dead once dW is done, so dcol reuses the same workspace.
        gemm<T>(true, false, CRR, int(spatial), g.K, T(1), W, dyn, T(0), workspace);  // dcol = W^T dy_n
        col2im(workspace, dxn, g);
      }
    }
  }
}

// ---- MaxPool2d ------------------------------------------------------------------------
template <class T>
void maxpool2d_forward(const T* x, T* y, std::int32_t* argmax, const PoolGeometry& g) {
  const int OH = g.out_h(), OW = g.out_w();
  const std::int64_t planes = std::int64_t(g.N) * g.C;
  for (std::int64_t p = 0; p < planes; ++p) {
    const T* in = x + p * g.H * g.W;
    T* out = y + p * OH * OW;
    std::int32_t* arg = argmax + p * OH * OW;
    for (int oh = 0; oh < OH; ++oh) {
      for (int ow = 0; ow < OW; ++ow) {
        // First maximum wins on ties, as in PyTorch.
        int best = (oh * g.stride) * g.W + ow * g.stride;
        for (int i = 0; i < g.kernel; ++i) {
          const int row = (oh * g.stride + i) * g.W + ow * g.stride;
          for (int j = 0; j < g.kernel; ++j)
            if (in[row + j] > in[best]) best = row + j;
        }
        out[oh * OW + ow] = in[best];
        arg[oh * OW + ow] = best;
      }
    }
  }
}

template <class T>
void maxpool2d_backward(const std::int32_t* argmax, const T* dy, T* dx, const PoolGeometry& g) {
  const std::int64_t out_plane = std::int64_t(g.out_h()) * g.out_w();
  const std::int64_t in_plane = std::int64_t(g.H) * g.W;
  const std::int64_t planes = std::int64_t(g.N) * g.C;
  std::fill(dx, dx + planes * in_plane, T(0));
  // Accumulate: windows overlap when stride < kernel, and one input may win several.
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t o = 0; o < out_plane; ++o) dx[p * in_plane + argmax[p * out_plane + o]] += dy[p * out_plane + o];
}

#define LOOM_INSTANTIATE_CONV_POOL(T)                                                                         \
  template void conv2d_forward<T>(const T*, const T*, const T*, T*, const ConvGeometry&, T*);                 \
  template void conv2d_backward<T>(const T*, const T*, const T*, T*, T*, T*, const ConvGeometry&, T*);        \
  template void maxpool2d_forward<T>(const T*, T*, std::int32_t*, const PoolGeometry&);                       \
  template void maxpool2d_backward<T>(const std::int32_t*, const T*, T*, const PoolGeometry&);

LOOM_INSTANTIATE_CONV_POOL(float)
LOOM_INSTANTIATE_CONV_POOL(double)

}  // namespace loom::cpu
