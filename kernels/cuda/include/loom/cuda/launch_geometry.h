// How a body is launched: the block size, the grid for n work items, and the chunking of
// the reductions in passes. One header for both executors (CudaExec launches this geometry,
// HostExec computes and records the same), C++17 and free of CUDA headers, so nvcc and the
// host compiler read the same numbers.
//
// A launch can be recorded into a LaunchLog handed to the backend's factory: the body's
// name, its work items, its grid, and for a reduction the values it sums in all. Tests
// read the log to check that no kernel gets fewer threads than its work needs; without a
// log a launch pays one null-pointer test.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

namespace loom::cuda {

inline constexpr int kBlock = 256;  // threads per block, every body

inline constexpr std::int64_t blocks_for(std::int64_t n) { return (n + kBlock - 1) / kBlock; }

// ---- reductions in passes -------------------------------------------------------------------
// A reduction of `outputs` sums, each over `length` values, runs as pass 1 (one thread per
// (chunk, output): the partial sum of one chunk of the values), then passes that sum the
// partials in groups the same way, until an output has at most kMaxChunk partials, and a
// last pass (one thread per output) that adds them onto the output. The rule, a function of
// the shape only, so the order of summation (and the result) is the same every time for a
// given shape: chunks of at most kChunk values, as few chunks as that allows.
//
// Why short chunks: a thread's sum waits on its loads, so its time is about (values / 4)
// memory latencies (element_kernels.h: four accumulators), whatever the thread count; many
// short sums finish sooner than few long ones, and the GPU hides their latencies behind
// each other. Measured on an H200 (2026-11-27, Nsight Compute): the example CNN's two
// channel-bias gradients took 50-100 us each when pass 1 summed about sqrt(length) values
// per thread (conv1 at batch 64: 224 chunks of 224 values, 3584 threads), 150 us of a
// 407 us step. Now conv1 at batch 64 (16 channels of 64 x 28 x 28 values) is 1568 chunks
// of 32 values (25088 threads), then 49 groups of 32, then a last pass over 49 partials.
inline constexpr std::int64_t kChunk = 32;     // values per thread of pass 1 and the grouping passes
inline constexpr std::int64_t kMaxChunk = 64;  // partials per output the last pass adds, at most

struct Chunking {
  std::int64_t chunks = 1;  // partial sums per output
  std::int64_t length = 0;  // values per chunk (the last may be shorter)
};

inline Chunking reduction_chunks(std::int64_t outputs, std::int64_t length) {
  if (outputs <= 0 || length <= 0) return {1, length > 0 ? length : 0};
  const std::int64_t chunks = (length + kChunk - 1) / kChunk;
  const std::int64_t per = (length + chunks - 1) / chunks;
  return {(length + per - 1) / per, per};  // no empty chunk
}

// ---- the launch log ------------------------------------------------------------------------
struct LaunchRecord {
  const char* body = "";      // the body's kName
  std::int64_t n = 0;         // work items: threads that run the body
  std::int64_t blocks = 0;    // grid size
  int threads = 0;            // threads per block
  std::int64_t summed = 0;    // a reduction's values summed by the whole launch; 0 otherwise
};

// At most `capacity` records are kept (the first ones); later launches are counted only.
struct LaunchLog {
  std::vector<LaunchRecord> records;
  std::int64_t capacity = 1 << 16;
  std::int64_t dropped = 0;
  void clear() {
    records.clear();
    dropped = 0;
  }
};

// A reduction body says how many values its launch sums through a summed() member.
template <class Body, class = void>
struct HasSummed : std::false_type {};
template <class Body>
struct HasSummed<Body, std::void_t<decltype(std::declval<const Body&>().summed())>> : std::true_type {};

template <class Body>
void record_launch(LaunchLog* log, const Body& body, std::int64_t n) {
  if (!log) return;
  if (std::int64_t(log->records.size()) >= log->capacity) {
    ++log->dropped;
    return;
  }
  LaunchRecord r;
  r.body = Body::kName;
  r.n = n;
  r.blocks = blocks_for(n);
  r.threads = kBlock;
  if constexpr (HasSummed<Body>::value) r.summed = body.summed();
  (void)body;
  log->records.push_back(r);
}

}  // namespace loom::cuda
