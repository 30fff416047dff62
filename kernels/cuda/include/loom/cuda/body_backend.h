// The CUDA backend's logic, written once over an executor: every kernels::Backend
// operation as a composition of the kernel bodies (element_kernels.h) and GEMMs described
// by gemm_call (gemm_descriptor.h). The executor decides where it runs:
//  - CudaExec (cuda_backend.cu): bodies as CUDA kernels on the rank's stream, GEMMs
//    through cuBLAS, memory on the device. Built only where nvcc is.
//  - HostExec (host_body_backend.cpp): bodies through host_launch, GEMMs through
//    column-major CBLAS with the same descriptor, memory in a checked host arena. Built
//    everywhere, so the engine trains through this exact code on the CPU in the tests,
//    and a wrong index, transpose or missing upload fails there rather than on a GPU.
//
// An Exec provides: status(), host_memory(), allocate/release, allocate_host/release_host
// (staging memory), upload/download/copy,
// synchronize(), bytes_in_use(), stamp()/resolve_stamps(), launch(n, body) (with the grid
// of launch_geometry.h, recorded into the LaunchLog it was given, if any), gemm(GemmCall,
// alpha, first, second, beta, C), check(ptr, what) (a no-op on the device; the host
// arena names a pointer that is not its own, the bug a GPU would answer with an illegal
// address), fail(what) (a sticky error), and capture_begin()/capture_end()/replay()
// (kernels::Backend's captured work: a CUDA graph, or the host executor's recorded list).
//
// Reductions (the bias gradients) run in passes of bounded work per thread (two up to
// 65536 values per output; launch_geometry.h) through a scratch buffer of partial sums
// that this class owns: grown on demand, released in the destructor, counted in
// bytes_in_use like every allocation of the executor.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "loom/core/memory_layout.h"
#include "loom/cuda/element_kernels.h"
#include "loom/cuda/gemm_descriptor.h"
#include "loom/kernels/backend.h"

namespace loom::cuda {

template <class Exec>
class BodyBackend final : public kernels::Backend {
 public:
  BodyBackend(Exec exec, const char* name) : exec_(std::move(exec)), name_(name) {}
  ~BodyBackend() override {
    exec_.release(row_loss_);
    exec_.release(row_correct_);
    exec_.release(partials_);
  }

  const char* name() const override { return name_; }
  bool host_memory() const override { return exec_.host_memory(); }
  Status status() const override { return exec_.status(); }

  void* allocate(std::int64_t bytes) override { return exec_.allocate(bytes); }
  void release(void* ptr) override { exec_.release(ptr); }
  void* allocate_host(std::int64_t bytes) override { return exec_.allocate_host(bytes); }
  void release_host(void* ptr) override { exec_.release_host(ptr); }
  void upload(void* dst, const void* host, std::int64_t bytes) override {
    exec_.check(dst, "upload destination");
    exec_.upload(dst, host, bytes);
  }
  void download(void* host, const void* src, std::int64_t bytes) override {
    exec_.check(src, "download source");
    exec_.download(host, src, bytes);
  }
  void copy(void* dst, const void* src, std::int64_t bytes) override {
    check({dst, src}, "copy");
    exec_.copy(dst, src, bytes);
  }
  void fill(float* x, float value, std::int64_t n) override {
    check({x}, "fill");
    exec_.launch(n, Fill{x, value});
  }
  void accumulate(float* y, const float* x, std::int64_t n) override {
    check({y, x}, "accumulate");
    exec_.launch(n, Accumulate{y, x});
  }
  void synchronize() override { exec_.synchronize(); }
  std::int64_t bytes_in_use() const override { return exec_.bytes_in_use(); }
  std::int64_t library_workspace_bytes() const override { return library_workspace_; }
  // Memory allocated here for a library's own use (make_cuda_backend: cuBLAS's workspace).
  void* allocate_library_workspace(std::int64_t bytes) {
    void* p = exec_.allocate(bytes);
    if (p) library_workspace_ += bytes;
    return p;
  }
  std::int32_t stamp() override { return exec_.stamp(); }
  std::vector<std::int64_t> resolve_stamps() override { return exec_.resolve_stamps(); }

