// The GPU launcher (device_kernels.h): a grid of kBlock-thread blocks over the indices, each
// thread running the body of its index, instantiated for every body in element_kernels.h.
#include "loom/cuda/device_kernels.h"

#include <utility>

#include "cuda_check.cuh"

namespace loom::cuda {

using detail::cuda_error;
using detail::run_body;

Expected<int> device_count() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return cuda_error("cudaGetDeviceCount(&count)", __FILE__, __LINE__, e);
  return count;
}

Expected<DeviceBuffer> DeviceBuffer::allocate(std::int64_t bytes) {
  DeviceBuffer b;
  const cudaError_t e = cudaMalloc(&b.ptr_, std::size_t(bytes));
  if (e != cudaSuccess) return cuda_error("cudaMalloc(&ptr, bytes)", __FILE__, __LINE__, e);
  b.bytes_ = bytes;
  // Constructed explicitly: nvcc's front end does not move `b` into Expected's converting
  // constructor by itself (a bare `return b;` asks for the deleted copy), and the host
  // compiler calls `return std::move(b);` a redundant move.
  return Expected<DeviceBuffer>(std::move(b));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  std::swap(ptr_, other.ptr_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) (void)cudaFree(ptr_);
}

Status DeviceBuffer::upload(const void* host, std::int64_t bytes) {
  LOOM_CUDA_CHECK(cudaMemcpy(ptr_, host, std::size_t(bytes), cudaMemcpyHostToDevice));
  return {};
}

Status DeviceBuffer::download(void* host, std::int64_t bytes) const {
  LOOM_CUDA_CHECK(cudaMemcpy(host, ptr_, std::size_t(bytes), cudaMemcpyDeviceToHost));
  return {};
}

template <class Body>
Status device_launch(std::int64_t n, const Body& body) {
  if (n <= 0) return {};
  run_body<<<detail::grid_for(n), kBlock>>>(body, n);
  LOOM_CUDA_CHECK(cudaGetLastError());
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  return {};
}

template Status device_launch<ReluForward>(std::int64_t, const ReluForward&);
template Status device_launch<ReluBackward>(std::int64_t, const ReluBackward&);
template Status device_launch<BiasAdd>(std::int64_t, const BiasAdd&);
template Status device_launch<BiasGradPartial>(std::int64_t, const BiasGradPartial&);
template Status device_launch<ChannelBiasGradPartial>(std::int64_t, const ChannelBiasGradPartial&);
template Status device_launch<SumPartials>(std::int64_t, const SumPartials&);
template Status device_launch<DropoutForward>(std::int64_t, const DropoutForward&);
template Status device_launch<Im2Col>(std::int64_t, const Im2Col&);
template Status device_launch<Col2Im>(std::int64_t, const Col2Im&);
template Status device_launch<MaxPoolBackward>(std::int64_t, const MaxPoolBackward&);
template Status device_launch<ChannelBias>(std::int64_t, const ChannelBias&);
template Status device_launch<MaxPoolForward>(std::int64_t, const MaxPoolForward&);
template Status device_launch<SoftmaxXentRow>(std::int64_t, const SoftmaxXentRow&);
template Status device_launch<SoftmaxXentBackward>(std::int64_t, const SoftmaxXentBackward&);
template Status device_launch<SgdStep>(std::int64_t, const SgdStep&);
template Status device_launch<MomentumStep>(std::int64_t, const MomentumStep&);
template Status device_launch<AdamStep>(std::int64_t, const AdamStep&);

}  // namespace loom::cuda
