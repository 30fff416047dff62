// Per-rank breakdown and all-reduce figures (definitions in breakdown.h). Time per
// category is the union of its intervals so nested spans count once.
#include "loom/analysis/breakdown.h"

#include <algorithm>
#include <iterator>
#include <tuple>

#include "figure_parts.h"

namespace loom::analysis {

using trace::Event;
using trace::EventKind;

namespace {
enum Category { kCompute, kComm, kOptimizer, kData, kNone };

Category category_of(const Event& e) {
  // A copy lies inside the DataLoad span that counts it; on its own lane it only shows.
  if (e.stream == trace::Stream::Copy || e.kind == EventKind::Copy) return kNone;
  if (trace::is_communication(e.kind)) return kComm;
  switch (e.kind) {
    case EventKind::Forward:
    case EventKind::Backward:
    case EventKind::Loss:
      return e.stream == trace::Stream::Compute ? kCompute : kNone;
    case EventKind::Optimizer:
      return kOptimizer;
    case EventKind::DataLoad:
      return kData;
    default:
      return kNone;  // Step, Wait, Idle, InjectedDelay
  }
}

struct Descheduled {
  std::int64_t comm_ns = 0, wait_ns = 0;
};

// Moves descheduled time out of communication (exposed first: a rank waiting for a core
// while its compute waits too) and out of idle, into its own category. Only what leaves
// exposed communication or idle becomes descheduled: the categories partition the window,
// and a communication thread waiting for a core while the rank computes lost the rank no
// time (the communication total still drops by all of it).
void take_out_descheduled(RankBreakdown& b, const Descheduled& d) {
  const double comm = std::min(b.comm_s, static_cast<double>(d.comm_ns) / kNsPerS);
  const double exposed = std::min(b.exposed_comm_s, comm);
  const double wait = std::min(b.idle_s, static_cast<double>(d.wait_ns) / kNsPerS);
  b.comm_s -= comm;
  b.exposed_comm_s -= exposed;
  b.idle_s -= wait;
  b.descheduled_s = exposed + wait;
}

// Whether [start, end) meets any of `sorted` (merged: sorted and disjoint), by binary search.
bool meets_any(const Intervals& sorted, std::int64_t start, std::int64_t end) {
  auto it = std::upper_bound(sorted.begin(), sorted.end(), start,
                             [](std::int64_t t, const std::pair<std::int64_t, std::int64_t>& i) { return t < i.second; });
  return it != sorted.end() && it->first < end && start < end;
}

// Descheduled time (docs/figures.md) inside communication and inside waiting. A span's
// amount cannot be placed within it, so a span counts when it starts in the window; only
// the outermost span per stream counts (a nested span's time is its parent's), and a
// communication span inside a pipeline bubble is the bubble's (the Idle span has it).
Descheduled descheduled_time(const std::vector<Event>& events, const TrainingWindow& w, Intervals& bubbles,
                             const Intervals& evaluation) {
  const Intervals merged_bubbles = merged(bubbles);  // once: a run has hundreds of thousands of spans
  std::vector<const Event*> spans;
  for (const Event& e : events)
    if (e.descheduled_us > 0 && e.start_ns >= w.start_ns && e.start_ns < w.end_ns &&
        !meets_any(evaluation, e.start_ns, e.start_ns + 1))
      spans.push_back(&e);
  std::sort(spans.begin(), spans.end(), [](const Event* a, const Event* b) {
    return std::tie(a->stream, a->start_ns, b->end_ns) < std::tie(b->stream, b->start_ns, a->end_ns);
  });
  Descheduled d;
  std::int64_t outer_end[trace::kStreamCount] = {};
  for (const Event* e : spans) {
    std::int64_t& end = outer_end[static_cast<int>(e->stream) % trace::kStreamCount];
    if (e->start_ns < end) continue;  // nested in a span already counted
    end = e->end_ns;
    const std::int64_t ns = std::int64_t(e->descheduled_us) * 1000;
    if (category_of(*e) != kComm) {
      d.wait_ns += ns;  // Wait, Idle
      continue;
    }
    if (!meets_any(merged_bubbles, e->start_ns, e->end_ns)) d.comm_ns += ns;
  }
  return d;
}

// The part of `more` that `claimed` (merged) does not cover; `claimed` grows by it.
// Both lists usually arrive sorted by start (a rank's spans in recorded order), so this is
// a linear merge, not a sort: the breakdown of a million-event run stays cheap.
std::int64_t claim(Intervals& claimed, Intervals& more) {
  const std::int64_t before = union_length_ns(claimed);
  sort_by_start(more);
  Intervals both;
  both.reserve(claimed.size() + more.size());
  std::merge(claimed.begin(), claimed.end(), more.begin(), more.end(), std::back_inserter(both),
             [](const auto& a, const auto& b) { return a.first < b.first; });
  claimed = merged(both);
  return union_length_ns(claimed) - before;
}

// The window split into categories that cannot overlap, so they add up to it on every
// rank, whatever its spans: an instant counts as compute if any compute span covers it,
// else optimizer, else data, else exposed communication (communication outside work and
// outside pipeline bubbles), else idle. On a CPU rank these spans never overlap and each
// is its union; on a gpu rank a host-timed span can lie over stamped device work, and the
// device's work wins. Communication (all of it, hidden included) is reported beside them.
void set_partition(RankBreakdown& b, Intervals (&per_category)[kNone], Intervals& bubbles, std::int64_t window_ns) {
  Intervals work = merged(per_category[kCompute]);
  const std::int64_t compute_ns = union_length_ns(work);
  const std::int64_t optimizer_ns = claim(work, per_category[kOptimizer]);
  const std::int64_t data_ns = claim(work, per_category[kData]);
  const std::int64_t work_ns = compute_ns + optimizer_ns + data_ns;
  // A pipeline receive marked Idle is a wait for the neighbour's compute (the bubble),
  // so that part of it counts as idle rather than as communication.
  const std::int64_t waited_ns = overlap_length_ns(per_category[kComm], bubbles);
  const std::int64_t comm_ns = union_length_ns(per_category[kComm]) - waited_ns;
  Intervals outside_comm = work;
  claim(outside_comm, bubbles);
  const std::int64_t exposed_ns = claim(outside_comm, per_category[kComm]);
  b.compute_s = static_cast<double>(compute_ns) / kNsPerS;
  b.optimizer_s = static_cast<double>(optimizer_ns) / kNsPerS;
  b.data_s = static_cast<double>(data_ns) / kNsPerS;
  b.comm_s = static_cast<double>(comm_ns) / kNsPerS;
  b.exposed_comm_s = static_cast<double>(exposed_ns) / kNsPerS;
  b.idle_s = static_cast<double>(std::max<std::int64_t>(0, window_ns - work_ns - exposed_ns)) / kNsPerS;
}
}  // namespace

RankBreakdown breakdown_rank(int rank, const std::vector<Event>& events) {
  RankBreakdown b;
  b.rank = rank;
  b.events_stored = static_cast<std::int64_t>(events.size());
  if (events.empty()) return b;
  const TrainingWindow w = training_window(events);
  b.window_s = w.seconds();
  b.setup_s = static_cast<double>(w.setup_ns) / kNsPerS;
  b.warmup_s = static_cast<double>(w.warmup_ns) / kNsPerS;
  b.steady_steps = w.steady_steps;
  Intervals per_category[kNone];
  Intervals bubbles;
  // Sized once: growing these by doubling cost a tenth of a million-event comparison.
  std::size_t counts[kNone] = {};
  for (const Event& e : events)
    if (const Category c = category_of(e); c != kNone) ++counts[c];
  for (int c = 0; c < kNone; ++c) per_category[c].reserve(counts[c]);
  std::int64_t sends = 0;
  for (const Event& e : events) {
    if (e.kind == EventKind::Send && e.start_ns >= w.start_ns && e.start_ns < w.end_ns) ++sends;
    if (e.kind == EventKind::Idle) add_clipped(bubbles, e, w);
    Category c = category_of(e);
    if (c == kNone) continue;
    add_clipped(per_category[c], e, w);
  }
  // Evaluation is not training: what any span did during it counts nowhere.
  const Intervals evaluation = evaluation_in(events, w);
  if (!evaluation.empty()) {
    for (Intervals& intervals : per_category) intervals = without(intervals, evaluation);
    bubbles = without(bubbles, evaluation);
  }
  set_partition(b, per_category, bubbles, w.end_ns - w.start_ns - w.evaluation_ns);
  b.sends_per_step = b.steady_steps > 0 ? static_cast<double>(sends) / static_cast<double>(b.steady_steps) : 0.0;
  take_out_descheduled(b, descheduled_time(events, w, bubbles, evaluation));
  return b;
}

// Time is the union of the all-reduce intervals: buckets in flight together share the
// link, so summing their durations would count the same seconds twice.
AllReduceTotals allreduce_totals(const std::vector<Event>& events) {
  AllReduceTotals t;
  Intervals in_flight;
  for (const Event& e : events) {
    if (e.kind != EventKind::AllReduce) continue;
    t.bytes += e.bytes;
    t.count += 1;
    in_flight.emplace_back(e.start_ns, std::max(e.start_ns, e.end_ns));
  }
  t.ns = union_length_ns(in_flight);
  return t;
}

AllReduceStats allreduce_stats(const std::vector<AllReduceTotals>& per_rank, const std::vector<RankBreakdown>& ranks,
                               int world_size, double p2p_gbs) {
  AllReduceStats a;
  double algbw_sum = 0;
  int algbw_ranks = 0;
  for (const AllReduceTotals& t : per_rank) {
    a.bytes += t.bytes;
    a.count += t.count;
    a.seconds += static_cast<double>(t.ns) / kNsPerS;
    // A rank without (timed) all-reduces, or without their sizes (an imported trace that
    // does not record them), has no bandwidth to average.
    if (t.ns <= 0 || t.bytes <= 0) continue;
    algbw_sum += static_cast<double>(t.bytes) / (static_cast<double>(t.ns) / kNsPerS) / 1e9;
    ++algbw_ranks;
  }
  if (algbw_ranks > 0) a.algbw_gbs = algbw_sum / algbw_ranks;
  if (world_size > 1 && std::isfinite(a.algbw_gbs))
    a.busbw_gbs = a.algbw_gbs * 2.0 * (world_size - 1) / world_size;
  a.p2p_gbs = p2p_gbs;
  double comm = 0, exposed = 0;
  for (const RankBreakdown& r : ranks) {
    comm += r.comm_s;
    exposed += r.exposed_comm_s;
  }
  if (comm > 0) a.hidden_fraction = 1.0 - exposed / comm;
  return a;
}

}  // namespace loom::analysis
