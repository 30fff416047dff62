// Conv2d as im2col + GEMM over blocks of samples and max pooling with recorded argmax.
// One sample's GEMM is tiny (K x C*R*R x OH*OW, e.g. 16 x 9 x 784), too small for BLAS to
// use a second thread, so a block of nb samples is laid side by side in one column matrix
// [C*R*R, nb*OH*OW] and a single GEMM covers the block. The block result is [K, nb*OH*OW],
// so forward scatters it to NCHW and backward gathers dy into that layout first.
#include "loom/kernels/cpu.h"

#include <algorithm>
#include <cstring>

namespace loom::cpu {

namespace {

// Output columns [lo, hi) whose input column ow*stride - pad + ks lies inside the image.
struct ColRange {
  int lo, hi;
};
ColRange inside_columns(const ConvGeometry& g, int ks) {
  const int OW = g.out_w();
  const int lo = std::clamp((g.pad - ks + g.stride - 1) / g.stride, 0, OW);
  const int hi = std::clamp((g.W + g.pad - ks + g.stride - 1) / g.stride, lo, OW);
  return {lo, hi};
}

// col[(c*R + kr)*R + ks, oh*OW + ow] = x[c, oh*stride - pad + kr, ow*stride - pad + ks]
// (0 outside). ld is the stored row length of col, so a sample can fill its slice of a
// block's column matrix.
template <class T>
void im2col(const T* x, T* col, std::int64_t ld, const ConvGeometry& g) {
  const int OH = g.out_h(), OW = g.out_w();
  for (int c = 0; c < g.C; ++c) {
    const T* plane = x + std::int64_t(c) * g.H * g.W;
    for (int kr = 0; kr < g.R; ++kr) {
      for (int ks = 0; ks < g.R; ++ks) {
        T* row = col + (std::int64_t(c * g.R + kr) * g.R + ks) * ld;
        const auto [ow_lo, ow_hi] = inside_columns(g, ks);
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
void col2im(const T* col, std::int64_t ld, T* dx, const ConvGeometry& g) {
  const int OH = g.out_h(), OW = g.out_w();
  std::fill(dx, dx + std::int64_t(g.C) * g.H * g.W, T(0));
  for (int c = 0; c < g.C; ++c) {
    T* plane = dx + std::int64_t(c) * g.H * g.W;
    for (int kr = 0; kr < g.R; ++kr) {
      for (int ks = 0; ks < g.R; ++ks) {
        const T* row = col + (std::int64_t(c * g.R + kr) * g.R + ks) * ld;
        const auto [ow_lo, ow_hi] = inside_columns(g, ks);
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

// A block of nb samples starting at n0 and where its pieces live in the workspace.
template <class T>
struct Block {
  int n0, nb;
  std::int64_t cols;  // nb * OH * OW: row length of both matrices below
  T* col;             // [C*R*R, cols]: im2col of the block, later reused as dcol
  T* out;             // [K, cols]: the block's y before the scatter, or its gathered dy
};

template <class T>
Block<T> make_block(const ConvGeometry& g, int n0, T* workspace) {
  const int nb = std::min(g.block_samples(), g.N - n0);
  const std::int64_t cols = std::int64_t(nb) * g.out_h() * g.out_w();
  return {n0, nb, cols, workspace, workspace + std::int64_t(g.C) * g.R * g.R * cols};
}

template <class T>
void im2col_block(const T* x, const Block<T>& blk, const ConvGeometry& g) {
  const std::int64_t in_size = std::int64_t(g.C) * g.H * g.W, spatial = std::int64_t(g.out_h()) * g.out_w();
  for (int i = 0; i < blk.nb; ++i) im2col(x + (blk.n0 + i) * in_size, blk.col + i * spatial, blk.cols, g);
}

}  // namespace

template <class T>
void conv2d_forward(const T* x, const T* W, const T* b, T* y, const ConvGeometry& g, T* workspace) {
  const std::int64_t spatial = std::int64_t(g.out_h()) * g.out_w();
  const int CRR = g.C * g.R * g.R;
  for (int n0 = 0; n0 < g.N; n0 += g.block_samples()) {
    const Block<T> blk = make_block(g, n0, workspace);
    im2col_block(x, blk, g);
    gemm<T>(false, false, g.K, int(blk.cols), CRR, T(1), W, blk.col, T(0), blk.out);  // out = W col
    // Scatter [K, nb*OHOW] to y[n, K, OHOW]; the bias rides along with the copy.
    for (int i = 0; i < blk.nb; ++i) {
      T* yn = y + std::int64_t(n0 + i) * g.K * spatial;
      for (int k = 0; k < g.K; ++k) {
        const T* src = blk.out + k * blk.cols + i * spatial;
        T* dst = yn + k * spatial;
        const T bias = b ? b[k] : T(0);
        for (std::int64_t s = 0; s < spatial; ++s) dst[s] = src[s] + bias;
      }
    }
  }
}

template <class T>
void conv2d_backward(const T* x, const T* W, const T* dy, T* dx, T* dW, T* db, const ConvGeometry& g,
                     T* workspace) {
  const std::int64_t spatial = std::int64_t(g.out_h()) * g.out_w();
  const int CRR = g.C * g.R * g.R;
  const std::int64_t in_size = std::int64_t(g.C) * g.H * g.W;
  if (db) {
    for (int n = 0; n < g.N; ++n)
      for (int k = 0; k < g.K; ++k) {
        const T* dyk = dy + (std::int64_t(n) * g.K + k) * spatial;
        T s = T(0);
        for (std::int64_t i = 0; i < spatial; ++i) s += dyk[i];
        db[k] += s;
      }
  }
  if (!dW && !dx) return;
  for (int n0 = 0; n0 < g.N; n0 += g.block_samples()) {
    const Block<T> blk = make_block(g, n0, workspace);
    // Gather dy[n, K, OHOW] into [K, nb*OHOW], the layout the block GEMMs read.
    for (int i = 0; i < blk.nb; ++i)
      for (int k = 0; k < g.K; ++k)
        std::memcpy(blk.out + k * blk.cols + i * spatial, dy + (std::int64_t(n0 + i) * g.K + k) * spatial,
                    sizeof(T) * std::size_t(spatial));
    if (dW) {
      im2col_block(x, blk, g);
      gemm<T>(false, true, g.K, CRR, int(blk.cols), T(1), blk.out, blk.col, T(1), dW);  // dW += dy col^T
    }
    if (dx) {
      // The column matrix is dead once dW is done, so dcol reuses its space.
      gemm<T>(true, false, CRR, int(blk.cols), g.K, T(1), W, blk.out, T(0), blk.col);  // dcol = W^T dy
      for (int i = 0; i < blk.nb; ++i) col2im(blk.col + i * spatial, blk.cols, dx + (n0 + i) * in_size, g);
    }
  }
}

// ---- MaxPool2d ------------------------------------------------------------------------
// One output row of one plane. The running max is kept by selects rather than branches:
// the compare outcome is data-dependent and mispredicts as a branch, while as selects over
// ow (with KS = kernel == stride known at compile time, the common 2x2 case) GCC
// vectorises it. KS == 0 is the generic path. Visiting offsets in (i, j) order with a
// strict > keeps the first maximum on ties, as in PyTorch.
template <class T, int KS>
void maxpool_row(const T* __restrict in, T* __restrict out, std::int32_t* __restrict arg, int oh,
                 const PoolGeometry& g) {
  const int OW = g.out_w(), s = KS ? KS : g.stride, kernel = KS ? KS : g.kernel;
  for (int ow = 0; ow < OW; ++ow) {
    std::int32_t best_i = oh * s * g.W + ow * s;
    T best = in[best_i];
    for (int i = 0; i < kernel; ++i) {
      const std::int32_t row = (oh * s + i) * g.W + ow * s;
      for (int j = 0; j < kernel; ++j) {
        const T v = in[row + j];
        const bool gt = v > best;
        best = gt ? v : best;
        best_i = gt ? row + j : best_i;
      }
    }
    out[ow] = best;
    arg[ow] = best_i;
  }
}

template <class T>
void maxpool2d_forward(const T* x, T* y, std::int32_t* argmax, const PoolGeometry& g) {
  const int OH = g.out_h(), OW = g.out_w();
  const std::int64_t planes = std::int64_t(g.N) * g.C;
  for (std::int64_t p = 0; p < planes; ++p) {
    for (int oh = 0; oh < OH; ++oh) {
      const std::int64_t o = (p * OH + oh) * OW;
      if (g.kernel == 2 && g.stride == 2) maxpool_row<T, 2>(x + p * g.H * g.W, y + o, argmax + o, oh, g);
      else maxpool_row<T, 0>(x + p * g.H * g.W, y + o, argmax + o, oh, g);
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
