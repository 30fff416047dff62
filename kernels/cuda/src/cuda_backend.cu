// CudaExec: BodyBackend's executor on a GPU (cuda_backend.h). Work is queued on the rank's
// stream; errors are sticky (the first failed call, with its file and line, stays in
// status() and later work is skipped), and surface where the engine checks once a step.
#include "loom/cuda/cuda_backend.h"

#include <cublas_v2.h>

#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda_check.cuh"
#include "loom/cuda/body_backend.h"
#include "loom/cuda/stamp_clock.h"

namespace loom::cuda {
namespace {

using detail::cuda_error;

Error cublas_error(const char* call, const char* file, int line, cublasStatus_t s) {
  return cuda_error(call, file, line, std::string("cuBLAS ") + cublasGetStatusName(s) + " " + cublasGetStatusString(s));
}

// Records the first failure of a call and evaluates to whether it succeeded.
#define LOOM_CUDA_RECORD(call) record((call), #call, __FILE__, __LINE__)

class CudaExec {
 public:
  CudaExec(cudaStream_t stream, cublasHandle_t blas, LaunchLog* log) : stream_(stream), blas_(blas), log_(log) {}
  CudaExec(CudaExec&& other) noexcept
      : stream_(std::exchange(other.stream_, nullptr)),
        blas_(std::exchange(other.blas_, nullptr)),
        log_(other.log_),
        sizes_(std::move(other.sizes_)),
        in_use_(other.in_use_),
        stamps_(std::move(other.stamps_)),
        anchor_(std::exchange(other.anchor_, nullptr)),
        anchor_taken_(std::exchange(other.anchor_taken_, false)),
        anchor_before_(other.anchor_before_),
        anchor_after_(other.anchor_after_),
        stamps_used_(other.stamps_used_),
        graph_(std::exchange(other.graph_, nullptr)),
        capturing_(other.capturing_),
        capture_error_(std::move(other.capture_error_)),
        capture_first_stamp_(other.capture_first_stamp_),
        graph_first_stamp_(other.graph_first_stamp_),
        graph_stamps_(other.graph_stamps_),
        status_(std::move(other.status_)) {}
  CudaExec& operator=(CudaExec&&) = delete;
  ~CudaExec() {
    if (stream_) (void)cudaStreamSynchronize(stream_);
    for (auto& [ptr, bytes] : sizes_) (void)cudaFree(ptr);
    for (cudaEvent_t e : stamps_) (void)cudaEventDestroy(e);
    if (anchor_) (void)cudaEventDestroy(anchor_);
    if (graph_) (void)cudaGraphExecDestroy(graph_);
    if (blas_) (void)cublasDestroy(blas_);
    if (stream_) (void)cudaStreamDestroy(stream_);
  }

  Status status() const { return status_; }
  bool host_memory() const { return false; }