  // The losses queued in a capture come back at each replay, in the rows they were
  // captured writing (so those rows must not move: growing them afterwards is an error).
  bool capture_begin() override { return queued_.empty() && carried_.empty() && exec_.capture_begin(); }
  Status capture_end() override {
    const Status captured = exec_.capture_end();
    graph_queued_ = captured.ok() ? std::exchange(queued_, {}) : std::vector<std::pair<int, int>>{};
    graph_rows_ = captured.ok() ? queued_rows_ : 0;
    graph_row_loss_ = row_loss_;
    graph_partials_ = partials_;
    queued_.clear();
    queued_rows_ = 0;
    return captured;
  }
  // A replay writes the rows and scratch its capture saw: they must still be there, and
  // no loss may be waiting to be read (its rows would be overwritten).
  void replay() override {
    if (row_loss_ != graph_row_loss_ || partials_ != graph_partials_)
      return exec_.fail("the captured step's loss rows or reduction scratch moved after the capture");
    if (!queued_.empty() || !carried_.empty())
      return exec_.fail("a replay while losses queued before it were still unread");
    exec_.replay();
    queued_ = graph_queued_;
    queued_rows_ = graph_rows_;
  }

  void linear_forward(const float* x, const float* W, const float* b, float* y, int N, int in, int out) override {
    check({x, W, b, y}, "linear forward");
    gemm(false, true, N, out, in, x, W, 0.0f, y);  // y = x W^T
    if (b) exec_.launch(std::int64_t(N) * out, BiasAdd{y, b, out});
  }
  void linear_backward(const float* x, const float* W, const float* dy, float* dx, float* dW, float* db, int N,
                       int in, int out) override {
    check({x, W, dy, dx, dW, db}, "linear backward");
    if (dx) gemm(false, false, N, in, out, dy, W, 0.0f, dx);  // dx = dy W
    if (dW) gemm(true, false, out, in, N, dy, x, 1.0f, dW);   // dW += dy^T x
    if (db) bias_grad(dy, db, N, out);
  }
  void activation_forward(kernels::Activation a, const float* x, float* y, std::int64_t n) override {
    check({x, y}, "activation forward");
    switch (a) {
      case kernels::Activation::Relu: exec_.launch(n, ReluForward{x, y}); break;
      case kernels::Activation::Tanh: exec_.launch(n, TanhForward{x, y}); break;
      case kernels::Activation::Gelu: exec_.launch(n, GeluForward{x, y}); break;
    }
  }
  void activation_backward(kernels::Activation a, const float* x, const float* y, const float* dy, float* dx,
                           std::int64_t n) override {
    check({dy, dx}, "activation backward");
    switch (a) {
      case kernels::Activation::Relu: exec_.launch(n, ReluBackward{x, dy, dx}); break;
      case kernels::Activation::Tanh: exec_.launch(n, TanhBackward{y, dy, dx}); break;
      case kernels::Activation::Gelu: exec_.launch(n, GeluBackward{x, dy, dx}); break;
    }
  }
  void dropout_forward(const float* x, float* y, float* mask, std::int64_t n, double p, std::uint64_t seed,
                       std::uint64_t offset) override {
    check({x, y, mask}, "dropout forward");
    exec_.launch(n, dropout_body(x, y, mask, p, seed, offset));
  }
  void dropout_forward_keyed(const float* x, float* y, float* mask, std::int64_t n, double p, std::uint64_t seed,
                             const std::uint64_t* first_sample, std::uint64_t sample_size) override {
    check({x, y, mask, first_sample}, "dropout forward");
    exec_.launch(n, DropoutForwardKeyed{dropout_body(x, y, mask, p, seed, 0), first_sample, sample_size});
  }
  void dropout_backward(const float* mask, const float* dy, float* dx, std::int64_t n) override {
    check({mask, dy, dx}, "dropout backward");
    exec_.launch(n, Multiply{mask, dy, dx});
  }

