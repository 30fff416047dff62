// What every CUDA source here shares: the checked-call error (cuda_error.h, shared with
// the NCCL communicator) and the one-thread-per-index kernel that runs a body, over the
// grid of launch_geometry.h (shared with the host executor).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "loom/core/status.h"
#include "loom/cuda/cuda_error.h"
#include "loom/cuda/launch_geometry.h"

namespace loom::cuda::detail {

using ::loom::cuda::cuda_error;

template <class Body>
__global__ void run_body(Body body, std::int64_t n) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) body(i);
}

// blocks_for(n) as a CUDA grid dimension (n up to 2^31 - 1 blocks of kBlock threads).
inline unsigned grid_for(std::int64_t n) { return static_cast<unsigned>(blocks_for(n)); }

}  // namespace loom::cuda::detail
