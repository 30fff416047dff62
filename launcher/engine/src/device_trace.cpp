// DeviceTrace::flush (device_trace.h).
#include "loom/engine/device_trace.h"

#include <algorithm>

namespace loom::engine {

void DeviceTrace::flush() {
  const std::vector<std::int64_t> times = backend_.resolve_stamps();
  for (Pending& p : pending_) {
    // A stamp the backend did not return (it failed and the run is ending) leaves no span.
    const bool host_start = p.start == kHostStart;
    if ((!host_start && std::size_t(p.start) >= times.size()) || std::size_t(p.end) >= times.size()) continue;
    if (!host_start) p.event.start_ns = times[std::size_t(p.start)];
    p.event.end_ns = std::max(p.event.start_ns, times[std::size_t(p.end)]);
    recorder_.record(p.event);
  }
  pending_.clear();
}

}  // namespace loom::engine