  // One GEMM for the whole batch: col[C*R*R, N*OHOW] and out[K, N*OHOW].
  std::int64_t conv2d_workspace(const kernels::ConvDims& d) const override {
    return conv_workspace_per_sample(std::int64_t(d.C) * d.R * d.R, d.K, spatial(d)) * d.N;
  }
  void conv2d_forward(const float* x, const float* W, const float* b, float* y, const kernels::ConvDims& d,
                      float* workspace) override {
    check({x, W, b, y, workspace}, "conv2d forward");
    const ConvShape g = shape(d);
    const std::int64_t cols = std::int64_t(d.N) * spatial(d), crr = std::int64_t(d.C) * d.R * d.R;
    float* col = workspace;
    float* out = workspace + crr * cols;
    exec_.launch(crr * cols, Im2ColBatch{x, col, g, d.N});
    gemm(false, false, d.K, int(cols), int(crr), W, col, 0.0f, out);  // out = W col
    exec_.launch(std::int64_t(d.K) * cols, ScatterChannels{out, y, b, d.K, spatial(d), d.N});
  }
  void conv2d_backward(const float* x, const float* W, const float* dy, float* dx, float* dW, float* db,
                       const kernels::ConvDims& d, float* workspace) override {
    check({x, W, dy, dx, dW, db, workspace}, "conv2d backward");
    const ConvShape g = shape(d);
    const std::int64_t cols = std::int64_t(d.N) * spatial(d), crr = std::int64_t(d.C) * d.R * d.R;
    float* col = workspace;
    float* dout = workspace + crr * cols;
    if (db) channel_bias_grad(dy, db, d.N, spatial(d), d.K);
    if (!dW && !dx) return;
    exec_.launch(std::int64_t(d.K) * cols, GatherChannels{dy, dout, d.K, spatial(d), d.N});
    if (dW) {
      exec_.launch(crr * cols, Im2ColBatch{x, col, g, d.N});
      gemm(false, true, d.K, int(crr), int(cols), dout, col, 1.0f, dW);  // dW += dy col^T
    }
    if (dx) {
      gemm(true, false, int(crr), int(cols), d.K, W, dout, 0.0f, col);  // dcol = W^T dy
      exec_.launch(std::int64_t(d.N) * d.C * d.H * d.W, Col2ImBatch{col, dx, g, d.N});
    }
  }
  void maxpool2d_forward(const float* x, float* y, std::int32_t* argmax, const kernels::PoolDims& d) override {
    check({x, y, argmax}, "maxpool forward");
    const std::int64_t n = std::int64_t(d.N) * d.C * d.out_h() * d.out_w();
    exec_.launch(n, MaxPoolForward{x, y, argmax, d.H, d.W, d.kernel, d.stride});
  }
  void maxpool2d_backward(const std::int32_t* argmax, const float* dy, float* dx,
                          const kernels::PoolDims& d) override {
    check({argmax, dy, dx}, "maxpool backward");
    exec_.launch(std::int64_t(d.N) * d.C * d.H * d.W, MaxPoolBackward{argmax, dy, dx, d.H, d.W, d.kernel, d.stride});
  }
  void concat_forward(const float* const* parts, const std::int64_t* widths, int num_parts, float* out,
                      int N) override {
    const std::int64_t total = sum(widths, num_parts);
    std::int64_t offset = 0;
    for (int p = 0; p < num_parts; ++p) {
      check({parts[p], out}, "concat forward");
      exec_.launch(N * widths[p], ConcatPart{parts[p], out, widths[p], total, offset});
      offset += widths[p];
    }
  }
  void concat_backward(const float* dout, const std::int64_t* widths, int num_parts, float* const* dparts,
                       int N) override {
    const std::int64_t total = sum(widths, num_parts);
    std::int64_t offset = 0;
    for (int p = 0; p < num_parts; ++p) {
      if (dparts[p]) {
        check({dout, dparts[p]}, "concat backward");
        exec_.launch(N * widths[p], SplitPart{dout, dparts[p], widths[p], total, offset});
      }
      offset += widths[p];
    }
  }

