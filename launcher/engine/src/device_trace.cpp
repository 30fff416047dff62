// DeviceTrace::flush (device_trace.h).
#include "loom/engine/device_trace.h"

#include <algorithm>

namespace loom::engine {

void DeviceTrace::add_template(std::int32_t step, std::int64_t host_start_ns) {
  for (Pending p : template_) {
    p.event.step = step;
    if (p.start == kHostStart) p.event.start_ns = host_start_ns;
    pending_.push_back(p);
  }
}

void DeviceTrace::flush() {
  const std::vector<std::int64_t> times = backend_.resolve_stamps();
  std::int64_t lane_end = 0;  // where the compute lane's previous span ended
  for (Pending& p : pending_) {
    // A stamp the backend did not return (it failed and the run is ending) leaves no span.
    const bool host_start = p.start == kHostStart;
    if ((!host_start && std::size_t(p.start) >= times.size()) || std::size_t(p.end) >= times.size()) continue;
    if (!host_start) p.event.start_ns = times[std::size_t(p.start)];
    p.event.end_ns = times[std::size_t(p.end)];
    if (p.event.stream == trace::Stream::Compute) {
      if (host_start) p.event.start_ns = std::min(std::max(p.event.start_ns, lane_end), p.event.end_ns);
      lane_end = std::max(lane_end, p.event.end_ns);
    }
    p.event.end_ns = std::max(p.event.start_ns, p.event.end_ns);
    recorder_.record(p.event);
  }
  pending_.clear();
}

}  // namespace loom::engine
