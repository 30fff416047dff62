// The critical path and wait attribution in words (run_text.h).
#include "loom/text/run_text.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace loom::text {

using namespace loom::analysis;  // the structs this file puts into words

namespace {

std::string what_of(const PathEntry& e, const std::vector<std::string>& layers) {
  if (e.part == PathPart::Untraced) return "untraced";
  std::string what(trace::event_kind_name(e.kind));
  if (e.layer >= 0) {
    const bool named = std::size_t(e.layer) < layers.size() && !layers[std::size_t(e.layer)].empty();
    what += " " + (named ? layers[std::size_t(e.layer)] : "layer " + std::to_string(e.layer));
  }
  return what;
}

}  // namespace

std::string format_path_analysis(const PathAnalysis& a, const std::vector<std::string>& layers) {
  const CriticalPath& p = a.path;
  if (p.steps == 0) return "";
  auto pct = [&](PathPart part) { return p.length_ns > 0 ? 100.0 * double(p.part_ns[int(part)]) / double(p.length_ns) : 0.0; };
  char line[512];
  std::snprintf(line, sizeof line,
                "critical path (over %d steady steps; per step %.3f ms: work %.0f%%, communication %.0f%%, "
                "waiting %.0f%%, descheduled %.0f%%, untraced %.0f%%; %.1f rank changes):\n",
                p.steps, per_step_s(p.length_ns, p.steps) * 1e3, pct(PathPart::Work), pct(PathPart::Communication),
                pct(PathPart::Waiting), pct(PathPart::Descheduled), pct(PathPart::Untraced), double(p.jumps) / p.steps);
  std::string out = line;
  for (std::size_t i = 0; i < p.profile.size() && i < 8; ++i) {
    const PathEntry& e = p.profile[i];
    const std::string what = what_of(e, layers) + (e.part == PathPart::Descheduled ? " (descheduled)" : "");
    std::snprintf(line, sizeof line, "  rank %-3d %-34s %9.3f ms per step  %5.1f%%\n", e.rank, what.c_str(),
                  per_step_s(e.ns, p.steps) * 1e3, p.length_ns > 0 ? 100.0 * double(e.ns) / double(p.length_ns) : 0.0);
    out += line;
  }
  if (a.waits.empty()) {
    return out + "who waited for whom: no receive from a late sender, no late arrival at a synchronous collective "
                 "(waits on a parameter server are not attributed)\n";
  }
  out += "who waited for whom (totals over those steps):\n";
  for (std::size_t i = 0; i < a.waits.size() && i < 8; ++i) {
    const WaitCause& w = a.waits[i];
    std::snprintf(line, sizeof line, "  rank %d waited %.3f s for rank %d (%s, %lld times)\n", w.waiter,
                  double(w.ns) / 1e9, w.cause, w.reason.c_str(), static_cast<long long>(w.count));
    out += line;
  }
  return out;
}

}  // namespace loom::text