  // Per-row losses and hits on the device, summed on the host in row order (float, as
  // kernels/cpu): N values cross the bus, and the mean matches the CPU's summation.
  float softmax_xent_forward(const float* logits, const std::int32_t* labels, float* probs, int N, int C,
                             int* correct) override {
    // Read with whatever was queued before it, which the next take_losses still returns.
    softmax_xent_queue(logits, labels, probs, N, C);
    std::vector<kernels::LossValue> values = take_losses();
    const kernels::LossValue v = values.back();
    values.pop_back();
    carried_ = std::move(values);
    if (correct) *correct = v.correct;
    return v.loss;
  }
  // Each queued loss writes its rows after the rows queued before it; take_losses reads
  // them all in one download.
  void softmax_xent_queue(const float* logits, const std::int32_t* labels, float* probs, int N, int C) override {
    check({logits, labels, probs}, "softmax cross-entropy");
    if (N <= 0 || !reserve_rows(queued_rows_ + N)) {
      queued_.push_back({queued_rows_, 0});
      return;
    }
    exec_.launch(N, SoftmaxXentRow{logits, labels, probs, row_loss_ + queued_rows_, row_correct_ + queued_rows_, C});
    queued_.push_back({queued_rows_, N});
    queued_rows_ += N;
  }
  std::vector<kernels::LossValue> take_losses() override {
    std::vector<kernels::LossValue> values = std::exchange(carried_, {});
    if (queued_.empty()) return values;
    host_loss_.resize(std::size_t(queued_rows_));
    host_correct_.resize(std::size_t(queued_rows_));
    if (queued_rows_ > 0) {
      exec_.download(host_loss_.data(), row_loss_, std::int64_t(queued_rows_) * 4);
      exec_.download(host_correct_.data(), row_correct_, std::int64_t(queued_rows_) * 4);
    }
    for (const auto& [first, rows] : queued_) values.push_back(row_mean(first, rows));
    queued_.clear();
    queued_rows_ = 0;
    return values;
  }
  void softmax_xent_backward(const float* probs, const std::int32_t* labels, float* dlogits, int N, int C,
                             float scale) override {
    check({probs, labels, dlogits}, "softmax cross-entropy backward");
    exec_.launch(std::int64_t(N) * C, SoftmaxXentBackward{probs, labels, dlogits, C, scale});
  }

  void sgd_step(float* w, const float* dw, std::int64_t n, float lr, float weight_decay) override {
    check({w, dw}, "sgd step");
    exec_.launch(n, SgdStep{w, dw, lr, weight_decay});
  }
  void momentum_step(float* w, const float* dw, float* v, std::int64_t n, float lr, float mu,
                     float weight_decay) override {
    check({w, dw, v}, "momentum step");
    exec_.launch(n, MomentumStep{w, dw, v, lr, mu, weight_decay});
  }
  void adam_step(float* w, const float* dw, float* m, float* v, std::int64_t n, const kernels::AdamParams& a) override {
    check({w, dw, m, v}, "adam step");
    const AdamStep body = adam_constants(AdamStep{w, dw, m, v, a.beta1, a.beta2, a.eps, a.weight_decay, 0, 0}, a.lr, a.t);
    exec_.launch(n, body);
  }

