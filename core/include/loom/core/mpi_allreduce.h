// How Loom's MPI communicator all-reduces a message, in one place: the communicator runs
// it (launcher/comm/src/mpi_communicator.cpp) and the predictor models it across hosts
// (profiles/predict/src/cluster.cpp, mpi_allreduce_ms).
#pragma once

#include <cstdint>

namespace loom {

enum class MpiAllreduce {
  NonBlocking,        // MPI's own non-blocking all-reduce (Open MPI 4.1, in place: a binomial tree)
  Ring,               // Loom's ring: reduce-scatter, then all-gather
  RecursiveDoubling,  // log2(p) exchanges of the whole message
};

// Up to this many floats (64 KiB) a sum is latency-bound: the per-step loss, accuracy and
// stop votes, and small gradient buckets.
inline constexpr std::int64_t kMpiSmallAllreduceFloats = 16 * 1024;

constexpr MpiAllreduce mpi_allreduce_algorithm(int ranks, std::int64_t floats) {
  if (floats <= kMpiSmallAllreduceFloats || ranks < 2) return MpiAllreduce::NonBlocking;
  if (ranks > 2 && (ranks & (ranks - 1)) == 0) return MpiAllreduce::RecursiveDoubling;
  return MpiAllreduce::Ring;
}

}  // namespace loom
