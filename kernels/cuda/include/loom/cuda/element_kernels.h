// The bodies of Loom's element-wise CUDA kernels, written once as functors of the thread
// index: nvcc compiles them as __host__ __device__ for the GPU launchers (cuda_backend.cu,
// device_kernels.cu), the host compiler as plain C++ for host_launch below, which runs the
// same body over the whole grid on the CPU. Tests run every body through host_launch
// against the CPU reference kernels (kernels/cpu), so the indexing and the arithmetic of
// each kernel are checked in every build, CUDA or not; only the launch itself needs a GPU.
//
// One work item per thread, no shared memory, no barriers, no atomics: that keeps every
// kernel checkable this way. A thread's serial work is bounded by the layer's geometry,
// never by the batch or the plane: reductions over a batch or a plane (the bias gradients)
// run in passes, partial sums of short chunks of the values (one thread per chunk and
// output), then the partials added in chunk order (one thread per output); the chunking
// (launch_geometry.h) depends on the shape only, so the result is deterministic. Gathers
// visit only what can reach their element (max-pool backward: the windows containing the
// pixel; col2im: the kernel taps). The softmax row loss is summed on the host.
//
// Element-wise arithmetic follows the CPU kernels operation by operation (same order,
// float), so on the host those bodies match kernels/cpu bit for bit and a GPU differs only
// where the hardware rounds differently (fused multiply-add, exp, erf, sqrt). Sums do not:
// the two-pass reductions add in another order than the CPU's serial loops, and tests bound
// both against a float64 sum (test_kernels_cuda_bodies, docs/tests.md).
#pragma once

#include <cmath>
#include <cstdint>

#include "loom/cuda/launch_geometry.h"

#if defined(__CUDACC__)
#define LOOM_HD __host__ __device__
#else
#define LOOM_HD
#endif

namespace loom::cuda {

// Runs body(i) for i in [0, n) on the calling CPU thread: the grid, one index at a time.
template <class Body>
void host_launch(std::int64_t n, const Body& body) {
  for (std::int64_t i = 0; i < n; ++i) body(i);
}

// ---- counter-based random numbers: kernels/cpu's counter_uniform, device-callable -----
LOOM_HD inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
LOOM_HD inline double counter_uniform(std::uint64_t seed, std::uint64_t counter) {
  const std::uint64_t r = mix64(mix64(seed) + (counter + 1) * 0x9e3779b97f4a7c15ULL);
  return double(r >> 11) * 0x1.0p-53;
}

// ---- activations ------------------------------------------------------------------------
struct ReluForward {
  static constexpr const char* kName = "ReluForward";
  const float* x;
  float* y;
  LOOM_HD void operator()(std::int64_t i) const { y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
};

struct ReluBackward {
  static constexpr const char* kName = "ReluBackward";
  const float* x;
  const float* dy;
  float* dx;
  LOOM_HD void operator()(std::int64_t i) const { dx[i] = x[i] > 0.0f ? dy[i] : 0.0f; }
};

struct TanhForward {
  static constexpr const char* kName = "TanhForward";
  const float* x;
  float* y;
  LOOM_HD void operator()(std::int64_t i) const { y[i] = std::tanh(x[i]); }
};

// Through the output, as kernels/cpu: dx = dy (1 - y^2).
struct TanhBackward {
  static constexpr const char* kName = "TanhBackward";
  const float* y;
  const float* dy;
  float* dx;
  LOOM_HD void operator()(std::int64_t i) const { dx[i] = dy[i] * (1.0f - y[i] * y[i]); }
};

// Exact GELU, x Phi(x) with erf (PyTorch's default), with kernels/cpu's constants.
struct GeluForward {
  static constexpr const char* kName = "GeluForward";
  const float* x;
  float* y;
  LOOM_HD void operator()(std::int64_t i) const {
    y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752440f));
  }
};

