// CUDA event times onto the host's steady clock (the CUDA backend's resolve_stamps). A
// stamp is an event, and cudaEventElapsedTime gives only differences between events. So
// once the stream is idle, one anchor event is recorded between two host clock reads,
// `before` and `after`: the device passed it within that interval, and the midpoint is
// taken as the anchor's host time (off by at most (after - before) / 2, a few
// microseconds). A stamp `ms_before_anchor` milliseconds earlier
// (cudaEventElapsedTime(&ms, stamp, anchor)) is that much earlier on the host clock, and
// one recorded after an anchor kept from an earlier step is -ms earlier (ms =
// cudaEventElapsedTime(&ms, anchor, stamp)). Plain C++, so it is tested in every build.
#pragma once

#include <cstdint>

namespace loom::cuda {

inline std::int64_t stamp_host_ns(std::int64_t before_ns, std::int64_t after_ns, float ms_before_anchor) {
  const std::int64_t anchor_ns = before_ns + (after_ns - before_ns) / 2;
  return anchor_ns - static_cast<std::int64_t>(static_cast<double>(ms_before_anchor) * 1e6);
}

}  // namespace loom::cuda
