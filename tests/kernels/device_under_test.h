// The backend a backend test checks against the CPU backend. The same test source is
// built twice: with device_host_body.cpp (the CUDA backend's code on the host, label unit,
// every build) and with device_cuda.cpp (the CUDA backend on GPU 0, label gpu, where the
// CUDA backend is built; it skips where no GPU or driver is).
#pragma once

#include <memory>
#include <string>

#include "loom/kernels/backend.h"

namespace loom::test {

// nullptr with `skip` set when the device cannot be had here; tf32 asks for cuBLAS's TF32
// tensor-core GEMMs (a GPU only).
std::unique_ptr<kernels::Backend> make_device_under_test(bool tf32, std::string& skip);
// The same backend running asynchronously to the host, as a GPU does: on the host, the
// CUDA backend's code with its operations on a worker thread in stream order, trailing
// the host by kAsyncLagUs before each; on a GPU, the CUDA backend itself.
std::unique_ptr<kernels::Backend> make_async_device_under_test(std::string& skip);
inline constexpr int kAsyncLagUs = 20;

}  // namespace loom::test
