// open_device in a build with the CUDA backend (open_device.h).
#include "loom/device/open_device.h"

#include "describe_gpu.h"
#include "loom/cuda/cuda_backend.h"
#include "loom/kernels/cpu_backend.h"

namespace loom::device {

Expected<std::unique_ptr<kernels::Backend>> open_device(const DeviceSpec& device, bool tf32) {
  if (device.kind != DeviceKind::Gpu) return cpu::make_cpu_backend();
  cuda::CudaOptions options;
  options.device = device.gpu;
  options.tf32 = tf32;
  return cuda::make_cuda_backend(options);
}

namespace detail {
trace::DeviceInfo describe_gpu(int index) {
  trace::DeviceInfo gpu;
  gpu.kind = "gpu";
  auto facts = cuda::query_cuda_device(index);
  if (!facts.ok()) return gpu;  // opened a moment ago, so this is not expected; stays unknown
  gpu.name = facts->name.substr(0, trace::kMaxDeviceTextBytes);
  gpu.memory_bytes = facts->memory_bytes;
  gpu.compute_major = facts->compute_major;
  gpu.compute_minor = facts->compute_minor;
  gpu.cuda_driver = cuda_version_text(facts->driver_version);
  gpu.cuda_runtime = cuda_version_text(facts->runtime_version);
  return gpu;
}
}  // namespace detail

}  // namespace loom::device
