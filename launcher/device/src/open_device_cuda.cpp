// open_device in a build with the CUDA backend (open_device.h).
#include "loom/device/open_device.h"

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

}  // namespace loom::device
