// make_device_under_test: the CUDA backend's code with the host executor.
#include "device_under_test.h"

#include "loom/cuda/host_body_backend.h"

namespace loom::test {

std::unique_ptr<kernels::Backend> make_device_under_test(bool tf32, std::string& skip) {
  if (tf32) {
    skip = "TF32 tensor cores exist only on a GPU";
    return nullptr;
  }
  return cuda::make_host_body_backend();
}

std::unique_ptr<kernels::Backend> make_async_device_under_test(std::string&) {
  return cuda::make_host_body_backend({true, kAsyncLagUs});
}

}  // namespace loom::test
