// Concept labels (concepts.h). Every lookup goes through the lanes, whose spans are sorted
// and do not overlap, so a label costs a binary search and a walk over the spans of one
// step, never a scan of the run.
#include "loom/ui/timeline/concepts.h"

#include <algorithm>
#include <cmath>

namespace loom::ui::timeline {
namespace {

using loom::trace::EventKind;
using loom::trace::Stream;

// The spans of a lane that overlap [begin, end) (origin-relative).
std::span<const Span> overlapping(const Lane& lane, std::int64_t begin, std::int64_t end) {
  auto first = std::partition_point(lane.spans.begin(), lane.spans.end(), [begin](const Span& s) { return s.end_ns <= begin; });
  auto last = std::partition_point(first, lane.spans.end(), [end](const Span& s) { return s.start_ns < end; });
  return {first, last};
}

bool is_work(EventKind k) {
  return k == EventKind::Forward || k == EventKind::Backward || k == EventKind::Loss || k == EventKind::Optimizer;
}

std::int64_t relative_start(const TimelineData& d, std::uint32_t i) { return d.event(i).start_ns - d.origin_ns(); }
std::int64_t relative_end(const TimelineData& d, std::uint32_t i) { return d.event(i).end_ns - d.origin_ns(); }

// Idle of this rank in the step over the step's length.
QString bubble_label(const TimelineData& d, std::uint32_t index) {
  const auto& e = d.event(index);
  const auto range = d.step_range(e.step);
  const int lane = d.event_lane(index);
  if (!range || lane < 0 || range->end_ns <= range->begin_ns) return {};
  std::int64_t idle = 0;
  for (const Span& s : overlapping(d.lanes()[std::size_t(lane)], range->begin_ns, range->end_ns))
    if (s.kind == EventKind::Idle && d.event(s.event).step == e.step) idle += s.end_ns - s.start_ns;
  const double share = double(idle) / double(range->end_ns - range->begin_ns);
  return QStringLiteral("bubble %1% of step %2").arg(std::lround(100.0 * share)).arg(e.step);
}

// The share of a bucket's time that no work span of its rank overlaps.
QString exposed_label(const TimelineData& d, std::uint32_t index) {
  const int rank = d.event_rank(index);
  const std::int64_t a = relative_start(d, index), b = relative_end(d, index);
  if (b <= a) return {};
  std::vector<std::pair<std::int64_t, std::int64_t>> work;
  for (const Lane& lane : d.lanes()) {
    if (lane.key.rank != rank || lane.key.stream != Stream::Compute) continue;
    for (const Span& s : overlapping(lane, a, b))
      if (is_work(s.kind)) work.emplace_back(std::max(a, s.start_ns), std::min(b, s.end_ns));
  }
  std::sort(work.begin(), work.end());
  std::int64_t covered = 0, reach = a;
  for (const auto& [s, e] : work) {  // union of the overlaps
    if (e <= reach) continue;
    covered += e - std::max(s, reach);
    reach = e;
  }
  const double exposed = 1.0 - double(covered) / double(b - a);
  return exposed > 0.995 ? QStringLiteral("exposed communication")
                         : QStringLiteral("exposed %1%").arg(std::lround(100.0 * exposed));
}

// For a data-parallel wait: the rank whose last gradient bucket of the step started last.
int last_to_reduce(const TimelineData& d, int step, const TimeRange& range) {
  int latest_rank = -1;
  std::int64_t latest_start = 0, latest_message = -1;
  for (const Lane& lane : d.lanes()) {
    if (lane.key.stream != Stream::Comm) continue;
    for (const Span& s : overlapping(lane, range.begin_ns, range.end_ns + (range.end_ns - range.begin_ns))) {
      const auto& e = d.event(s.event);
      if (s.kind != EventKind::AllReduce || e.step != step) continue;
      // The step's last bucket: the highest message number; among ranks, the latest start.
      if (e.message > latest_message || (e.message == latest_message && s.start_ns > latest_start)) {
        latest_message = e.message;
        latest_start = s.start_ns;
        latest_rank = lane.key.rank;
      }
    }
  }
  return latest_rank;
}

QString wait_label(const TimelineData& d, std::uint32_t index) {
  const auto& e = d.event(index);
  const auto range = d.step_range(e.step);
  if (!range) return {};
  const int culprit = last_to_reduce(d, e.step, *range);
  if (culprit < 0) return {};  // no all-reduce in this step: not a data-parallel wait
  const int rank = d.event_rank(index);
  return culprit == rank ? QStringLiteral("waiting for the network · exposed communication")
                         : QStringLiteral("waiting for rank %1 · exposed communication").arg(culprit);
}

}  // namespace

QString concept_label(const TimelineData& data, std::uint32_t event) {
  if (event >= data.event_count()) return {};
  const auto& e = data.event(event);
  switch (e.kind) {
    case EventKind::Idle:
      return e.step >= 0 && data.microbatch_count(e.step) > 0 ? bubble_label(data, event) : QString();
    case EventKind::AllReduce: return exposed_label(data, event);
    case EventKind::Wait: return e.step >= 0 ? wait_label(data, event) : QString();
    case EventKind::Recv:
    case EventKind::Pull: return e.peer >= 0 ? QStringLiteral("from rank %1").arg(e.peer) : QString();
    case EventKind::Push: {
      const std::int64_t s = data.staleness(data.event_rank(event), e.step);
      return s >= 0 ? QStringLiteral("staleness %1").arg(s) : QString();
    }
    default: return {};
  }
}

}  // namespace loom::ui::timeline
