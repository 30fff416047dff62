// HostExec: BodyBackend's executor on the CPU (see host_body_backend.h).
#include "loom/cuda/host_body_backend.h"

#include <cblas.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "loom/cuda/body_backend.h"

namespace loom::cuda {
namespace {

// A stream on the host: one worker thread running queued operations in order, as a CUDA
// stream runs kernels and copies. wait() returns once everything queued has run.
class HostStream {
 public:
  explicit HostStream(int lag_us) : lag_(lag_us), worker_([this] { run(); }) {}
  ~HostStream() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_one();
    worker_.join();
  }
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  void enqueue(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    drained_.wait(lock, [this] { return tasks_.empty() && !busy_; });
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and everything queued has run
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      busy_ = true;
      lock.unlock();
      if (lag_.count() > 0) std::this_thread::sleep_for(lag_);
      task();
      lock.lock();
      busy_ = false;
      if (tasks_.empty()) drained_.notify_all();
    }
  }

  std::chrono::microseconds lag_;
  std::mutex mutex_;
  std::condition_variable ready_, drained_;
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false, stopping_ = false;
  std::thread worker_;  // last: started once everything it reads exists
};

class HostExec {
 public:
  explicit HostExec(const HostBodyOptions& options)
      : log_(options.log), stream_(options.asynchronous ? std::make_unique<HostStream>(options.lag_us) : nullptr) {}
  HostExec(HostExec&& other) noexcept = default;
  ~HostExec() {
    stream_.reset();  // runs what is queued before the memory it uses goes
    for (auto& [base, bytes] : blocks_) std::free(const_cast<char*>(base));
  }

  Status status() const { return status_; }
  bool host_memory() const { return false; }  // as on a GPU: host code must go through upload/download

  void* allocate(std::int64_t bytes) {
    if (capturing("allocate")) return nullptr;
    void* p = std::aligned_alloc(64, std::size_t((bytes + 63) / 64 * 64 + 64));
    if (!p) {
      fail("allocate " + std::to_string(bytes) + " bytes: out of host memory");
      return nullptr;
    }
    blocks_[static_cast<const char*>(p)] = bytes;
    in_use_ += bytes;
    return p;
  }
  void release(void* ptr) {
    if (!ptr || capturing("release")) return;
    synchronize();  // queued work may still use it, as CudaExec waits before cudaFree
    const auto found = blocks_.find(static_cast<const char*>(ptr));
    if (found == blocks_.end()) return fail("release of a pointer this backend did not allocate");
    in_use_ -= found->second;
    blocks_.erase(found);
    std::free(ptr);
  }
  // Staging memory is plain host memory outside the arena: a kernel handed it fails check().
  void* allocate_host(std::int64_t bytes) {
    if (capturing("allocate page-locked memory")) return nullptr;
    void* p = std::aligned_alloc(64, std::size_t((bytes + 63) / 64 * 64 + 64));
    if (p) staging_[static_cast<const char*>(p)] = bytes;
    return p;
  }
  void release_host(void* ptr) {
    if (!ptr || capturing("release staging memory")) return;
    synchronize();  // a queued upload may still read it
    staging_.erase(static_cast<const char*>(ptr));
    std::free(ptr);
  }
  // As cudaMemcpyAsync: from staging (page-locked) memory the copy reads `host` when the
  // stream reaches it, so the caller must leave it alone until then; from any other host
  // memory it is done before the call returns (CUDA stages pageable memory itself).
  void upload(void* dst, const void* host, std::int64_t bytes) {
    if (!is_staging(host, bytes)) {
      if (capturing("upload from memory that is not page-locked")) return;
      synchronize();
      std::memcpy(dst, host, std::size_t(bytes));
      return;
    }
    run([=] { std::memcpy(dst, host, std::size_t(bytes)); });
  }
  void download(void* host, const void* src, std::int64_t bytes) {
    if (capturing("download") || !status_.ok()) return;
    run([=] { std::memcpy(host, src, std::size_t(bytes)); });
    synchronize();
  }
  void copy(void* dst, const void* src, std::int64_t bytes) {
    run([=] { std::memmove(dst, src, std::size_t(bytes)); });
  }
  void synchronize() {
    if (capturing("synchronize")) return;
    if (stream_) stream_->wait();
  }
  std::int64_t bytes_in_use() const { return in_use_; }
  // The host clock when the stream reaches the stamp: at once when synchronous. Slots are
  // kept (a deque, never shrunk), so a queued or captured stamp's slot stays where it is.
  std::int32_t stamp() {
    if (stamps_used_ == stamps_.size()) stamps_.push_back(0);
    std::int64_t* slot = &stamps_[stamps_used_];
    run([slot] { *slot = kernels::host_now_ns(); });
    return std::int32_t(stamps_used_++);
  }
  std::vector<std::int64_t> resolve_stamps() {
    synchronize();
    std::vector<std::int64_t> times(stamps_.begin(), stamps_.begin() + std::ptrdiff_t(stamps_used_));
    stamps_used_ = 0;
    return times;
  }

