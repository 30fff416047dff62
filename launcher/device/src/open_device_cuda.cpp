// open_device in a build with the CUDA backend (open_device.h).
#include "loom/device/open_device.h"

#include <cstdlib>
#include <string_view>

#include "describe_gpu.h"
#include "loom/cuda/cuda_backend.h"
#include "loom/cuda/host_body_backend.h"
#include "loom/kernels/cpu_backend.h"

namespace loom::device {
namespace {

// LOOM_GPU_ON_HOST=1 runs a gpu device's rank on the CUDA backend's code on this machine's
// CPU, asynchronously as a GPU runs (cuda::make_host_body_backend): a GPU rank's timeline,
// lanes and figures where there is no GPU, for demonstrations and the screenshots of this
// project's machines. Not a plan setting; the run's device record says what it was.
bool gpu_on_host() {
  const char* value = std::getenv("LOOM_GPU_ON_HOST");
  return value && std::string_view(value) == "1";
}

}  // namespace

Expected<std::unique_ptr<kernels::Backend>> open_device(const DeviceSpec& device, bool tf32) {
  if (device.kind != DeviceKind::Gpu) return cpu::make_cpu_backend();
  if (gpu_on_host()) return cuda::make_host_body_backend({.asynchronous = true, .lag_us = 0, .log = nullptr});
  cuda::CudaOptions options;
  options.device = device.gpu;
  options.tf32 = tf32;
  return cuda::make_cuda_backend(options);
}

namespace detail {
trace::DeviceInfo describe_gpu(int index) {
  trace::DeviceInfo gpu;
  gpu.kind = "gpu";
  if (gpu_on_host()) {
    gpu.name = "a GPU emulated on the CPU (LOOM_GPU_ON_HOST)";
    return gpu;
  }
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
