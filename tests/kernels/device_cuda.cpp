// make_device_under_test: the CUDA backend on GPU 0.
#include "device_under_test.h"

#include "loom/cuda/cuda_backend.h"

namespace loom::test {

std::unique_ptr<kernels::Backend> make_device_under_test(bool tf32, std::string& skip) {
  cuda::CudaOptions options;
  options.device = 0;
  options.tf32 = tf32;
  auto backend = cuda::make_cuda_backend(options);
  if (!backend.ok()) {
    skip = "no usable CUDA device: " + backend.error().describe();
    return nullptr;
  }
  return std::move(*backend);
}

std::unique_ptr<kernels::Backend> make_async_device_under_test(std::string& skip) {
  return make_device_under_test(false, skip);
}

}  // namespace loom::test
