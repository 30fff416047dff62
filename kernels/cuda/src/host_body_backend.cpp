// HostExec: BodyBackend's executor on the CPU (see host_body_backend.h).
#include "loom/cuda/host_body_backend.h"

#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "loom/cuda/body_backend.h"

namespace loom::cuda {
namespace {

class HostExec {
 public:
  explicit HostExec(LaunchLog* log) : log_(log) {}
  HostExec(HostExec&& other) noexcept = default;
  ~HostExec() {
    for (auto& [base, bytes] : blocks_) std::free(const_cast<char*>(base));
  }

  Status status() const { return status_; }
  bool host_memory() const { return false; }  // as on a GPU: host code must go through upload/download

  void* allocate(std::int64_t bytes) {
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
    if (!ptr) return;
    const auto found = blocks_.find(static_cast<const char*>(ptr));
    if (found == blocks_.end()) return fail("release of a pointer this backend did not allocate");
    in_use_ -= found->second;
    blocks_.erase(found);
    std::free(ptr);
  }
  // Staging memory is plain host memory outside the arena: a kernel handed it fails check().
  void* allocate_host(std::int64_t bytes) { return std::aligned_alloc(64, std::size_t((bytes + 63) / 64 * 64 + 64)); }
  void release_host(void* ptr) { std::free(ptr); }
  void upload(void* dst, const void* host, std::int64_t bytes) { std::memcpy(dst, host, std::size_t(bytes)); }
  void download(void* host, const void* src, std::int64_t bytes) { std::memcpy(host, src, std::size_t(bytes)); }
  void copy(void* dst, const void* src, std::int64_t bytes) { std::memmove(dst, src, std::size_t(bytes)); }
  void synchronize() {}
  std::int64_t bytes_in_use() const { return in_use_; }
  // The bodies have run when their call returns: a stamp is the host clock.
  std::int32_t stamp() {
    stamps_.push_back(kernels::host_now_ns());
    return std::int32_t(stamps_.size() - 1);
  }
  std::vector<std::int64_t> resolve_stamps() { return std::exchange(stamps_, {}); }

  // The grid CudaExec would launch is recorded (launch_geometry.h); host_launch runs the
  // body for every index of it that is below n, as the device's bounds check does.
  template <class Body>
  void launch(std::int64_t n, const Body& body) {
    if (!status_.ok() || n <= 0) return;
    record_launch(log_, body, n);
    host_launch(n, body);
  }
  // What CudaExec hands to cublasSgemm, handed to column-major CBLAS.
  void gemm(const GemmCall& c, float alpha, const float* first, const float* second, float beta, float* C) {
    if (!status_.ok() || c.m <= 0 || c.n <= 0) return;
    cblas_sgemm(CblasColMajor, c.trans_first ? CblasTrans : CblasNoTrans, c.trans_second ? CblasTrans : CblasNoTrans,
                c.m, c.n, c.k, alpha, first, c.ld_first, second, c.ld_second, beta, C, c.ldc);
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

 private:
  void fail(std::string message) {
    if (status_.ok()) status_ = make_error(ErrorCode::Internal, "cuda-bodies-on-host: " + std::move(message));
  }

  std::map<const char*, std::int64_t> blocks_;
  std::vector<std::int64_t> stamps_;
  std::int64_t in_use_ = 0;
  LaunchLog* log_ = nullptr;
  Status status_;
};

}  // namespace

std::unique_ptr<kernels::Backend> make_host_body_backend(LaunchLog* log) {
  return std::make_unique<BodyBackend<HostExec>>(HostExec(log), "cuda-bodies-on-host");
}

}  // namespace loom::cuda
