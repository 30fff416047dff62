// What every CUDA source here shares: the checked-call error (the call, file and line,
// what CUDA said, and a hint) and the one-thread-per-index kernel that runs a body, over
// the grid of launch_geometry.h (shared with the host executor).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "loom/core/status.h"
#include "loom/cuda/launch_geometry.h"

namespace loom::cuda::detail {

inline Error cuda_error(const char* call, const char* file, int line, const std::string& what) {
  return make_error(ErrorCode::Unavailable, std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + what,
                    "check the driver with nvidia-smi and the plan's gpu index; without a GPU, set \"kind\": \"cpu\"");
}

inline Error cuda_error(const char* call, const char* file, int line, cudaError_t e) {
  return cuda_error(call, file, line, std::string(cudaGetErrorName(e)) + " " + cudaGetErrorString(e));
}

template <class Body>
__global__ void run_body(Body body, std::int64_t n) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) body(i);
}

// blocks_for(n) as a CUDA grid dimension (n up to 2^31 - 1 blocks of kBlock threads).
inline unsigned grid_for(std::int64_t n) { return static_cast<unsigned>(blocks_for(n)); }

}  // namespace loom::cuda::detail

// Returns the error from the enclosing function (which returns Status or Expected).
#define LOOM_CUDA_CHECK(call)                                                                          \
  do {                                                                                                 \
    const cudaError_t loom_e_ = (call);                                                                \
    if (loom_e_ != cudaSuccess) return ::loom::cuda::detail::cuda_error(#call, __FILE__, __LINE__, loom_e_); \
  } while (0)