  // Capture records the tasks instead of running them; replay runs the record. As on a
  // GPU, waiting, allocating or releasing in a capture fails it, and a replay must start
  // where the capture started among the stamps (their slots are part of the record).
  bool capture_begin() {
    if (!status_.ok() || capturing_) return false;
    capturing_ = true;
    capture_error_.clear();
    recorded_.clear();
    capture_first_stamp_ = stamps_used_;
    return true;
  }
  Status capture_end() {
    capturing_ = false;
    const std::size_t captured_stamps = stamps_used_ - capture_first_stamp_;
    stamps_used_ = capture_first_stamp_;  // nothing ran: the replay takes them
    if (!capture_error_.empty()) {
      recorded_.clear();
      return make_error(ErrorCode::Internal, "cuda-bodies-on-host: capture failed: " + capture_error_);
    }
    graph_ = std::move(recorded_);
    graph_stamps_ = captured_stamps;
    graph_first_stamp_ = capture_first_stamp_;
    return {};
  }
  void replay() {
    if (!status_.ok()) return;
    if (stamps_used_ != graph_first_stamp_) return fail("a replay must start at the stamp its capture started at");
    for (const auto& task : graph_) run(task);
    stamps_used_ += graph_stamps_;
  }

  // The grid CudaExec would launch is recorded (launch_geometry.h); host_launch runs the
  // body for every index of it that is below n, as the device's bounds check does.
  template <class Body>
  void launch(std::int64_t n, const Body& body) {
    if (!status_.ok() || n <= 0) return;
    record_launch(log_, body, n);
    run([n, body] { host_launch(n, body); });
  }
  // What CudaExec hands to cublasSgemm, handed to column-major CBLAS.
  void gemm(const GemmCall& c, float alpha, const float* first, const float* second, float beta, float* C) {
    if (!status_.ok() || c.m <= 0 || c.n <= 0) return;
    run([=] {
      cblas_sgemm(CblasColMajor, c.trans_first ? CblasTrans : CblasNoTrans, c.trans_second ? CblasTrans : CblasNoTrans,
                  c.m, c.n, c.k, alpha, first, c.ld_first, second, c.ld_second, beta, C, c.ldc);
    });
  }
  // A pointer inside none of this arena's blocks is a host pointer that reached a
  // "device" operation: on a GPU, an illegal address.
  void check(const void* p, const char* what) {
    const auto* at = static_cast<const char*>(p);
    auto after = blocks_.upper_bound(at);
    if (after != blocks_.begin()) {
      const auto& [base, bytes] = *std::prev(after);
      if (at < base + bytes || (bytes == 0 && at == base)) return;
    }
    fail(std::string(what) + ": a pointer outside this backend's memory (a host buffer passed to the device path)");
  }

  void fail(std::string message) {
    if (status_.ok()) status_ = make_error(ErrorCode::Internal, "cuda-bodies-on-host: " + std::move(message));
  }

 private:
  bool is_staging(const void* host, std::int64_t bytes) const {
    const auto* at = static_cast<const char*>(host);
    auto after = staging_.upper_bound(at);
    if (after == staging_.begin()) return false;
    const auto& [base, size] = *std::prev(after);
    return at + bytes <= base + size;
  }
  // Recorded while capturing; now, or on the stream in order, otherwise.
  template <class Task>
  void run(Task&& task) {
    if (capturing_) recorded_.emplace_back(std::forward<Task>(task));
    else if (stream_) stream_->enqueue(std::forward<Task>(task));
    else task();
  }
  // True (and the capture failed) when `what` happens inside a capture.
  bool capturing(const char* what) {
    if (!capturing_) return false;
    if (capture_error_.empty()) capture_error_ = std::string(what) + " inside a capture";
    return true;
  }

  std::map<const char*, std::int64_t> blocks_;
  std::map<const char*, std::int64_t> staging_;  // allocate_host's blocks (page-locked on a GPU)
  std::deque<std::int64_t> stamps_;
  std::size_t stamps_used_ = 0;
  bool capturing_ = false;
  std::string capture_error_;
  std::vector<std::function<void()>> recorded_, graph_;
  std::size_t capture_first_stamp_ = 0, graph_first_stamp_ = 0, graph_stamps_ = 0;
  std::int64_t in_use_ = 0;
  LaunchLog* log_ = nullptr;
  Status status_;
  std::unique_ptr<HostStream> stream_;  // null: synchronous
};

}  // namespace

std::unique_ptr<kernels::Backend> make_host_body_backend(HostBodyOptions options) {
  return std::make_unique<BodyBackend<HostExec>>(HostExec(options), "cuda-bodies-on-host");
}

}  // namespace loom::cuda
