// The CUDA kernel backend: BodyBackend over CudaExec, the kernel bodies as CUDA kernels on
// one stream per rank, GEMMs through cuBLAS (fp32, or TF32 tensor cores when asked),
// memory on the device. Built only where nvcc is (loom_kernels_cuda).
#pragma once

#include <memory>

#include "loom/core/status.h"
#include "loom/kernels/backend.h"

namespace loom::cuda {

struct LaunchLog;

struct CudaOptions {
  int device = 0;     // index among this host's visible GPUs
  bool tf32 = false;  // cuBLAS may use TF32 tensor cores for the fp32 GEMMs
  // Where each kernel launch's geometry is recorded (launch_geometry.h), for tests; null in
  // production runs. Must outlive the backend.
  LaunchLog* launch_log = nullptr;
};

// Selects the device, creates the stream and the cuBLAS handle. An Unavailable error,
// naming the CUDA call and with a hint, where there is no usable device or driver.
Expected<std::unique_ptr<kernels::Backend>> make_cuda_backend(const CudaOptions& options);

}  // namespace loom::cuda
