// The one error a failed CUDA runtime call becomes, everywhere Loom calls CUDA (the CUDA
// backend's kernels and memory, the NCCL communicator's streams and events): the call,
// file and line, what CUDA said, and what to check. Host code; nvcc (C++17) and the host
// compiler (C++20) both read it.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "loom/core/status.h"

namespace loom::cuda {

inline Error cuda_error(const char* call, const char* file, int line, const std::string& what) {
  return make_error(ErrorCode::Unavailable, std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + what,
                    "check the driver with nvidia-smi and the plan's gpu index; without a GPU, set \"kind\": \"cpu\"");
}

inline Error cuda_error(const char* call, const char* file, int line, cudaError_t e) {
  return cuda_error(call, file, line, std::string(cudaGetErrorName(e)) + " " + cudaGetErrorString(e));
}

}  // namespace loom::cuda

// Returns the error from the enclosing function (which returns Status or Expected).
#define LOOM_CUDA_CHECK(call)                                                                  \
  do {                                                                                         \
    const cudaError_t loom_e_ = (call);                                                        \
    if (loom_e_ != cudaSuccess) return ::loom::cuda::cuda_error(#call, __FILE__, __LINE__, loom_e_); \
  } while (0)
