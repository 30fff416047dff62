// Display names for event kinds and streams. Events carry only enum values; names are
// looked up here when showing or exporting, so recording never touches a string.
#include "loom/trace/event.h"

#include <array>

namespace loom::trace {

namespace {
constexpr std::array<std::string_view, kEventKindCount> kKindNames = {
    "forward", "backward", "optimizer", "data",  "evaluate", "allreduce",
    "send",    "recv",     "push",      "pull",  "wait",     "idle",
    "delay",   "step",     "loss",      "broadcast", "barrier",
    "setup",   "copy",
};
constexpr std::array<std::string_view, kSetupPhaseCount> kSetupPhaseNames = {
    "load data", "clock alignment", "bandwidth probe", "build model"};
constexpr std::array<std::string_view, kStreamCount> kStreamNames = {"compute", "comm", "host", "copy"};
}  // namespace

std::string_view event_kind_name(EventKind kind) {
  auto i = static_cast<std::size_t>(kind);
  return i < kKindNames.size() ? kKindNames[i] : std::string_view("unknown");
}

std::string_view stream_name(Stream stream) {
  auto i = static_cast<std::size_t>(stream);
  return i < kStreamNames.size() ? kStreamNames[i] : std::string_view("unknown");
}

std::string_view setup_phase_name(std::int32_t phase) {
  return phase >= 0 && phase < kSetupPhaseCount ? kSetupPhaseNames[static_cast<std::size_t>(phase)]
                                                : std::string_view("setup");
}

}  // namespace loom::trace
