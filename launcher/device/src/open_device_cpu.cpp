// open_device in a build without the CUDA backend (open_device.h).
#include "loom/device/open_device.h"

#include "describe_gpu.h"
#include "loom/kernels/cpu_backend.h"

namespace loom::device {

Expected<std::unique_ptr<kernels::Backend>> open_device(const DeviceSpec& device, bool /*tf32*/) {
  if (device.kind != DeviceKind::Gpu) return cpu::make_cpu_backend();
  return make_error(ErrorCode::Unavailable, "this build has no CUDA support, so gpu " + std::to_string(device.gpu) +
                                                " cannot be used",
                    "rebuild with the CUDA toolkit (nvcc), or set \"kind\": \"cpu\"");
}

namespace detail {
trace::DeviceInfo describe_gpu(int /*index*/) {
  trace::DeviceInfo gpu;
  gpu.kind = "gpu";
  return gpu;
}
}  // namespace detail

}  // namespace loom::device