  void* allocate(std::int64_t bytes) {
    void* p = nullptr;
    if (refused_in_capture("allocate")) return nullptr;
    if (!ok() || !LOOM_CUDA_RECORD(cudaMalloc(&p, std::size_t(bytes > 0 ? bytes : 1)))) return nullptr;
    sizes_[p] = bytes;
    in_use_ += bytes;
    return p;
  }
  void release(void* ptr) {
    if (refused_in_capture("release")) return;
    const auto found = sizes_.find(ptr);
    if (found == sizes_.end()) return;
    in_use_ -= found->second;
    sizes_.erase(found);
    // After the stream's queued work, which may still read it.
    (void)cudaStreamSynchronize(stream_);
    (void)cudaFree(ptr);
  }
  // Page-locked: uploads from it are DMA, asynchronous to the host.
  void* allocate_host(std::int64_t bytes) {
    void* p = nullptr;
    if (refused_in_capture("allocate page-locked memory")) return nullptr;
    if (!ok() || !LOOM_CUDA_RECORD(cudaMallocHost(&p, std::size_t(bytes > 0 ? bytes : 1)))) return nullptr;
    return p;
  }
  void release_host(void* ptr) {
    if (!ptr || refused_in_capture("release page-locked memory")) return;
    (void)cudaStreamSynchronize(stream_);  // a queued upload may still read it
    (void)cudaFreeHost(ptr);
  }
  void upload(void* dst, const void* host, std::int64_t bytes) {
    if (ok()) LOOM_CUDA_RECORD(cudaMemcpyAsync(dst, host, std::size_t(bytes), cudaMemcpyHostToDevice, stream_));
  }
  void download(void* host, const void* src, std::int64_t bytes) {
    if (refused_in_capture("download")) return;
    if (ok() && LOOM_CUDA_RECORD(cudaMemcpyAsync(host, src, std::size_t(bytes), cudaMemcpyDeviceToHost, stream_)))
      LOOM_CUDA_RECORD(cudaStreamSynchronize(stream_));
  }
  void copy(void* dst, const void* src, std::int64_t bytes) {
    if (ok()) LOOM_CUDA_RECORD(cudaMemcpyAsync(dst, src, std::size_t(bytes), cudaMemcpyDeviceToDevice, stream_));
  }
  void synchronize() {
    if (refused_in_capture("synchronize")) return;
    if (ok()) LOOM_CUDA_RECORD(cudaStreamSynchronize(stream_));
  }
  std::int64_t bytes_in_use() const { return in_use_; }

  // One event per stamp, reused after each resolve (stamp_clock.h maps them to the host).
  std::int32_t stamp() {
    const std::size_t index = stamps_used_++;
    if (index == stamps_.size()) {
      cudaEvent_t e = nullptr;
      if (ok()) LOOM_CUDA_RECORD(cudaEventCreate(&e));
      stamps_.push_back(e);
    }
    // Inside a capture the record becomes a node of the graph that every replay runs.
    if (ok() && stamps_[index])
      LOOM_CUDA_RECORD(capturing_ ? cudaEventRecordWithFlags(stamps_[index], stream_, cudaEventRecordExternal)
                                  : cudaEventRecord(stamps_[index], stream_));
    return std::int32_t(index);
  }

  // Stream capture into a CUDA graph. Thread-local mode: another thread's CUDA calls (an
  // NCCL progress thread) cannot break it. A failed capture is not sticky: the error is
  // returned, the stream leaves capture mode, and the caller runs the step eagerly.
  bool capture_begin() {
    if (!ok() || capturing_) return false;
    if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    capturing_ = true;
    capture_error_.clear();
    capture_first_stamp_ = stamps_used_;
    return true;
  }
  // What went wrong inside the capture (a refused call, a failed launch) fails the
  // capture, not the backend: the sticky status is put back as it was before (ok), the
  // stream has left capture mode, and the caller runs the step eagerly.
  Status capture_end() {
    capturing_ = false;
    const std::size_t captured_stamps = stamps_used_ - capture_first_stamp_;
    stamps_used_ = capture_first_stamp_;  // nothing ran: the replay records them
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(stream_, &graph);
    cudaGraphExec_t exec = nullptr;
    const bool clean = e == cudaSuccess && status_.ok() && capture_error_.empty();
    if (clean) e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) (void)cudaGraphDestroy(graph);
    if (!clean || e != cudaSuccess) {
      (void)cudaGetLastError();  // no error of the capture may reach a later launch's check
      if (exec) (void)cudaGraphExecDestroy(exec);
      Error why = !capture_error_.empty() ? make_error(ErrorCode::Unavailable, "cuda: " + capture_error_)
                  : !status_.ok()        ? status_.error()
                                         : cuda_error("capturing the step (cudaStreamEndCapture, cudaGraphInstantiate)",
                                                      __FILE__, __LINE__, e);
      status_ = Status();
      return why;
    }
    if (graph_) (void)cudaGraphExecDestroy(graph_);
    graph_ = exec;
    graph_stamps_ = captured_stamps;
    graph_first_stamp_ = capture_first_stamp_;
    return {};
  }
  void replay() {
    if (!ok() || !graph_) return;
    if (stamps_used_ != graph_first_stamp_) return fail("a replay must start at the stamp its capture started at");
    if (LOOM_CUDA_RECORD(cudaGraphLaunch(graph_, stream_))) stamps_used_ += graph_stamps_;
  }
  void fail(const std::string& what) { fail(make_error(ErrorCode::Internal, "cuda: " + what)); }

