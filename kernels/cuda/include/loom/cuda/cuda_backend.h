// The CUDA kernel backend: BodyBackend over CudaExec, the kernel bodies as CUDA kernels on
// one stream per rank, GEMMs through cuBLAS (fp32, or TF32 tensor cores when asked),
// memory on the device. Built only where nvcc is (loom_kernels_cuda).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

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

// What CUDA says of a device, as plain values (launcher/device makes the rank's device
// identity of them): cudaGetDeviceProperties, cudaDriverGetVersion, cudaRuntimeGetVersion.
// Versions are CUDA's numbers, 1000 * major + 10 * minor (13000 is 13.0).
struct CudaDeviceFacts {
  std::string name;  // "NVIDIA H200"
  std::int64_t memory_bytes = 0;
  int compute_major = 0, compute_minor = 0;
  int driver_version = 0;   // the newest CUDA the installed driver supports
  int runtime_version = 0;  // the CUDA runtime this program runs with
};
// An Unavailable error, as make_cuda_backend's, where CUDA cannot answer.
Expected<CudaDeviceFacts> query_cuda_device(int device);

}  // namespace loom::cuda
