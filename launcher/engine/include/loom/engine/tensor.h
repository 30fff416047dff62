// Tensors in a kernel backend's memory. A Buffer owns an array in one backend's memory
// (host memory for the CPU backend, device memory for CUDA); a Tensor is a float Buffer
// with a batch size and a per-sample shape. Buffers are kept between steps and only
// grow, so the training step does not allocate once the first step has sized everything.
//
// Host code never dereferences data() (it may be a device address). It reads through
// host_read() and writes through host_write() + commit(): with a host-memory backend
// both are the buffer itself and commit() does nothing, so the CPU path copies nothing;
// otherwise they are a host mirror in the backend's staging memory (page-locked on CUDA,
// so commit() is an asynchronous copy), downloaded or uploaded. Code written this way runs
// unchanged on every backend. An upload from the mirror reads it when the device gets to
// it, so host_write first waits for the device (at the start of a step it is idle: the
// step before ended reading its loss back).
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "loom/core/plan.h"
#include "loom/kernels/backend.h"

namespace loom::engine {

// The backend of buffers that were never given one: the process's CPU backend.
kernels::Backend& default_backend();

template <class T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(kernels::Backend& backend) : backend_(&backend) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    swap(other);
    return *this;
  }
  ~Buffer() { release(); }
  // A buffer of n elements over memory another buffer owns (a parameter's slice of a
  // ParamArena): never released here, and it cannot grow past n.
  static Buffer view(kernels::Backend& backend, T* data, std::int64_t n) {
    Buffer b(backend);
    b.data_ = data;
    b.size_ = b.capacity_ = n;
    b.owns_ = false;
    return b;
  }

  kernels::Backend& backend() const { return backend_ ? *backend_ : default_backend(); }
  // Moves an empty buffer to `backend` (a non-empty one keeps its memory where it is).
  void bind(kernels::Backend& backend) {
    if (!data_) backend_ = &backend;
  }

  // Sets the size to n elements; grows the allocation when needed (contents are then lost).
  void resize(std::int64_t n) {
    if (n > capacity_) {
      if (!owns_) throw std::logic_error("a view of another buffer's memory cannot grow");
      release();
      data_ = static_cast<T*>(backend().allocate(n * std::int64_t(sizeof(T))));
      capacity_ = data_ ? n : 0;
    }
    size_ = n;
  }
  std::size_t size() const { return std::size_t(size_); }
  std::int64_t bytes() const { return size_ * std::int64_t(sizeof(T)); }
  // What the allocation holds (at least bytes(): buffers keep their largest size).
  std::int64_t capacity_bytes() const { return capacity_ * std::int64_t(sizeof(T)); }
  T* data() { return data_; }
  const T* data() const { return data_; }

  void fill(T value) {
    if constexpr (std::is_same_v<T, float>) {
      backend().fill(data_, value, size_);
    } else {
      std::fill_n(host_write(), size_, value);
      commit();
    }
  }
  // Host access (see the file comment).
  const T* host_read() const {
    if (host()) return data_;
    backend().download(mirror(), data_, bytes());
    return mirror_;
  }
  T* host_write() {
    if (host()) return data_;
    backend().synchronize();  // an upload queued earlier may still read the mirror
    return mirror();
  }
  void commit() {
    if (!host()) backend().upload(data_, mirror_, bytes());
  }
  std::vector<T> to_host() const {
    const T* p = host_read();
    return std::vector<T>(p, p + size_);
  }
  void assign(const T* values, std::int64_t n) {
    resize(n);
    std::copy_n(values, n, host_write());
    commit();
  }
  void assign(const std::vector<T>& values) { assign(values.data(), std::int64_t(values.size())); }

 private:
  bool host() const { return backend().host_memory(); }
  // The staging mirror, grown with the buffer's allocation.
  T* mirror() const {
    if (mirror_capacity_ < capacity_) {
      if (mirror_) backend().release_host(mirror_);
      mirror_ = static_cast<T*>(backend().allocate_host(capacity_ * std::int64_t(sizeof(T))));
      mirror_capacity_ = mirror_ ? capacity_ : 0;
    }
    return mirror_;
  }
  void release() {
    if (data_ && owns_) backend().release(data_);
    if (mirror_) backend().release_host(mirror_);
    data_ = nullptr;
    mirror_ = nullptr;
    size_ = capacity_ = mirror_capacity_ = 0;
    owns_ = true;
  }
  void swap(Buffer& other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
    std::swap(mirror_, other.mirror_);
    std::swap(mirror_capacity_, other.mirror_capacity_);
    std::swap(owns_, other.owns_);
  }

  kernels::Backend* backend_ = nullptr;
  T* data_ = nullptr;
  std::int64_t size_ = 0, capacity_ = 0;
  mutable T* mirror_ = nullptr;  // host copy for a device backend, in its staging memory
  mutable std::int64_t mirror_capacity_ = 0;
  bool owns_ = true;  // false: a view (see view())
};

struct Tensor {
  Buffer<float> data;
  std::int64_t batch = 0;
  Shape sample;

  Tensor() = default;
  explicit Tensor(kernels::Backend& backend) : data(backend) {}

  void resize(std::int64_t new_batch, const Shape& new_sample) {
    batch = new_batch;
    sample = new_sample;
    data.resize(new_batch * shape_elements(new_sample));
  }
  std::int64_t sample_size() const { return shape_elements(sample); }
  std::int64_t size() const { return batch * sample_size(); }
  float* ptr() { return data.data(); }
  const float* ptr() const { return data.data(); }
};

// A trainable tensor and its gradient (same size). Gradients accumulate until zeroed.
struct Param {
  std::string name;  // "fc1.weight"
  std::int32_t layer = -1;
  Buffer<float> value;
  Buffer<float> grad;
};

// Every parameter of a rank in one allocation and every gradient in another, each tensor
// at an offset rounded up to kParamAlignFloats (core/memory_layout.h: 256 bytes, the
// alignment cudaMalloc gives GEMMs); the Params' value and grad become views into them. One kernel launch then updates every
// parameter and one zeroes every gradient, on a GPU where a launch per tensor costs more
// than the small tensors' work. The gaps stay zero: every update leaves a zero weight
// with zero gradient and zero state at zero.
struct ParamArena {
  Buffer<float> values, grads;
  std::vector<std::int64_t> offsets;  // per parameter, in floats

  // Moves the values of `params` (all in `backend`) into the arena; gradients start at zero.
  static ParamArena pack(const std::vector<Param*>& params, kernels::Backend& backend);
  std::int64_t size() const { return std::int64_t(values.size()); }
  void zero_grads() { grads.fill(0.0f); }
};

}  // namespace loom::engine