 private:
  // Inside a capture, `what` would wait for the device, allocate or free: calls CUDA
  // refuses there (or that would break the capture). Refused here without calling CUDA;
  // the capture then fails with the reason.
  bool refused_in_capture(const char* what) {
    if (!capturing_) return false;
    if (capture_error_.empty()) capture_error_ = std::string(what) + " inside a capture";
    return true;
  }

 public:
  // The step's stamps on the host clock (stamp_clock.h). The anchor is kept across steps:
  // taking one costs a record and a wait for the device, once a second rather than once a
  // step (the tracing cost of a short GPU step). A stamp after the anchor is that many
  // milliseconds later on the host; the very first stamps, before any anchor, are measured
  // back from the one taken for them. Re-taken when a second old: cudaEventElapsedTime's
  // float milliseconds keep 61 ns up to 1000 ms, and the two clocks drift apart by parts
  // per million.
  std::vector<std::int64_t> resolve_stamps() {
    if (refused_in_capture("resolve stamps")) return {};
    synchronize();
    std::vector<std::int64_t> times(stamps_used_, kernels::host_now_ns());  // what a failure leaves
    const bool anchor_first = anchor_taken_;  // the anchor was recorded before these stamps
    if (stamps_used_ > 0 && ok() && (anchor_first || take_anchor())) {
      for (std::size_t i = 0; i < stamps_used_; ++i) {
        float ms = 0;
        if (!stamps_[i]) continue;
        if (anchor_first && LOOM_CUDA_RECORD(cudaEventElapsedTime(&ms, anchor_, stamps_[i])))
          times[i] = stamp_host_ns(anchor_before_, anchor_after_, -ms);
        else if (!anchor_first && LOOM_CUDA_RECORD(cudaEventElapsedTime(&ms, stamps_[i], anchor_)))
          times[i] = stamp_host_ns(anchor_before_, anchor_after_, ms);
      }
    }
    if (ok() && kernels::host_now_ns() - anchor_after_ > kAnchorAgeNs) (void)take_anchor();  // for the stamps to come
    stamps_used_ = 0;
    return times;
  }

 private:
  static constexpr std::int64_t kAnchorAgeNs = 1'000'000'000;
  // Records the anchor on the idle stream between two host clock reads.
  bool take_anchor() {
    anchor_taken_ = false;
    if (!anchor_ && !LOOM_CUDA_RECORD(cudaEventCreate(&anchor_))) return false;
    anchor_before_ = kernels::host_now_ns();
    if (!LOOM_CUDA_RECORD(cudaEventRecord(anchor_, stream_)) || !LOOM_CUDA_RECORD(cudaEventSynchronize(anchor_)))
      return false;
    anchor_after_ = kernels::host_now_ns();
    anchor_taken_ = true;
    return true;
  }

 public:
  template <class Body>
  void launch(std::int64_t n, const Body& body) {
    if (!ok() || n <= 0) return;
    record_launch(log_, body, n);
    detail::run_body<<<detail::grid_for(n), kBlock, 0, stream_>>>(body, n);
    LOOM_CUDA_RECORD(cudaGetLastError());
  }
  void gemm(const GemmCall& c, float alpha, const float* first, const float* second, float beta, float* C) {
    if (!ok() || c.m <= 0 || c.n <= 0) return;
    const cublasStatus_t s = cublasSgemm(blas_, c.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                                         c.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, c.m, c.n, c.k, &alpha, first,
                                         c.ld_first, second, c.ld_second, &beta, C, c.ldc);
    if (s != CUBLAS_STATUS_SUCCESS) fail(cublas_error("cublasSgemm", __FILE__, __LINE__, s));
  }
  void check(const void*, const char*) {}  // the device itself faults on a bad address