 private:
  // db[j] += the column sums of dy[rows, out]: partial sums of chunks of rows, then the
  // partials of each column in chunk order (launch_geometry.h says how many chunks).
  void bias_grad(const float* dy, float* db, std::int64_t rows, std::int64_t out) {
    const Chunking c = reduction_chunks(out, rows);
    float* partials = reserve_partials(out, c.chunks);
    if (!partials) return;
    exec_.launch(c.chunks * out, BiasGradPartial{dy, partials, rows, out, c.length});
    finish_reduction(partials, out, c.chunks, 1, out, db);  // partial c of column j at [c * out + j]
  }
  // db[k] += the sum of dy[n, k, :] over samples and pixels, in the same passes.
  void channel_bias_grad(const float* dy, float* db, std::int64_t samples, std::int64_t plane, std::int64_t channels) {
    const Chunking c = reduction_chunks(channels, samples * plane);
    float* partials = reserve_partials(channels, c.chunks);
    if (!partials) return;
    exec_.launch(c.chunks * channels, ChannelBiasGradPartial{dy, partials, samples, plane, channels, c.chunks});
    finish_reduction(partials, channels, c.chunks, c.chunks, 1, db);  // partial c of channel k at [k * chunks + c]
  }
  // Adds each output's `chunks` partials onto out[o] in chunk order: directly when they
  // are at most kMaxChunk (every shape with up to kChunk x kMaxChunk = 2048 values per
  // output: two passes in all), else first summed in groups (reduction_chunks again) into
  // the scratch's second half, alternating halves, until they are.
  void finish_reduction(float* in, std::int64_t outputs, std::int64_t chunks, std::int64_t output_stride,
                        std::int64_t chunk_stride, float* out) {
    float* other = nullptr;  // the half of the scratch not holding `in`, once there are two
    while (chunks > kMaxChunk) {
      const Chunking g = reduction_chunks(outputs, chunks);
      float* next = other ? other : in + outputs * chunks;
      exec_.launch(outputs * g.chunks, SumPartials{in, next, outputs, chunks, output_stride, chunk_stride, g.length,
                                                   g.chunks, false});
      other = in, in = next;
      chunks = g.chunks, output_stride = g.chunks, chunk_stride = 1;
    }
    exec_.launch(outputs, SumPartials{in, out, outputs, chunks, output_stride, chunk_stride, chunks, 1, true});
  }
  // The reductions' scratch for `chunks` partials per output, and room for the next
  // level's (reduction_chunks of them) when finish_reduction needs one. Work queued before
  // a regrowth may still read the old buffer: the executor's release waits for it
  // (CudaExec synchronizes its stream), as for every release.
  float* reserve_partials(std::int64_t outputs, std::int64_t chunks) {
    const std::int64_t next = chunks > kMaxChunk ? reduction_chunks(outputs, chunks).chunks : 0;
    const std::int64_t count = outputs * (chunks + next);
    if (count <= partials_count_) return partials_;
    exec_.release(partials_);
    partials_ = static_cast<float*>(exec_.allocate(count * std::int64_t(sizeof(float))));
    partials_count_ = partials_ ? count : 0;
    return partials_;
  }
  // Row-major C[M,N] = alpha op(A) op(B) + beta C through the column-major descriptor.
  void gemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, const float* B, float beta, float* C) {
    exec_.gemm(gemm_call(trans_a, trans_b, M, N, K), 1.0f, B, A, beta, C);
  }
  static DropoutForward dropout_body(const float* x, float* y, float* mask, double p, std::uint64_t seed,
                                     std::uint64_t offset) {
    const float keep_scale = p >= 1.0 ? 0.0f : float(1.0 / (1.0 - p));
    return DropoutForward{x, y, mask, p, keep_scale, seed, offset};
  }
  void check(std::initializer_list<const void*> pointers, const char* what) {
    for (const void* p : pointers)
      if (p) exec_.check(p, what);
  }
  // Room for N rows, keeping the queued rows before queued_rows_ (a rare device copy:
  // the rows only grow to the largest step's).
  bool reserve_rows(int N) {
    if (N <= rows_) return true;
    auto* loss = static_cast<float*>(exec_.allocate(std::int64_t(N) * 4));
    auto* hits = static_cast<std::int32_t*>(exec_.allocate(std::int64_t(N) * 4));
    if (loss && hits && queued_rows_ > 0) {
      exec_.copy(loss, row_loss_, std::int64_t(queued_rows_) * 4);
      exec_.copy(hits, row_correct_, std::int64_t(queued_rows_) * 4);
    }
    exec_.release(row_loss_);
    exec_.release(row_correct_);
    row_loss_ = loss;
    row_correct_ = hits;
    rows_ = row_loss_ && row_correct_ ? N : 0;
    return rows_ > 0;
  }
  // The mean of `rows` rows from `first`, summed in row order in float as kernels/cpu does.
  kernels::LossValue row_mean(int first, int rows) const {
    kernels::LossValue v;
    if (rows <= 0) return v;
    float total = 0.0f;
    for (int n = first; n < first + rows; ++n) {
      total += host_loss_[std::size_t(n)];
      v.correct += host_correct_[std::size_t(n)];
    }
    v.loss = total / float(rows);
    return v;
  }
  static ConvShape shape(const kernels::ConvDims& d) { return ConvShape{d.C, d.H, d.W, d.K, d.R, d.stride, d.pad}; }
  static std::int64_t spatial(const kernels::ConvDims& d) { return std::int64_t(d.out_h()) * d.out_w(); }
  static std::int64_t sum(const std::int64_t* widths, int n) {
    std::int64_t total = 0;
    for (int p = 0; p < n; ++p) total += widths[p];
    return total;
  }

  Exec exec_;
  const char* name_;
  float* row_loss_ = nullptr;
  std::int32_t* row_correct_ = nullptr;
  int rows_ = 0;
  int queued_rows_ = 0;                       // rows written by queued losses
  std::vector<std::pair<int, int>> queued_;   // each queued loss: first row, rows
  std::vector<kernels::LossValue> carried_;   // read by a waiting loss before their take
  std::int64_t library_workspace_ = 0;
  std::vector<std::pair<int, int>> graph_queued_;  // the captured losses' rows
  int graph_rows_ = 0;
  const float* graph_row_loss_ = nullptr;
  const float* graph_partials_ = nullptr;
  float* partials_ = nullptr;  // the reductions' scratch
  std::int64_t partials_count_ = 0;
  std::vector<float> host_loss_;
  std::vector<std::int32_t> host_correct_;
};

}  // namespace loom::cuda
