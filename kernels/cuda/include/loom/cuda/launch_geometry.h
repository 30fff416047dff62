// How a body is launched: the block size, the grid for n work items, and the chunking of
// the two-pass reductions. One header for both executors (CudaExec launches this geometry,
// HostExec computes and records the same), C++17 and free of CUDA headers, so nvcc and the
// host compiler read the same numbers.
//
// A launch can be recorded into a LaunchLog handed to the backend's factory: the body's
// name, its work items, its grid, and for a reduction the values it sums in all. Tests
// read the log to check that no kernel gets fewer threads than its work needs; without a
// log a launch pays one null-pointer test.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace loom::cuda {

inline constexpr int kBlock = 256;  // threads per block, every body

inline constexpr std::int64_t blocks_for(std::int64_t n) { return (n + kBlock - 1) / kBlock; }

// ---- reductions in passes -------------------------------------------------------------------
// A reduction of `outputs` sums, each over `length` values, runs as pass 1 (one thread per
// (chunk, output): the partial sum of one chunk of the values) and pass 2 (one thread per
// output: the partials added in chunk order onto the output). The rule, a function of the
// shape only, so the order of summation (and the result) is the same every time for a
// given shape:
//  - chunks grow until pass 1 has about kReductionThreads threads (an H200 holds 132 SMs
//    x 2048 = 270K resident threads; 64K keeps its memory system busy),
//  - but no further than ceil(sqrt(length)), so pass 2's serial sum (chunks values) is
//    never longer than pass 1's (length / chunks),
//  - and at least ceil(length / kMaxChunk), so no pass-1 thread sums more than 256 values.
// Up to 65536 values per output every thread of both passes thus sums at most 256 values.
// Beyond that an output has more than 256 partials, and BodyBackend sums them in groups
// chosen by the same rule (a third pass, and so on) until it has at most 256: no thread
// of any pass ever sums more than kMaxChunk values. At the example CNN's conv1 at batch
// 64 (16 channels of 64 x 28 x 28 values): 224 chunks of 224 values, 3584 threads in pass
// 1 where one thread per channel made 16 (each summing 50176 values).
inline constexpr std::int64_t kReductionThreads = 65536;
inline constexpr std::int64_t kMaxChunk = 256;

struct Chunking {
  std::int64_t chunks = 1;  // partial sums per output
  std::int64_t length = 0;  // values per chunk (the last may be shorter)
};

inline Chunking reduction_chunks(std::int64_t outputs, std::int64_t length) {
  if (outputs <= 0 || length <= 0) return {1, length > 0 ? length : 0};
  std::int64_t root = std::int64_t(std::ceil(std::sqrt(double(length))));
  while (root * root < length) ++root;  // exact ceil(sqrt) whatever sqrt rounds to
  std::int64_t chunks = (kReductionThreads + outputs - 1) / outputs;
  if (chunks > root) chunks = root;
  const std::int64_t least = (length + kMaxChunk - 1) / kMaxChunk;
  if (chunks < least) chunks = least;
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
