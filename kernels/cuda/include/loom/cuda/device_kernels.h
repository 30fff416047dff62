// The element-wise kernels on a CUDA device: each runs its body (element_kernels.h) with
// one thread per index on the given stream. Built only where CUDA is (loom_kernels_cuda).
// Every CUDA call is checked: a failure comes back as an Error naming the call, the file
// and line, and a hint, never as a silent wrong result.
#pragma once

#include <cstdint>
#include <string>

#include "loom/core/status.h"
#include "loom/cuda/element_kernels.h"

namespace loom::cuda {

// The device's count and name for a rank that wants one: an Unavailable error, with the
// CUDA error text and a hint, when there is no usable device or driver.
Expected<int> device_count();

// A device buffer of floats (or bytes reinterpreted), freed on destruction.
class DeviceBuffer {
 public:
  static Expected<DeviceBuffer> allocate(std::int64_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();
  void* get() const { return ptr_; }
  std::int64_t bytes() const { return bytes_; }
  Status upload(const void* host, std::int64_t bytes);
  Status download(void* host, std::int64_t bytes) const;

 private:
  DeviceBuffer() = default;
  void* ptr_ = nullptr;
  std::int64_t bytes_ = 0;
};

// Runs body(i) for i in [0, n) on the device (default stream) and waits for it.
template <class Body>
Status device_launch(std::int64_t n, const Body& body);

}  // namespace loom::cuda
