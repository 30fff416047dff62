// The kernel backend interface: every operation the training engine runs on a layer's
// data, the loss and the optimizers, over raw pointers into the backend's own memory
// (host memory for the CPU backend, device memory for CUDA). The engine's modules,
// trainers and optimizers call only this, so they never branch on the device.
//
// Implementations: kernels/cpu (CpuBackend, today's CBLAS kernels) and kernels/cuda
// (BodyBackend: the CUDA kernel bodies with cuBLAS on a GPU, or with CBLAS on the host
// for tests). Conventions are kernels/cpu's: row-major, batch-first NCHW, linear weights
// [out, in], backward ACCUMULATES parameter gradients and OVERWRITES input gradients, a
// null dx skips it.
//
// Errors are sticky, as CUDA's are: a failed allocation or kernel sets status() and the
// backend skips later work until the caller looks (the trainer checks once per step and
// ends the rank with the message). Plain C++17 so nvcc can compile implementations.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "loom/core/status.h"

namespace loom::kernels {

enum class Activation { Relu, Tanh, Gelu };

struct ConvDims {
  int N = 0, C = 0, H = 0, W = 0;  // input
  int K = 0;                        // output channels
  int R = 0;                        // square kernel
  int stride = 1, pad = 0;
  int out_h() const { return (H + 2 * pad - R) / stride + 1; }
  int out_w() const { return (W + 2 * pad - R) / stride + 1; }
};

struct PoolDims {
  int N = 0, C = 0, H = 0, W = 0;
  int kernel = 2, stride = 2;
  int out_h() const { return (H - kernel) / stride + 1; }
  int out_w() const { return (W - kernel) / stride + 1; }
};

// A loss read back: the mean over its rows and how many rows were right.
struct LossValue {
  float loss = 0;
  int correct = 0;
};

struct AdamParams {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  std::int64_t t = 1;  // 1-based step for bias correction
};

// Steady-clock nanoseconds, the same clock as trace::now_ns() (the time base of every
// traced event), which this C++17 header cannot include.
inline std::int64_t host_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "cuda", or "cuda-bodies-on-host" (the CUDA path's logic run on the CPU).
  virtual const char* name() const = 0;
  // True when the backend's pointers may be read and written by host code directly.
  virtual bool host_memory() const = 0;
  // The first error since creation (sticky); later work is skipped until the owner ends.
  virtual Status status() const = 0;

  // ---- memory (bytes; allocations are suitably aligned for float and int32) ------------
  virtual void* allocate(std::int64_t bytes) = 0;  // nullptr (and status() set) on failure
  virtual void release(void* ptr) = 0;
  virtual void upload(void* dst, const void* host, std::int64_t bytes) = 0;
  virtual void download(void* host, const void* src, std::int64_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::int64_t bytes) = 0;
  virtual void fill(float* x, float value, std::int64_t n) = 0;
  virtual void accumulate(float* y, const float* x, std::int64_t n) = 0;  // y += x
  // Host memory for staging transfers: page-locked on CUDA, so an upload from it is an
  // asynchronous DMA the host does not wait for; ordinary memory elsewhere. Never a kernel
  // operand.
  virtual void* allocate_host(std::int64_t bytes) = 0;
  virtual void release_host(void* ptr) = 0;
  // Waits for all queued work (a no-op on the CPU).
  virtual void synchronize() = 0;
  // Bytes currently allocated through this backend (device memory in use).
  virtual std::int64_t bytes_in_use() const = 0;
  // Of those, what the backend keeps for its own libraries (cuBLAS's workspace).
  virtual std::int64_t library_workspace_bytes() const { return 0; }

  // ---- timing (tracing a device without stopping it) ------------------------------------
  // stamp() marks the end of the work queued so far and returns the stamp's index (0, 1,
  // ...). resolve_stamps() waits for the device and returns, in order, the moment each
  // stamp's work had run, on the host's steady clock (host_now_ns), then forgets them. A
  // CUDA backend records an event per stamp and maps event times onto the host clock
  // through one event recorded while the host reads its clock; where work is done when
  // its call returns (the CPU, the bodies on the host), a stamp is the host clock read.
  virtual std::int32_t stamp() = 0;
  virtual std::vector<std::int64_t> resolve_stamps() = 0;

  // ---- captured work (a training step recorded once, replayed every step) ---------------
  // Between capture_begin() and capture_end() nothing runs: what is queued is recorded, with
  // the pointers and arguments it had, and replay() runs the record as a whole (a CUDA
  // graph: one launch instead of one per kernel). Stamps and queued losses inside it come
  // back at each replay as they were captured. Nothing in a capture may wait for the
  // device (download, synchronize, take_losses) or allocate or release. capture_begin()
  // is false where the backend cannot capture (the default); capture_end() says why a
  // capture failed, and then nothing is recorded and the caller runs the work itself.
  virtual bool capture_begin() { return false; }
  virtual Status capture_end() { return make_error(ErrorCode::Unavailable, "this backend does not capture work"); }
  virtual void replay() {}

  // ---- layers -----------------------------------------------------------------------
  // y[N,out] = x[N,in] W[out,in]^T + b (b may be null)
  virtual void linear_forward(const float* x, const float* W, const float* b, float* y, int N, int in, int out) = 0;
  virtual void linear_backward(const float* x, const float* W, const float* dy, float* dx, float* dW, float* db,
                               int N, int in, int out) = 0;
  virtual void activation_forward(Activation a, const float* x, float* y, std::int64_t n) = 0;
  // Relu and Gelu read x, Tanh reads y.
  virtual void activation_backward(Activation a, const float* x, const float* y, const float* dy, float* dx,
                                   std::int64_t n) = 0;
  // Inverted dropout with the counter-based generator keyed by (seed, offset + i): every
  // backend draws the same mask.
  virtual void dropout_forward(const float* x, float* y, float* mask, std::int64_t n, double p, std::uint64_t seed,
                               std::uint64_t offset) = 0;
  // The same with the offset read when the work runs: *first_sample (in device memory) x
  // sample_size. A captured step replays with each step's masks: the host writes the
  // batch's first sample before each replay, as it writes the batch.
  virtual void dropout_forward_keyed(const float* x, float* y, float* mask, std::int64_t n, double p, std::uint64_t seed,
                                     const std::uint64_t* first_sample, std::uint64_t sample_size) = 0;
  virtual void dropout_backward(const float* mask, const float* dy, float* dx, std::int64_t n) = 0;
  // Scratch floats conv2d needs for these dims (its N included).
  virtual std::int64_t conv2d_workspace(const ConvDims& d) const = 0;
  virtual void conv2d_forward(const float* x, const float* W, const float* b, float* y, const ConvDims& d,
                              float* workspace) = 0;
  virtual void conv2d_backward(const float* x, const float* W, const float* dy, float* dx, float* dW, float* db,
                               const ConvDims& d, float* workspace) = 0;
  virtual void maxpool2d_forward(const float* x, float* y, std::int32_t* argmax, const PoolDims& d) = 0;
  virtual void maxpool2d_backward(const std::int32_t* argmax, const float* dy, float* dx, const PoolDims& d) = 0;
  // parts / dparts are host arrays of this backend's pointers; a null dpart is skipped.
  virtual void concat_forward(const float* const* parts, const std::int64_t* widths, int num_parts, float* out,
                              int N) = 0;
  virtual void concat_backward(const float* dout, const std::int64_t* widths, int num_parts, float* const* dparts,
                               int N) = 0;

  // ---- loss ---------------------------------------------------------------------------
  // Mean loss over the N rows (summed in row order in float, as kernels/cpu); `correct`
  // (may be null) gets the rows whose argmax is the label. Waits for the result.
  virtual float softmax_xent_forward(const float* logits, const std::int32_t* labels, float* probs, int N, int C,
                                     int* correct) = 0;
  virtual void softmax_xent_backward(const float* probs, const std::int32_t* labels, float* dlogits, int N, int C,
                                     float scale) = 0;
  // The same loss without waiting for it: the work is queued, and take_losses() returns
  // the mean loss and correct count of every loss queued since the last take, in queue
  // order, waiting for the device once. A training step reads its losses at its end, so
  // the host queues the backward pass while the device still computes the forward one.
  // By default the loss is computed at once (work that is done when its call returns).
  virtual void softmax_xent_queue(const float* logits, const std::int32_t* labels, float* probs, int N, int C) {
    LossValue v;
    v.loss = softmax_xent_forward(logits, labels, probs, N, C, &v.correct);
    std::lock_guard lock(queued_mutex_);  // the shared CPU backend serves ranks that are threads
    queued_losses_.push_back(v);
  }
  virtual std::vector<LossValue> take_losses() {
    std::lock_guard lock(queued_mutex_);
    return std::exchange(queued_losses_, {});
  }

  // ---- optimizers (state zero-initialised by the caller) --------------------------------
  virtual void sgd_step(float* w, const float* dw, std::int64_t n, float lr, float weight_decay) = 0;
  virtual void momentum_step(float* w, const float* dw, float* v, std::int64_t n, float lr, float mu,
                             float weight_decay) = 0;
  virtual void adam_step(float* w, const float* dw, float* m, float* v, std::int64_t n, const AdamParams& a) = 0;

 private:
  std::mutex queued_mutex_;
  std::vector<LossValue> queued_losses_;
};

}  // namespace loom::kernels
