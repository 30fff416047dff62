// How the engine lays out what it allocates, defined once for the code that allocates and
// the predictor that counts it (profiles/predict/src/rank_memory.cpp).
//
// Parameters: every parameter tensor of a rank in one arena (engine::ParamArena), each at
// an offset rounded up to kParamAlignFloats (256 bytes, the alignment cudaMalloc gives
// GEMMs); gradients and optimizer state are laid out the same.
//
// A convolution's scratch beside its tensors: both backends unfold input (im2col)
// into a column block [C*R*R, nb*OH*OW] and compute an output block [K, nb*OH*OW]: per
// sample (C*R*R + K)*OH*OW floats. The CPU kernels work on blocks of nb samples sized to
// stay near kCpuConvBlockFloats (1 MB of float stays in L2 between im2col and the GEMM,
// and measured faster than 8 MB); the CUDA kernels unfold the whole batch in one block.
#pragma once

#include <algorithm>
#include <cstdint>

namespace loom {

inline constexpr std::int64_t kParamAlignFloats = 64;

inline std::int64_t padded_param_floats(std::int64_t floats) {
  return (floats + kParamAlignFloats - 1) / kParamAlignFloats * kParamAlignFloats;
}

inline constexpr std::int64_t kCpuConvBlockFloats = std::int64_t(1) << 18;

inline std::int64_t conv_workspace_per_sample(std::int64_t unfolded_rows, std::int64_t out_channels,
                                              std::int64_t out_pixels) {
  return (unfolded_rows + out_channels) * out_pixels;
}

// Samples the CPU kernels unfold together: as many as fit the block budget, at least one,
// at most the batch.
inline std::int64_t cpu_conv_block_samples(std::int64_t per_sample, std::int64_t batch) {
  if (batch <= 0) return 0;
  const std::int64_t fit = kCpuConvBlockFloats / std::max<std::int64_t>(per_sample, 1);
  return std::clamp<std::int64_t>(fit, 1, batch);
}

}  // namespace loom
