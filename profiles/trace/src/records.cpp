#include "loom/trace/records.h"

#include <array>
#include <utility>

namespace loom::trace {
namespace {

constexpr std::array<std::pair<RunStatus, std::string_view>, 6> kStatusText{{
    {RunStatus::Running, "running"},
    {RunStatus::Completed, "completed"},
    {RunStatus::Failed, "failed"},
    {RunStatus::Stopped, "stopped"},
    {RunStatus::Hung, "hung"},
    {RunStatus::Interrupted, "interrupted"},
}};

}  // namespace

std::string_view to_text(RunStatus status) {
  for (const auto& [s, text] : kStatusText)
    if (s == status) return text;
  return "unknown";
}

std::optional<RunStatus> run_status_from(std::string_view text) {
  for (const auto& [s, name] : kStatusText)
    if (name == text) return s;
  return std::nullopt;
}

bool ended_badly(RunStatus status) {
  return status == RunStatus::Failed || status == RunStatus::Hung || status == RunStatus::Interrupted;
}

bool resumable(RunStatus status) {
  return status != RunStatus::Running && status != RunStatus::Completed;
}

}  // namespace loom::trace