struct GeluBackward {
  static constexpr const char* kName = "GeluBackward";
  const float* x;
  const float* dy;
  float* dx;
  LOOM_HD void operator()(std::int64_t i) const {
    const float cdf = 0.5f * (1.0f + std::erf(x[i] * 0.70710678118654752440f));
    const float pdf = 0.39894228040143267794f * std::exp(-0.5f * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
};

// ---- plain element-wise helpers -----------------------------------------------------------
struct Fill {
  static constexpr const char* kName = "Fill";
  float* x;
  float value;
  LOOM_HD void operator()(std::int64_t i) const { x[i] = value; }
};

// y += x (summing the input gradients of parallel branches).
struct Accumulate {
  static constexpr const char* kName = "Accumulate";
  float* y;
  const float* x;
  LOOM_HD void operator()(std::int64_t i) const { y[i] += x[i]; }
};

// out = a * b element-wise (dropout's backward: dx = mask * dy).
struct Multiply {
  static constexpr const char* kName = "Multiply";
  const float* a;
  const float* b;
  float* out;
  LOOM_HD void operator()(std::int64_t i) const { out[i] = a[i] * b[i]; }
};

// One branch's [N, width] block into columns [offset, offset + width) of out [N, total],
// one thread per element of the part; SplitPart is its adjoint.
struct ConcatPart {
  static constexpr const char* kName = "ConcatPart";
  const float* part;
  float* out;
  std::int64_t width, total, offset;
  LOOM_HD void operator()(std::int64_t i) const { out[i / width * total + offset + i % width] = part[i]; }
};

struct SplitPart {
  static constexpr const char* kName = "SplitPart";
  const float* dout;
  float* dpart;
  std::int64_t width, total, offset;
  LOOM_HD void operator()(std::int64_t i) const { dpart[i] = dout[i / width * total + offset + i % width]; }
};

// y[N, out] += b[out]: the bias after the GEMM of a linear layer (one thread per element).
struct BiasAdd {
  static constexpr const char* kName = "BiasAdd";
  float* y;
  const float* b;
  std::int64_t out;
  LOOM_HD void operator()(std::int64_t i) const { y[i] += b[i % out]; }
};

// ---- reductions in passes (launch_geometry.h: reduction_chunks picks the chunking) --------
// A thread's sum of a short run of values (at most kMaxChunk), in four interleaved
// accumulators: value m goes to accumulator m % 4, and the total is (a0 + a1) + (a2 + a3).
// A GPU thread issues its loads in order and waits at the first add that needs one; four
// independent accumulators let four loads be in flight, where one running sum lets one.
// The order is fixed by the count alone, so the result is the same on every executor.
struct Sum4 {
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  LOOM_HD void add4(float v0, float v1, float v2, float v3) {
    a0 += v0;
    a1 += v1;
    a2 += v2;
    a3 += v3;
  }
  LOOM_HD float total() const { return (a0 + a1) + (a2 + a3); }
};

// The sum of p[0], p[stride], ..., p[(count - 1) * stride], by Sum4's order.
LOOM_HD inline float strided_sum(const float* p, std::int64_t count, std::int64_t stride) {
  Sum4 s;
  std::int64_t m = 0;
  for (; m + 4 <= count; m += 4) s.add4(p[m * stride], p[(m + 1) * stride], p[(m + 2) * stride], p[(m + 3) * stride]);
  for (; m < count; ++m) s.a0 += p[m * stride];
  return s.total();
}

// Pass 1 of db[j] += sum over n of dy[n, j]: thread i = c * out + j sums rows
// [c * chunk_rows, (c + 1) * chunk_rows) of column j into partials[c * out + j]. Threads
// next to each other read next columns of one row, so a warp's reads are contiguous.
struct BiasGradPartial {
  static constexpr const char* kName = "BiasGradPartial";
  const float* dy;  // [rows, out]
  float* partials;  // [chunks, out]
  std::int64_t rows, out, chunk_rows;
  LOOM_HD void operator()(std::int64_t i) const {
    const std::int64_t c = i / out, j = i % out;
    const std::int64_t begin = c * chunk_rows, end = begin + chunk_rows < rows ? begin + chunk_rows : rows;
    partials[i] = strided_sum(dy + begin * out + j, end - begin, out);
  }
  std::int64_t summed() const { return rows * out; }
};

// Pass 1 of db[k] += the sum of dy[n, k, :, :] over samples and pixels. Channel k's values,
// taken in (sample, pixel) order as a sequence of samples * plane, are dealt to `chunks`
// threads in turn: thread i = k * chunks + c sums the values at c, c + chunks, c + 2 chunks,
// ... into partials[i] (Sum4's order). Threads next to each other read next pixels
// (coalesced), and the (sample, pixel) of the next value is stepped without a division.
struct ChannelBiasGradPartial {
  static constexpr const char* kName = "ChannelBiasGradPartial";
  const float* dy;  // [samples, channels, plane]
  float* partials;  // [channels, chunks]
  std::int64_t samples, plane, channels, chunks;
  LOOM_HD void operator()(std::int64_t i) const {
    const std::int64_t k = i / chunks, c = i % chunks, values = samples * plane;
    const std::int64_t count = c < values ? (values - c + chunks - 1) / chunks : 0;
    Cursor at{dy + k * plane, channels * plane, plane, chunks / plane, chunks % plane, c / plane, c % plane};
    Sum4 s;
    std::int64_t m = 0;
    for (; m + 4 <= count; m += 4) {
      const float v0 = at.take(), v1 = at.take(), v2 = at.take(), v3 = at.take();
      s.add4(v0, v1, v2, v3);
    }
    for (; m < count; ++m) s.a0 += at.take();
    partials[i] = s.total();
  }
  std::int64_t summed() const { return samples * plane * channels; }

 private:
  // Channel k's value (n, s) is at base[n * row + s]; take() reads it and steps `chunks`
  // values on through the (sample, pixel) sequence.
  struct Cursor {
    const float* base;
    std::int64_t row, plane, step_n, step_s, n, s;
    LOOM_HD float take() {
      const float v = base[n * row + s];
      n += step_n;
      s += step_s;
      if (s >= plane) {
        s -= plane;
        ++n;
      }
      return v;
    }
  };
};

// The passes after the first, for both: output o's `chunks` partials (partial c at
// in[o * output_stride + c * chunk_stride]) summed in chunk order (Sum4's), `per_group` at
// a time. Thread i = o * groups + g sums partials [g * per_group, (g + 1) * per_group) into
// out[i]; the last pass has one group per output and adds its sum onto out[o] (accumulate).
struct SumPartials {
  static constexpr const char* kName = "SumPartials";
  const float* in;
  float* out;
  std::int64_t outputs, chunks, output_stride, chunk_stride, per_group, groups;
  bool accumulate;
  LOOM_HD void operator()(std::int64_t i) const {
    const std::int64_t o = i / groups, begin = i % groups * per_group;
    const std::int64_t end = begin + per_group < chunks ? begin + per_group : chunks;
    const float sum = strided_sum(in + o * output_stride + begin * chunk_stride, end - begin, chunk_stride);
    out[i] = accumulate ? out[i] + sum : sum;
  }
  std::int64_t summed() const { return outputs * chunks; }
};

// The same masks as cpu::dropout_forward for the same (seed, offset): element i draws
// counter offset + i. keep_scale = 1 / (1 - p), or 0 when p >= 1.
struct DropoutForward {
  static constexpr const char* kName = "DropoutForward";
  const float* x;
  float* y;
  float* mask;
  double p;
  float keep_scale;
  std::uint64_t seed, offset;
  LOOM_HD void operator()(std::int64_t i) const {
    const bool keep = p <= 0.0 || counter_uniform(seed, offset + std::uint64_t(i)) >= p;
    mask[i] = p <= 0.0 ? 1.0f : (keep ? keep_scale : 0.0f);
    y[i] = x[i] * mask[i];
  }
};

// DropoutForward with its offset read from device memory when it runs (*first_sample x
// sample_size), so a captured launch draws each replay's own masks.
struct DropoutForwardKeyed {
  static constexpr const char* kName = "DropoutForwardKeyed";
  DropoutForward at;  // its offset taken from first_sample when it runs
  const std::uint64_t* first_sample;
  std::uint64_t sample_size;
  LOOM_HD void operator()(std::int64_t i) const {
    DropoutForward now = at;
    now.offset = *first_sample * sample_size;
    now(i);
  }
};

// ---- convolution and pooling ------------------------------------------------------------
// One sample's convolution is im2col, then the GEMM W[K, C*R*R] x col[C*R*R, OH*OW], which
// is that sample's y in NCHW, then ChannelBias. Plain geometry: device code takes no
// kernels/cpu types.
struct ConvShape {
  int C = 0, H = 0, W = 0, K = 0, R = 0, stride = 1, pad = 0;
  LOOM_HD int out_h() const { return (H + 2 * pad - R) / stride + 1; }
  LOOM_HD int out_w() const { return (W + 2 * pad - R) / stride + 1; }
};

// col[(c*R + kr)*R + ks, oh*OW + ow] = x[c, oh*stride - pad + kr, ow*stride - pad + ks], 0
// outside the image: one thread per column entry of one sample.
struct Im2Col {
  static constexpr const char* kName = "Im2Col";
  const float* x;  // one sample, [C, H, W]
  float* col;      // [C*R*R, OH*OW]
  ConvShape g;
  LOOM_HD void operator()(std::int64_t i) const {
    const std::int64_t cols = std::int64_t(g.out_h()) * g.out_w();
    const std::int64_t row = i / cols, at = i % cols;
    const int c = int(row / (g.R * g.R)), kr = int(row / g.R % g.R), ks = int(row % g.R);
    const int oh = int(at / g.out_w()), ow = int(at % g.out_w());
    const int ih = oh * g.stride - g.pad + kr, iw = ow * g.stride - g.pad + ks;
    const bool inside = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
    col[i] = inside ? x[(std::int64_t(c) * g.H + ih) * g.W + iw] : 0.0f;
  }
};

// The adjoint of Im2Col as a gather, one thread per input pixel (no atomics): dx[c, h, w]
// = the sum of the column entries im2col copied from it, in (kr, ks) order.
struct Col2Im {
  static constexpr const char* kName = "Col2Im";
  const float* col;  // [C*R*R, OH*OW] of one sample
  float* dx;         // [C, H, W], overwritten
  ConvShape g;
  LOOM_HD void operator()(std::int64_t i) const {
    const int c = int(i / (std::int64_t(g.H) * g.W)), h = int(i / g.W % g.H), w = int(i % g.W);
    const int OH = g.out_h(), OW = g.out_w();
    float sum = 0.0f;
    for (int kr = 0; kr < g.R; ++kr) {
      const int top = h + g.pad - kr;  // oh * stride
      if (top < 0 || top % g.stride != 0 || top / g.stride >= OH) continue;
      for (int ks = 0; ks < g.R; ++ks) {
        const int left = w + g.pad - ks;  // ow * stride
        if (left < 0 || left % g.stride != 0 || left / g.stride >= OW) continue;
        const std::int64_t row = (std::int64_t(c) * g.R + kr) * g.R + ks;
        sum += col[row * OH * OW + std::int64_t(top / g.stride) * OW + left / g.stride];
      }
    }
    dx[i] = sum;
  }
};

// y[n, k, :, :] += b[k] over NCHW outputs with `plane` = OH*OW elements per channel.
struct ChannelBias {
  static constexpr const char* kName = "ChannelBias";
  float* y;
  const float* b;
  std::int64_t plane, channels;
  LOOM_HD void operator()(std::int64_t i) const { y[i] += b[(i / plane) % channels]; }
};

// The whole batch's column matrix col[C*R*R, samples*OH*OW] (sample n's columns at
// n*OH*OW), so one GEMM covers the batch: Im2Col over every sample at once.
struct Im2ColBatch {
  static constexpr const char* kName = "Im2ColBatch";
  const float* x;  // [samples, C, H, W]
  float* col;
  ConvShape g;
  std::int64_t samples;
  LOOM_HD void operator()(std::int64_t i) const {
    const std::int64_t spatial = std::int64_t(g.out_h()) * g.out_w(), cols = samples * spatial;
    const std::int64_t row = i / cols, at = i % cols, n = at / spatial, s = at % spatial;
    const int c = int(row / (g.R * g.R)), kr = int(row / g.R % g.R), ks = int(row % g.R);
    const int oh = int(s / g.out_w()), ow = int(s % g.out_w());
    const int ih = oh * g.stride - g.pad + kr, iw = ow * g.stride - g.pad + ks;
    const bool inside = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
    col[i] = inside ? x[((n * g.C + c) * g.H + ih) * g.W + iw] : 0.0f;
  }
};

// The adjoint of Im2ColBatch as a gather, one thread per input pixel of the batch.
struct Col2ImBatch {
  static constexpr const char* kName = "Col2ImBatch";
  const float* col;  // [C*R*R, samples*OH*OW]
  float* dx;         // [samples, C, H, W], overwritten
  ConvShape g;
  std::int64_t samples;
  LOOM_HD void operator()(std::int64_t i) const {
    const std::int64_t image = std::int64_t(g.C) * g.H * g.W, n = i / image, r = i % image;
    const int c = int(r / (std::int64_t(g.H) * g.W)), h = int(r / g.W % g.H), w = int(r % g.W);
    const int OH = g.out_h(), OW = g.out_w();
    const std::int64_t spatial = std::int64_t(OH) * OW, cols = samples * spatial;
    float sum = 0.0f;
    for (int kr = 0; kr < g.R; ++kr) {
      const int top = h + g.pad - kr;
      if (top < 0 || top % g.stride != 0 || top / g.stride >= OH) continue;
      for (int ks = 0; ks < g.R; ++ks) {
        const int left = w + g.pad - ks;
        if (left < 0 || left % g.stride != 0 || left / g.stride >= OW) continue;
        const std::int64_t row = (std::int64_t(c) * g.R + kr) * g.R + ks;
        sum += col[row * cols + n * spatial + std::int64_t(top / g.stride) * OW + left / g.stride];
      }
    }
    dx[i] = sum;
  }
};

// y[n, k, s] = src[k, n*spatial + s] + b[k] (b may be null): the batch GEMM's [K, N*OHOW]
// result into NCHW with the bias, one thread per output element.
struct ScatterChannels {
  static constexpr const char* kName = "ScatterChannels";
  const float* src;
  float* y;
  const float* b;
  std::int64_t channels, spatial, samples;
  LOOM_HD void operator()(std::int64_t i) const {
    const std::int64_t n = i / (channels * spatial), k = i / spatial % channels, s = i % spatial;
    y[i] = src[k * samples * spatial + n * spatial + s] + (b ? b[k] : 0.0f);
  }
};

// dst[k, n*spatial + s] = dy[n, k, s]: NCHW gradients into the layout the GEMMs read.
struct GatherChannels {
  static constexpr const char* kName = "GatherChannels";
  const float* dy;
  float* dst;
  std::int64_t channels, spatial, samples;
  LOOM_HD void operator()(std::int64_t i) const {
    const std::int64_t cols = samples * spatial, k = i / cols, at = i % cols, n = at / spatial, s = at % spatial;
    dst[i] = dy[(n * channels + k) * spatial + s];
  }
};

// Max pooling, one thread per output element; argmax is the flat index within the
// input plane of the first largest value, as cpu::maxpool2d_forward records it.
struct MaxPoolForward {
  static constexpr const char* kName = "MaxPoolForward";
  const float* x;
  float* y;
  std::int32_t* argmax;
  int H, W, kernel, stride;
  LOOM_HD void operator()(std::int64_t i) const {
    const int OH = (H - kernel) / stride + 1, OW = (W - kernel) / stride + 1;
    const std::int64_t plane = i / (std::int64_t(OH) * OW);
    const int oh = int(i / OW % OH), ow = int(i % OW);
    const float* in = x + plane * H * W;
    std::int32_t best_i = oh * stride * W + ow * stride;
    float best = in[best_i];
    for (int a = 0; a < kernel; ++a) {
      for (int b = 0; b < kernel; ++b) {
        const std::int32_t at = (oh * stride + a) * W + ow * stride + b;
        if (in[at] > best) {
          best = in[at];
          best_i = at;
        }
      }
    }
    y[i] = best;
    argmax[i] = best_i;
  }
};

// The max-pool gradient as a gather, one thread per input pixel: the dy of every window
// whose argmax is this pixel (windows overlap when stride < kernel). Only the windows that
// contain the pixel are visited: rows oh with oh * stride <= h < oh * stride + kernel, at
// most ceil(kernel / stride) of them, and the same for columns; in increasing (oh, ow), the
// order in which cpu::maxpool2d_backward adds them.
struct MaxPoolBackward {
  static constexpr const char* kName = "MaxPoolBackward";
  const std::int32_t* argmax;
  const float* dy;
  float* dx;  // overwritten
  int H, W, kernel, stride;
  LOOM_HD static int first_window(int at, int kernel, int stride) { return at < kernel ? 0 : (at - kernel) / stride + 1; }
  LOOM_HD void operator()(std::int64_t i) const {
    const int OH = (H - kernel) / stride + 1, OW = (W - kernel) / stride + 1;
    const std::int64_t plane = i / (std::int64_t(H) * W);
    const auto at = std::int32_t(i % (std::int64_t(H) * W));
    const int h = at / W, w = at % W;
    const int oh_end = h / stride + 1 < OH ? h / stride + 1 : OH, ow_end = w / stride + 1 < OW ? w / stride + 1 : OW;
    float sum = 0.0f;
    for (int oh = first_window(h, kernel, stride); oh < oh_end; ++oh) {
      for (int ow = first_window(w, kernel, stride); ow < ow_end; ++ow) {
        const std::int64_t o = (plane * OH + oh) * OW + ow;
        if (argmax[o] == at) sum += dy[o];
      }
    }
    dx[i] = sum;
  }
};

// ---- softmax cross-entropy ----------------------------------------------------------------
// One thread per row: probs[n, :] = softmax(logits[n, :]); row_loss[n] = -log p[label];
// row_correct[n] = 1 when the argmax (first of equal maxima) is the label. The host (or
// a second pass) sums row_loss / N for the mean loss, as cpu::softmax_xent_forward does.
struct SoftmaxXentRow {
  static constexpr const char* kName = "SoftmaxXentRow";
  const float* logits;
  const std::int32_t* labels;
  float* probs;
  float* row_loss;
  std::int32_t* row_correct;
  std::int64_t classes;
  LOOM_HD void operator()(std::int64_t n) const {
    const float* z = logits + n * classes;
    float* p = probs + n * classes;
    std::int64_t argmax = 0;
    for (std::int64_t c = 1; c < classes; ++c)
      if (z[c] > z[argmax]) argmax = c;
    const float zmax = z[argmax];
    float sum = 0.0f;
    for (std::int64_t c = 0; c < classes; ++c) {
      p[c] = std::exp(z[c] - zmax);
      sum += p[c];
    }
    const float inv = 1.0f / sum;
    for (std::int64_t c = 0; c < classes; ++c) p[c] *= inv;
    row_loss[n] = std::log(sum) - (z[labels[n]] - zmax);
    row_correct[n] = argmax == labels[n] ? 1 : 0;
  }
};

// dlogits[n, c] = probs[n, c] * scale, minus scale at the label.
struct SoftmaxXentBackward {
  static constexpr const char* kName = "SoftmaxXentBackward";
  const float* probs;
  const std::int32_t* labels;
  float* dlogits;
  std::int64_t classes;
  float scale;
  LOOM_HD void operator()(std::int64_t i) const {
    const std::int64_t n = i / classes, c = i % classes;
    const float d = probs[i] * scale;
    dlogits[i] = c == labels[n] ? d - scale : d;
  }
};

// ---- optimizers (weight decay folded into the gradient, as kernels/cpu) --------------------
struct SgdStep {
  static constexpr const char* kName = "SgdStep";
  float* w;
  const float* dw;
  float lr, weight_decay;
  LOOM_HD void operator()(std::int64_t i) const { w[i] -= lr * (dw[i] + weight_decay * w[i]); }
};

struct MomentumStep {
  static constexpr const char* kName = "MomentumStep";
  float* w;
  const float* dw;
  float* v;
  float lr, mu, weight_decay;
  LOOM_HD void operator()(std::int64_t i) const {
    v[i] = mu * v[i] + (dw[i] + weight_decay * w[i]);
    w[i] -= lr * v[i];
  }
};

// step_size = lr / (1 - beta1^t) and bias_correction2_sqrt = sqrt(1 - beta2^t), computed
// once on the host in double as cpu::adam_step does.
struct AdamStep {
  static constexpr const char* kName = "AdamStep";
  float* w;
  const float* dw;
  float* m;
  float* v;
  float beta1, beta2, eps, weight_decay, step_size, bias_correction2_sqrt;
  LOOM_HD void operator()(std::int64_t i) const {
    const float g = dw[i] + weight_decay * w[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    const float denom = std::sqrt(v[i]) / bias_correction2_sqrt + eps;
    w[i] -= step_size * m[i] / denom;
  }
};

// The host-side constants of AdamStep for step t (1-based), from the float hyper-
// parameters the kernel uses (s.beta1, s.beta2) as cpu::adam_step computes them.
inline AdamStep adam_constants(AdamStep s, float lr, std::int64_t t) {
  s.step_size = lr / (1.0f - float(std::pow(double(s.beta1), double(t))));
  s.bias_correction2_sqrt = float(std::sqrt(1.0 - std::pow(double(s.beta2), double(t))));
  return s;
}

}  // namespace loom::cuda