 private:
  bool ok() const { return status_.ok(); }
  bool record(cudaError_t e, const char* call, const char* file, int line) {
    if (e == cudaSuccess) return true;
    fail(cuda_error(call, file, line, e));
    return false;
  }
  void fail(Error e) {
    if (status_.ok()) status_ = std::move(e);
  }

  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  LaunchLog* log_ = nullptr;
  std::unordered_map<void*, std::int64_t> sizes_;
  std::int64_t in_use_ = 0;
  std::vector<cudaEvent_t> stamps_;
  cudaEvent_t anchor_ = nullptr;
  bool anchor_taken_ = false;  // anchor_ passed the device between the two host reads below
  std::int64_t anchor_before_ = 0, anchor_after_ = 0;
  std::size_t stamps_used_ = 0;
  cudaGraphExec_t graph_ = nullptr;
  bool capturing_ = false;
  std::string capture_error_;
  std::size_t capture_first_stamp_ = 0, graph_first_stamp_ = 0, graph_stamps_ = 0;
  Status status_;
};

#define LOOM_CUBLAS_CHECK(call)                                                              \
  do {                                                                                       \
    const cublasStatus_t loom_s_ = (call);                                                   \
    if (loom_s_ != CUBLAS_STATUS_SUCCESS) return cublas_error(#call, __FILE__, __LINE__, loom_s_); \
  } while (0)

}  // namespace

Expected<std::unique_ptr<kernels::Backend>> make_cuda_backend(const CudaOptions& options) {
  LOOM_CUDA_CHECK(cudaSetDevice(options.device));
  cudaStream_t stream = nullptr;
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t blas = nullptr;
  const cublasStatus_t created = cublasCreate(&blas);
  if (created != CUBLAS_STATUS_SUCCESS) {
    (void)cudaStreamDestroy(stream);
    return cublas_error("cublasCreate(&blas)", __FILE__, __LINE__, created);
  }
  // The exec owns both from here, so every later failure releases them.
  auto backend = std::make_unique<BodyBackend<CudaExec>>(CudaExec(stream, blas, options.launch_log), "cuda");
  LOOM_CUBLAS_CHECK(cublasSetStream(blas, stream));
  LOOM_CUBLAS_CHECK(cublasSetMathMode(blas, options.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  // A workspace of cuBLAS's own from the start: it would otherwise allocate one at its
  // first GEMM on the stream, which must not happen inside a captured step.
  constexpr std::int64_t kBlasWorkspace = std::int64_t(32) << 20;
  void* workspace = backend->allocate_library_workspace(kBlasWorkspace);
  if (!workspace) return backend->status().error();
  LOOM_CUBLAS_CHECK(cublasSetWorkspace(blas, workspace, std::size_t(kBlasWorkspace)));
  return std::unique_ptr<kernels::Backend>(std::move(backend));
}

Expected<CudaDeviceFacts> query_cuda_device(int device) {
  cudaDeviceProp prop{};
  LOOM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  CudaDeviceFacts facts;
  facts.name = prop.name;
  facts.memory_bytes = std::int64_t(prop.totalGlobalMem);
  facts.compute_major = prop.major;
  facts.compute_minor = prop.minor;
  LOOM_CUDA_CHECK(cudaDriverGetVersion(&facts.driver_version));
  LOOM_CUDA_CHECK(cudaRuntimeGetVersion(&facts.runtime_version));
  return facts;
}

}  // namespace loom::cuda
