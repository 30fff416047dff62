// Run analysis over the store; the category definitions are in analysis.h. Time per
// category is the union of its intervals so nested spans count once.
#include "loom/analysis/analysis.h"

#include "loom/analysis/import_kineto.h"
#include "loom/analysis/pipeline_replay.h"
#include "loom/analysis/stats.h"
#include "loom/core/model_info.h"
#include "loom/trace/clock_align.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace loom::analysis {

namespace {
using trace::Event;
using trace::EventKind;
using Intervals = std::vector<std::pair<std::int64_t, std::int64_t>>;

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

constexpr double kNsPerS = 1e9;

double last_value(const std::vector<trace::MetricRecord>& metrics) {
  // load_metrics orders by step then time: the last row is the latest.
  return metrics.empty() ? std::numeric_limits<double>::quiet_NaN() : metrics.back().value;
}

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

// Orders by start, which is all merging needs. Intervals built from a rank's events in
// stored order are sorted already, so the check usually saves the sort.
void sort_by_start(Intervals& intervals) {
  constexpr auto by_start = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (!std::is_sorted(intervals.begin(), intervals.end(), by_start))
    std::sort(intervals.begin(), intervals.end(), by_start);
}

// Sorted, disjoint, non-empty intervals covering the same points as the input.
Intervals merged(Intervals& intervals) {
  sort_by_start(intervals);
  Intervals out;
  for (const auto& [s, e] : intervals) {
    if (e <= s) continue;
    if (!out.empty() && s <= out.back().second) {
      out.back().second = std::max(out.back().second, e);
    } else {
      out.emplace_back(s, e);
    }
  }
  return out;
}

// Per-rank all-reduce totals; algbw is averaged over ranks, so it is kept per rank.
struct AllReduceTotals {
  std::int64_t bytes = 0, count = 0, ns = 0;
};

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
}  // namespace

std::int64_t overlap_length_ns(Intervals& a, Intervals& b) {
  const Intervals ma = merged(a), mb = merged(b);
  std::int64_t total = 0;
  std::size_t i = 0, j = 0;
  while (i < ma.size() && j < mb.size()) {
    const std::int64_t lo = std::max(ma[i].first, mb[j].first);
    const std::int64_t hi = std::min(ma[i].second, mb[j].second);
    if (hi > lo) total += hi - lo;
    // The interval that ends first cannot overlap anything further in the other list.
    if (ma[i].second < mb[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return total;
}

std::int64_t union_length_ns(Intervals& intervals) {
  sort_by_start(intervals);
  std::int64_t total = 0;
  std::int64_t cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& [s, e] : intervals) {
    if (e <= s) continue;  // empty or malformed span
    if (open && s <= cur_end) {
      cur_end = std::max(cur_end, e);
      continue;
    }
    if (open) total += cur_end - cur_start;
    cur_start = s;
    cur_end = e;
    open = true;
  }
  if (open) total += cur_end - cur_start;
  return total;
}

namespace {
// The first step index that counts as steady: the (kWarmupSteps+1)-th distinct step, or the
// first step while there are no more (analysis.h training_window).
std::int32_t first_steady_step(const std::vector<Event>& events) {
  std::set<std::int32_t> steps;
  for (const Event& e : events)
    if (e.kind == EventKind::Step) steps.insert(e.step);
  if (steps.empty()) return std::numeric_limits<std::int32_t>::max();
  if (steps.size() <= static_cast<std::size_t>(kWarmupSteps)) return *steps.begin();
  return *std::next(steps.begin(), kWarmupSteps);
}

// Window from the events other than Setup: ranks that record no steps (servers).
TrainingWindow window_without_steps(const std::vector<Event>& events, TrainingWindow w) {
  bool any = false;
  for (const Event& e : events) {
    if (e.kind == EventKind::Setup) continue;
    w.start_ns = any ? std::min(w.start_ns, e.start_ns) : e.start_ns;
    w.end_ns = any ? std::max(w.end_ns, e.end_ns) : e.end_ns;
    any = true;
  }
  return w;
}

// Appends [e.start, e.end) cut to the window, if anything is left of it.
void add_clipped(Intervals& out, const Event& e, const TrainingWindow& w) {
  const std::int64_t s = std::max(e.start_ns, w.start_ns), t = std::min(e.end_ns, w.end_ns);
  if (t > s) out.emplace_back(s, t);
}

// The evaluations inside the window (Evaluate spans on any stream: a rank evaluating, or
// waiting for the rank that does), merged: not training, so out of the window.
Intervals evaluation_in(const std::vector<Event>& events, const TrainingWindow& w) {
  Intervals out;
  for (const Event& e : events)
    if (e.kind == EventKind::Evaluate) add_clipped(out, e, w);
  return merged(out);
}

// `intervals` less every point of `removed` (sorted, disjoint).
Intervals without(const Intervals& intervals, const Intervals& removed) {
  if (removed.empty()) return intervals;
  Intervals out;
  out.reserve(intervals.size());
  for (auto [s, e] : intervals) {
    auto it = std::upper_bound(removed.begin(), removed.end(), s,
                               [](std::int64_t t, const std::pair<std::int64_t, std::int64_t>& r) { return t < r.second; });
    for (; it != removed.end() && it->first < e && s < e; ++it) {
      if (it->first > s) out.emplace_back(s, it->first);
      s = std::max(s, it->second);
    }
    if (s < e) out.emplace_back(s, e);
  }
  return out;
}
}  // namespace

TrainingWindow training_window(const std::vector<Event>& events) {
  TrainingWindow w;
  Intervals setup, warmup;
  const std::int32_t steady_from = first_steady_step(events);
  for (const Event& e : events) {
    if (e.kind == EventKind::Setup) setup.emplace_back(e.start_ns, e.end_ns);
    if (e.kind != EventKind::Step) continue;
    if (e.step < steady_from) {
      warmup.emplace_back(e.start_ns, e.end_ns);
      continue;
    }
    w.start_ns = w.from_steps ? std::min(w.start_ns, e.start_ns) : e.start_ns;
    w.end_ns = w.from_steps ? std::max(w.end_ns, e.end_ns) : e.end_ns;
    w.from_steps = true;
    ++w.steady_steps;
  }
  w.setup_ns = union_length_ns(setup);
  w.warmup_ns = union_length_ns(warmup);
  if (!w.from_steps) w = window_without_steps(events, w);
  Intervals evaluation = evaluation_in(events, w);
  w.evaluation_ns = union_length_ns(evaluation);
  return w;
}

namespace {
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

// Descheduled time (docs/figures.md) inside communication and inside waiting. A span's
// amount cannot be placed within it, so a span counts when it starts in the window; only
// the outermost span per stream counts (a nested span's time is its parent's), and a
// communication span inside a pipeline bubble is the bubble's (the Idle span has it).
// Whether [start, end) meets any of `sorted` (merged: sorted and disjoint), by binary search.
bool meets_any(const Intervals& sorted, std::int64_t start, std::int64_t end) {
  auto it = std::upper_bound(sorted.begin(), sorted.end(), start,
                             [](std::int64_t t, const std::pair<std::int64_t, std::int64_t>& i) { return t < i.second; });
  return it != sorted.end() && it->first < end && start < end;
}

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
}  // namespace

std::set<std::int32_t> steady_step_numbers(const std::vector<Event>& events, std::int64_t from, std::int64_t to) {
  std::set<std::int32_t> all, from_steps;
  std::int32_t last = -1;  // a step's events are mostly together: skip the set for repeats
  for (const Event& e : events) {
    if (e.step < 0 || e.kind == EventKind::Setup) continue;
    if (e.step != last) all.insert(e.step);
    last = e.step;
    if (e.kind == EventKind::Step) from_steps.insert(e.step);
  }
  std::set<std::int32_t> steady;
  int skipped = 0;
  for (std::int32_t s : from_steps.empty() ? all : from_steps) {
    if (skipped++ < kWarmupSteps) continue;
    if (s >= from && s < to) steady.insert(s);
  }
  return steady;
}

namespace {
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

namespace {
// Steady throughput from per-rank windows (analysis.h Throughput); offsets by rank.
Throughput throughput_from_windows(const Plan& plan, const std::map<int, TrainingWindow>& windows,
                                   const std::vector<std::int64_t>& offsets_ns) {
  Throughput t;
  const std::int64_t per_step = plan.training.batch / std::max(1, plan.parallel.data_parallel);
  std::int64_t start = 0, end = 0;
  // Every rank takes part in each evaluation at once (data parallel: a barrier ends it;
  // a pipeline: its all-reduce), so the longest rank's evaluations are the run's.
  std::int64_t evaluation = 0;
  bool any = false;
  for (const auto& [rank, w] : windows) {
    const RankRole role = rank_role(plan, rank);
    if (role.kind != RankKind::Worker || !w.from_steps) continue;
    const std::int64_t offset = rank < static_cast<int>(offsets_ns.size()) ? offsets_ns[std::size_t(rank)] : 0;
    end = any ? std::max(end, w.end_ns - offset) : w.end_ns - offset;
    evaluation = std::max(evaluation, w.evaluation_ns);
    if (role.stage == 0) {
      start = any ? std::min(start, w.start_ns - offset) : w.start_ns - offset;
      t.train_samples += w.steady_steps * per_step;
      t.steady_steps = std::max(t.steady_steps, w.steady_steps);
    }
    any = true;
  }
  if (any && end - evaluation > start && t.train_samples > 0) {
    t.train_s = static_cast<double>(end - start - evaluation) / kNsPerS;
    t.from_steps = true;
  }
  return t;
}
}  // namespace

Throughput steady_throughput(const Plan& plan, const std::vector<std::vector<Event>>& events_by_rank,
                             const std::vector<std::int64_t>& offsets_ns) {
  std::map<int, TrainingWindow> windows;
  for (std::size_t r = 0; r < events_by_rank.size(); ++r)
    if (!events_by_rank[r].empty()) windows[static_cast<int>(r)] = training_window(events_by_rank[r]);
  return throughput_from_windows(plan, windows, offsets_ns);
}

namespace {
// One worker rank's steady step windows and the work inside them (StageStats in
// analysis.h), with the forward / backward / optimizer split the replay needs.
struct StepWork {
  std::int64_t window_ns = 0, busy_ns = 0;
  std::int64_t forward_ns = 0, backward_ns = 0, optimizer_ns = 0;
  std::int64_t steps = 0;
};

bool is_stage_work(const Event& e) {
  if (e.stream != trace::Stream::Compute) return false;
  switch (e.kind) {
    case EventKind::Forward:
    case EventKind::Backward:
    case EventKind::Loss:
    case EventKind::Optimizer:
    case EventKind::DataLoad:
      return true;
    default:
      return false;
  }
}

StepWork step_work(const std::vector<Event>& events) {
  const std::int32_t steady_from = first_steady_step(events);
  Intervals steps, work, forward, backward, optimizer;
  StepWork w;
  for (const Event& e : events) {
    if (e.kind == EventKind::Step && e.step >= steady_from) {
      steps.emplace_back(e.start_ns, e.end_ns);
      ++w.steps;
    }
    if (!is_stage_work(e) || e.step < steady_from) continue;
    work.emplace_back(e.start_ns, e.end_ns);
    if (e.kind == EventKind::Backward) backward.emplace_back(e.start_ns, e.end_ns);
    else if (e.kind == EventKind::Optimizer) optimizer.emplace_back(e.start_ns, e.end_ns);
    else forward.emplace_back(e.start_ns, e.end_ns);  // Forward, Loss, DataLoad
  }
  w.busy_ns = overlap_length_ns(work, steps);
  w.window_ns = union_length_ns(steps);
  w.forward_ns = overlap_length_ns(forward, steps);
  w.backward_ns = overlap_length_ns(backward, steps);
  w.optimizer_ns = overlap_length_ns(optimizer, steps);
  return w;
}

// Ranks without events (not started, or nothing stored yet) would pull the means to zero.
void set_stage_times(StageStats& st, const std::map<int, StepWork>& work, int microbatches) {
  double busy = 0, bubble = 0, window = 0, forward = 0, backward = 0;
  std::int64_t ops = 0;
  int counted = 0;
  for (int r : st.ranks) {
    auto it = work.find(r);
    if (it == work.end()) continue;
    const StepWork& w = it->second;
    busy += static_cast<double>(w.busy_ns) / kNsPerS;
    bubble += static_cast<double>(w.window_ns - w.busy_ns) / kNsPerS;
    window += static_cast<double>(w.window_ns) / kNsPerS;
    forward += static_cast<double>(w.forward_ns);
    backward += static_cast<double>(w.backward_ns);
    ops += w.steps * microbatches;
    ++counted;
  }
  if (counted == 0) return;
  st.busy_s = busy / counted;
  st.bubble_s = bubble / counted;
  if (window > 0) st.bubble_fraction = bubble / window;
  if (ops > 0) {
    st.forward_ms = forward / static_cast<double>(ops) / 1e6;
    st.backward_ms = backward / static_cast<double>(ops) / 1e6;
  }
}

// Per step, the mean optimizer time of a stage's ranks (the replay's "other" work).
double optimizer_ms_per_step(const StageStats& st, const std::map<int, StepWork>& work) {
  double ns = 0;
  std::int64_t steps = 0;
  for (int r : st.ranks) {
    auto it = work.find(r);
    if (it == work.end()) continue;
    ns += static_cast<double>(it->second.optimizer_ns);
    steps += it->second.steps;
  }
  return steps > 0 ? ns / static_cast<double>(steps) / 1e6 : 0.0;
}

void set_stage_metrics(StageStats& st, const std::vector<trace::MetricRecord>& metrics) {
  for (const trace::MetricRecord& m : metrics) {
    if (std::find(st.ranks.begin(), st.ranks.end(), m.rank) == st.ranks.end() || !std::isfinite(m.value)) continue;
    const auto v = static_cast<std::int64_t>(std::llround(m.value));
    if (m.name == "max_in_flight") st.max_in_flight = std::max(st.max_in_flight, v);
    if (m.name == "peak_activation_bytes") st.peak_activation_bytes = std::max(st.peak_activation_bytes, v);
  }
}

// The replay assumes a chain of stages: a parallel block with a branch on another stage
// sends one value to two stages, which a chain does not model.
bool is_stage_chain(const Plan& plan) {
  for (const LayerSpec& layer : plan.model.layers)
    for (const BranchSpec& branch : layer.branches)
      if (branch.stage >= 0 && branch.stage != layer.stage) return false;
  return true;
}

// bubble_theory and bubble_schedule of every stage (analysis.h StageStats), in place.
void set_replayed_bubbles(PipelineStats& ps, const Plan& plan, const std::map<int, StepWork>& work) {
  std::vector<StageOpTimes> own, uniform;
  StageOpTimes mean;
  for (const StageStats& st : ps.stages_stats) {
    if (!std::isfinite(st.forward_ms) || !std::isfinite(st.backward_ms)) return;  // a stage without steady steps
    own.push_back({st.forward_ms, st.backward_ms, optimizer_ms_per_step(st, work)});
    mean.forward += own.back().forward / ps.stages;
    mean.backward += own.back().backward / ps.stages;
    mean.other += own.back().other / ps.stages;
  }
  if (!is_stage_chain(plan) || plan.parallel.grad_accumulation > 1) return;  // chain, one schedule per step
  uniform.assign(own.size(), mean);
  const auto replayed = replay_step(plan.parallel.schedule, ps.microbatches, own);
  const auto scheduled = replay_step(plan.parallel.schedule, ps.microbatches, uniform);
  if (replayed.size() != ps.stages_stats.size() || scheduled.size() != replayed.size()) return;
  for (std::size_t s = 0; s < replayed.size(); ++s) {
    ps.stages_stats[s].bubble_theory = replayed[s].bubble_fraction();
    ps.stages_stats[s].bubble_schedule = scheduled[s].bubble_fraction();
  }
}

// Imbalance across stages and, past kImbalanceWarning, a warning in plain words.
void set_imbalance(PipelineStats& ps) {
  if (ps.stages < 2) return;
  const StageStats *busiest = nullptr, *idlest = nullptr;
  for (const StageStats& st : ps.stages_stats) {
    if (st.busy_s <= 0) return;  // a stage without steady work yet: nothing to compare
    if (!busiest || st.busy_s > busiest->busy_s) busiest = &st;
    if (!idlest || st.busy_s < idlest->busy_s) idlest = &st;
  }
  ps.imbalance = busiest->busy_s / idlest->busy_s - 1.0;
  if (ps.imbalance <= kImbalanceWarning) return;
  char text[320];
  std::snprintf(text, sizeof text,
                "stages are unbalanced: stage %d computes %.3f s, stage %d only %.3f s (%.1fx). Most of "
                "stage %d's bubble is waiting for stage %d, not the schedule; move layers to balance them.",
                busiest->stage, busiest->busy_s, idlest->stage, idlest->busy_s, 1.0 + ps.imbalance, idlest->stage,
                busiest->stage);
  ps.warning = text;
}

// `work` holds the ranks that have events; stored runs and live views fill it differently.
PipelineStats pipeline_from_work(const Plan& plan, const std::map<int, StepWork>& work,
                                 const std::vector<trace::MetricRecord>& metrics) {
  const ParallelSpec& par = plan.parallel;
  PipelineStats ps;
  ps.schedule = schedule_name(par.schedule);
  ps.stages = std::max(1, par.stages);
  ps.microbatches = std::max(1, par.microbatches);
  ps.bubble_convention = "of stage step time";
  ps.stages_stats.resize(static_cast<std::size_t>(ps.stages));
  for (int s = 0; s < ps.stages; ++s) ps.stages_stats[static_cast<std::size_t>(s)].stage = s;
  for (int r = 0; r < world_size(plan); ++r) {
    const RankRole role = rank_role(plan, r);
    if (role.kind == RankKind::Worker && role.stage >= 0 && role.stage < ps.stages)
      ps.stages_stats[static_cast<std::size_t>(role.stage)].ranks.push_back(r);
  }
  const double textbook = static_cast<double>(ps.stages - 1) / (ps.microbatches + ps.stages - 1);
  for (StageStats& st : ps.stages_stats) {
    set_stage_times(st, work, ps.microbatches);
    st.bubble_textbook = textbook;
    set_stage_metrics(st, metrics);
  }
  set_replayed_bubbles(ps, plan, work);
  set_imbalance(ps);
  return ps;
}
}  // namespace

PipelineStats pipeline_stats(const Plan& plan, const std::vector<std::vector<Event>>& events_by_rank,
                             const std::vector<trace::MetricRecord>& metrics) {
  std::map<int, StepWork> work;
  for (std::size_t r = 0; r < events_by_rank.size(); ++r)
    if (!events_by_rank[r].empty()) work[static_cast<int>(r)] = step_work(events_by_rank[r]);
  return pipeline_from_work(plan, work, metrics);
}

namespace {
// Time blocked in Wait spans (a pull, the ssp bound), counted once where spans nest.
std::int64_t wait_ns(const std::vector<Event>& events) {
  Intervals waits;
  for (const Event& e : events)
    if (e.kind == EventKind::Wait) waits.emplace_back(e.start_ns, e.end_ns);
  return union_length_ns(waits);
}

struct Distribution {
  double mean = 0, p50 = 0, p95 = 0;
  std::int64_t max = 0;
};

Distribution distribution(std::vector<std::int64_t> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.mean = mean(values);
  d.p50 = double(nearest_rank(values, 50));
  d.p95 = double(nearest_rank(values, 95));
  d.max = values.back();
  return d;
}

// The worker ranks of the plan, plus any rank an update names (a plan edited after the run
// must not hide a worker's updates).
std::set<int> worker_ranks(const Plan& plan, const std::vector<trace::UpdateRecord>& updates) {
  std::set<int> ranks;
  const int world = world_size(plan);
  for (int r = 0; r < world; ++r)
    if (rank_role(plan, r).kind == RankKind::Worker) ranks.insert(r);
  for (const auto& u : updates) ranks.insert(u.worker);
  return ranks;
}

// staleness_stats with the per-rank Wait totals already reduced (summarize_run loads one
// rank at a time and keeps only these).
StalenessStats staleness_from(const std::vector<trace::UpdateRecord>& updates, const std::map<int, std::int64_t>& waits,
                              const Plan& plan) {
  StalenessStats st;
  st.present = !updates.empty();
  st.mode = std::string(sync_mode_name(plan.parallel.sync.mode));
  st.bound = plan.parallel.sync.mode == SyncMode::Ssp ? plan.parallel.sync.bound : -1;
  std::map<int, std::vector<std::int64_t>> by_worker;
  std::vector<std::int64_t> all;
  all.reserve(updates.size());
  for (const auto& u : updates) {
    all.push_back(u.staleness);
    by_worker[u.worker].push_back(u.staleness);
  }
  const Distribution overall = distribution(std::move(all));
  st.mean = overall.mean;
  st.p50 = overall.p50;
  st.p95 = overall.p95;
  st.max = overall.max;
  for (int r : worker_ranks(plan, updates)) {
    const std::vector<std::int64_t>& mine = by_worker[r];
    const Distribution d = distribution(mine);
    const auto w = waits.find(r);
    const double wait_s = w == waits.end() ? 0.0 : static_cast<double>(w->second) / kNsPerS;
    st.workers.push_back({r, std::int64_t(mine.size()), d.mean, d.p50, d.p95, d.max, wait_s});
  }
  return st;
}
}  // namespace

StalenessStats staleness_stats(const std::vector<trace::UpdateRecord>& updates,
                               const std::vector<std::vector<Event>>& events_by_rank, const Plan& plan) {
  std::map<int, std::int64_t> waits;
  for (std::size_t r = 0; r < events_by_rank.size(); ++r) waits[static_cast<int>(r)] = wait_ns(events_by_rank[r]);
  return staleness_from(updates, waits, plan);
}

namespace {
// What the per-rank pass gathers besides the breakdowns, so no rank is loaded twice.
struct RankScan {
  std::int32_t max_step = -1;
  std::set<std::int32_t> step_spans;  // the numbers of every rank's Step spans
  std::vector<AllReduceTotals> allreduce;
  std::map<int, StepWork> step_work;  // ranks with events
  std::map<int, std::int64_t> wait_ns;  // ranks with events
  std::map<int, TrainingWindow> windows;  // ranks with events
};

// A run's steps, one definition for every source and view (docs/figures.md): the steps
// with a loss value; where none is recorded (an imported trace), the steps that have a
// Step span; else the highest step any event names, plus one.
std::int64_t steps_recorded(const std::set<std::int64_t>& loss_steps, const RankScan& scan) {
  if (!loss_steps.empty()) return static_cast<std::int64_t>(loss_steps.size());
  if (!scan.step_spans.empty()) return static_cast<std::int64_t>(scan.step_spans.size());
  return static_cast<std::int64_t>(scan.max_step) + 1;
}

// Breaks down every rank with a record, with events, or below world_size (a silent rank
// is news too), accumulating all-reduce totals and step work. Ranks are loaded one at a
// time since Event has no rank field, which also bounds memory to the largest rank.
Status add_rank_breakdowns(store::RunStore& store, std::int64_t run_id, const std::vector<trace::RankRecord>& records,
                           RunSummary& s, RankScan& scan, const RankEventsVisitor& visit) {
  auto event_ranks = store.event_ranks(run_id);
  if (!event_ranks.ok()) return event_ranks.error();
  std::set<int> rank_ids(event_ranks->begin(), event_ranks->end());
  for (const auto& r : records) rank_ids.insert(r.rank);
  for (int r = 0; r < s.world_size; ++r) rank_ids.insert(r);
  for (int r : rank_ids) {
    auto events = store.load_events(run_id, r);
    if (!events.ok()) return events.error();
    for (const Event& e : *events) {
      scan.max_step = std::max(scan.max_step, e.step);
      if (e.kind == EventKind::Step) scan.step_spans.insert(e.step);
    }
    RankBreakdown b = breakdown_rank(r, *events);
    for (const auto& rec : records)
      if (rec.rank == r) b.events_recorded = rec.events_recorded, b.device = rec.device;
    s.ranks.push_back(b);
    scan.allreduce.push_back(allreduce_totals(*events));
    if (!events->empty()) scan.step_work[r] = step_work(*events);
    if (!events->empty()) scan.wait_ns[r] = wait_ns(*events);
    if (!events->empty()) scan.windows[r] = training_window(*events);
    if (visit) visit(r, std::move(*events));
  }
  return {};
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

std::vector<ClockRow> clock_rows(const std::vector<trace::RankRecord>& records) {
  std::vector<ClockRow> rows;
  for (const auto& r : records) {
    const std::int64_t end = clock::has_end_estimate(r) ? r.offset_end_ns : r.offset_ns;
    rows.push_back({r.rank, r.offset_ns, end, r.uncertainty_ns, clock::drift_ppm(r)});
  }
  return rows;
}

nlohmann::json plan_without_parallelism(const std::string& plan_json) {
  nlohmann::json plan = nlohmann::json::parse(plan_json, nullptr, /*allow_exceptions=*/false);
  if (!plan.is_object()) return nlohmann::json();  // discarded or not a plan: null
  plan.erase("parallel");
  plan.erase("name");
  return plan;
}

// The newest completed single-rank run with the same plan apart from parallelism.
Expected<std::optional<Scaling>> find_scaling(store::RunStore& store, const RunSummary& s) {
  if (s.world_size <= 1 || s.samples_per_s <= 0) return std::optional<Scaling>();
  const nlohmann::json plan = plan_without_parallelism(s.run.plan_json);
  if (plan.is_null()) return std::optional<Scaling>();
  auto runs = store.list_runs();  // newest first
  if (!runs.ok()) return runs.error();
  for (const trace::RunRecord& r : *runs) {
    if (r.id == s.run.id || r.status != trace::RunStatus::Completed || r.world_size != 1 || r.samples_per_s() <= 0) continue;
    if (plan_without_parallelism(r.plan_json) != plan) continue;
    Scaling sc;
    sc.reference_run_id = r.id;
    sc.reference_samples_per_s = r.samples_per_s();
    sc.efficiency = s.samples_per_s / (s.world_size * sc.reference_samples_per_s);
    return std::optional<Scaling>(sc);
  }
  return std::optional<Scaling>();
}
// Every plan has stages (one without pipelining); a plan that no longer parses has none.
Expected<std::optional<PipelineStats>> pipeline_of_run(store::RunStore& store, const trace::RunRecord& run,
                                                       const std::map<int, StepWork>& work) {
  const PlanResult plan = parse_plan(run.plan_json);
  if (!plan.ok()) return std::optional<PipelineStats>();
  std::vector<trace::MetricRecord> metrics;
  for (const char* name : {"max_in_flight", "peak_activation_bytes"}) {
    auto m = store.load_metrics(run.id, name);
    if (!m.ok()) return m.error();
    metrics.insert(metrics.end(), m->begin(), m->end());
  }
  return std::optional<PipelineStats>(pipeline_from_work(*plan.plan, work, metrics));
}

// Staleness needs the plan (mode, bound, which ranks are workers); without one, none.
Expected<StalenessStats> staleness_of_run(store::RunStore& store, const trace::RunRecord& run,
                                          const std::map<int, std::int64_t>& waits) {
  const PlanResult plan = parse_plan(run.plan_json);
  if (!plan.ok()) return StalenessStats{};
  auto updates = store.load_updates(run.id);
  if (!updates.ok()) return updates.error();
  return staleness_from(*updates, waits, *plan.plan);
}

Expected<std::optional<DivergenceStats>> divergence_of_run(store::RunStore& store, std::int64_t run_id) {
  auto metrics = store.load_metrics(run_id, "param_divergence");
  if (!metrics.ok()) return metrics.error();
  if (metrics->empty()) return std::optional<DivergenceStats>();
  DivergenceStats d;
  double sum = 0;
  for (const auto& m : *metrics) sum += m.value;
  d.count = std::int64_t(metrics->size());
  d.mean = sum / double(d.count);
  d.last = last_value(*metrics);
  return std::optional<DivergenceStats>(d);
}
Expected<std::optional<ServingStats>> serving_of_run(store::RunStore& store, const trace::RunRecord& run) {
  const PlanResult plan = parse_plan(run.plan_json);
  if (!plan.ok() || !plan.plan->serve) return std::optional<ServingStats>();
  auto metrics = store.load_metrics(run.id);
  if (!metrics.ok()) return metrics.error();
  return serving_stats(*plan.plan, *metrics);
}

// The summary's throughput for a serving run: requests per second (serving.h).
void set_serving_throughput(RunSummary& s) {
  if (!s.serving) return;
  const ServingStats& v = *s.serving;
  s.throughput_basis = "serving";
  s.samples_per_s = v.throughput_per_s;
  s.train_samples = v.served;
  s.train_s = v.throughput_per_s > 0 ? double(s.train_samples) / v.throughput_per_s : 0.0;
  s.steady_steps = 0;
}
}  // namespace

namespace {
// Steady throughput (analysis.h Throughput) into the summary; the whole-run figure stays
// beside it. Offsets put every rank's window on rank 0's clock.
void set_throughput(RunSummary& s, const std::map<int, TrainingWindow>& windows,
                    const std::vector<trace::RankRecord>& records) {
  s.wall_samples_per_s = s.wall_s > 0 ? static_cast<double>(s.run.samples) / s.wall_s : 0.0;
  s.samples_per_s = s.wall_samples_per_s;
  s.throughput_basis = "whole run";
  for (const auto& [rank, w] : windows) s.setup_s = std::max(s.setup_s, static_cast<double>(w.setup_ns) / kNsPerS);
  const PlanResult plan = parse_plan(s.run.plan_json);
  if (!plan.ok()) {
    if (kineto::is_imported_plan(s.run.plan_json)) {
      s.throughput_basis = "imported trace";
      s.samples_per_s = std::numeric_limits<double>::quiet_NaN();  // samples per step unknown, not zero
      s.wall_samples_per_s = s.samples_per_s;
      // Its steady steps and window are known as for any run (the critical path uses them).
      for (const auto& [rank, w] : windows) {
        s.steady_steps = std::max(s.steady_steps, w.steady_steps);
        s.train_s = std::max(s.train_s, w.seconds());
      }
    }
    return;
  }
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(std::max(0, s.world_size)), 0);
  for (const auto& r : records)
    if (r.rank >= 0 && r.rank < s.world_size) offsets[std::size_t(r.rank)] = r.offset_ns;
  const Throughput t = throughput_from_windows(*plan.plan, windows, offsets);
  if (!t.from_steps) return;
  s.train_s = t.train_s;
  s.train_samples = t.train_samples;
  s.steady_steps = t.steady_steps;
  s.samples_per_s = static_cast<double>(t.train_samples) / t.train_s;
  s.throughput_basis = "steady steps";
}

// Flags a bandwidth probe far below this host's usual rate (analysis.h kProbeUnusualFraction).
Status check_probe(store::RunStore& store, RunSummary& s) {
  if (!std::isfinite(s.allreduce.p2p_gbs)) return {};
  auto runs = store.list_runs();
  if (!runs.ok()) return runs.error();
  std::vector<double> earlier;
  for (const trace::RunRecord& r : *runs) {
    if (r.id >= s.run.id || r.host != s.run.host || r.world_size != s.world_size) continue;
    auto probe = store.load_metrics(r.id, "p2p_gbs");
    if (!probe.ok()) return probe.error();
    if (!probe->empty() && std::isfinite(probe->back().value)) earlier.push_back(probe->back().value);
    if (earlier.size() >= 20) break;  // the newest 20 are history enough
  }
  if (static_cast<int>(earlier.size()) < kProbeHistory) return {};
  std::sort(earlier.begin(), earlier.end());
  const double median = earlier[earlier.size() / 2];
  if (s.allreduce.p2p_gbs >= kProbeUnusualFraction * median) return {};
  char text[256];
  std::snprintf(text, sizeof text,
                "the bandwidth probe measured %.2f GB/s, below a quarter of this host's usual %.2f GB/s (median of "
                "%zu earlier runs): the machine was probably busy at start; compare communication figures with care",
                s.allreduce.p2p_gbs, median, earlier.size());
  s.warnings.push_back(text);
  return {};
}
}  // namespace

bool same_plan_but_parallelism(const std::string& plan_json_a, const std::string& plan_json_b) {
  const nlohmann::json a = plan_without_parallelism(plan_json_a);
  return !a.is_null() && a == plan_without_parallelism(plan_json_b);
}

namespace {
// Every rank's device_memory_* metrics (the last of each name), as RankMemory rows.
Expected<std::vector<RankMemory>> memory_of_run(store::RunStore& store, std::int64_t run_id) {
  std::map<int, RankMemory> by_rank;
  const std::pair<const char*, std::int64_t RankMemory::*> parts[] = {
      {"device_memory_bytes", &RankMemory::total},
      {"device_memory_parameters_bytes", &RankMemory::parameters},
      {"device_memory_gradients_bytes", &RankMemory::gradients},
      {"device_memory_optimizer_bytes", &RankMemory::optimizer},
      {"device_memory_workspace_bytes", &RankMemory::workspace},
      {"device_memory_activations_bytes", &RankMemory::activations}};
  for (const auto& [name, field] : parts) {
    auto metrics = store.load_metrics(run_id, name);
    if (!metrics.ok()) return metrics.error();
    for (const trace::MetricRecord& m : *metrics) {
      if (field != &RankMemory::total && !by_rank.count(m.rank)) continue;  // parts without a total
      RankMemory& row = by_rank[m.rank];
      row.rank = m.rank;
      row.*field = std::int64_t(m.value);
    }
  }
  std::vector<RankMemory> rows;
  for (const auto& [rank, row] : by_rank) rows.push_back(row);
  return rows;
}
}  // namespace

Expected<RunSummary> summarize_run(store::RunStore& store, std::int64_t run_id,
                                   const RankEventsVisitor& visit_rank_events) {
  auto run = store.load_run(run_id);
  if (!run.ok()) return run.error();
  auto ranks = store.load_ranks(run_id);
  if (!ranks.ok()) return ranks.error();
  RunSummary s;
  s.run = std::move(run).value();
  s.world_size = s.run.world_size;
  s.wall_s = s.run.wall_s;

  RankScan scan;
  LOOM_TRY(add_rank_breakdowns(store, run_id, *ranks, s, scan, visit_rank_events));
  attach_devices(s, *ranks);
  set_throughput(s, scan.windows, *ranks);

  auto loss = store.load_metrics(run_id, "loss");
  if (!loss.ok()) return loss.error();
  auto accuracy = store.load_metrics(run_id, "test_accuracy");
  if (!accuracy.ok()) return accuracy.error();
  auto p2p = store.load_metrics(run_id, "p2p_gbs");
  if (!p2p.ok()) return p2p.error();
  auto norm = store.load_metrics(run_id, "param_norm");
  if (!norm.ok()) return norm.error();
  s.param_norm = last_value(*norm);
  std::set<std::int64_t> loss_steps;
  for (const auto& m : *loss) loss_steps.insert(m.step);
  s.steps = steps_recorded(loss_steps, scan);
  if (s.run.resumed_from != 0 && !loss_steps.empty()) s.resumed_at_step = *loss_steps.begin();
  s.final_loss = last_value(*loss);
  // A loss that became NaN or infinite: where, in every view that lists warnings.
  const auto first_bad = std::find_if(loss->begin(), loss->end(), [](const auto& m) { return !std::isfinite(m.value); });
  if (first_bad != loss->end())
    s.warnings.push_back("the loss diverged at step " + std::to_string(first_bad->step) + " (loss " +
                         (std::isnan(first_bad->value) ? "nan" : "inf") + "): every value up to then is kept");
  s.test_accuracy = last_value(*accuracy);
  s.allreduce = allreduce_stats(scan.allreduce, s.ranks, s.world_size, last_value(*p2p));
  LOOM_TRY(check_probe(store, s));
  s.clock = clock_rows(*ranks);
  auto scaling = find_scaling(store, s);
  if (!scaling.ok()) return scaling.error();
  s.scaling = *scaling;
  auto pipeline = pipeline_of_run(store, s.run, scan.step_work);
  if (!pipeline.ok()) return pipeline.error();
  s.pipeline = std::move(pipeline).value();
  if (s.pipeline && !s.pipeline->warning.empty()) s.warnings.push_back(s.pipeline->warning);
  auto staleness = staleness_of_run(store, s.run, scan.wait_ns);
  if (!staleness.ok()) return staleness.error();
  s.staleness = std::move(staleness).value();
  auto divergence = divergence_of_run(store, run_id);
  if (!divergence.ok()) return divergence.error();
  s.divergence = *divergence;
  auto serving = serving_of_run(store, s.run);
  if (!serving.ok()) return serving.error();
  s.serving = std::move(serving).value();
  set_serving_throughput(s);
  auto memory = memory_of_run(store, run_id);
  if (!memory.ok()) return memory.error();
  s.memory = std::move(memory).value();
  return s;
}

std::vector<std::string> layer_names_by_id(const std::string& plan_json) {
  if (kineto::is_imported_plan(plan_json)) return kineto::imported_layer_names(plan_json);
  PlanResult plan = parse_plan(plan_json);
  if (!plan.ok()) return {};
  std::vector<PlanError> ignored;
  std::vector<std::string> names;
  for (const LayerInfo& l : infer_model(*plan.plan, &ignored).layers) {
    if (!l.id.valid()) continue;
    if (names.size() <= std::size_t(l.id.value)) names.resize(std::size_t(l.id.value) + 1);
    names[std::size_t(l.id.value)] = l.name;
  }
  return names;
}

namespace {
// A serving run's "samples" are the requests its server answered, over the serving span.
Status store_serving_figures(store::RunStore& store, const trace::RunRecord& run) {
  auto serving = serving_of_run(store, run);
  if (!serving.ok()) return serving.error();
  const auto& s = *serving;
  if (!s || s->throughput_per_s <= 0) return {};
  return store.set_training_figures(run.id, double(s->served) / s->throughput_per_s, s->served);
}

}  // namespace

Status store_training_figures(store::RunStore& store, std::int64_t run_id) {
  auto run = store.load_run(run_id);
  if (!run.ok()) return run.error();
  const PlanResult plan = parse_plan(run->plan_json);
  if (!plan.ok()) return {};  // nothing to count samples by: lists keep the whole-run figure
  if (plan.plan->serve) return store_serving_figures(store, *run);
  auto records = store.load_ranks(run_id);
  if (!records.ok()) return records.error();
  const int world = std::max(1, run->world_size);
  std::vector<std::vector<Event>> steps(static_cast<std::size_t>(world));
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(world), 0);
  for (const auto& r : *records)
    if (r.rank >= 0 && r.rank < world) offsets[std::size_t(r.rank)] = r.offset_ns;
  for (int r = 0; r < world; ++r) {
    auto events = store.load_events_of_kind(run_id, r, EventKind::Step);
    if (!events.ok()) return events.error();
    steps[std::size_t(r)] = std::move(events).value();
  }
  const Throughput t = steady_throughput(*plan.plan, steps, offsets);
  if (!t.from_steps) return {};
  return store.set_training_figures(run_id, t.train_s, t.train_samples);
}

namespace {
nlohmann::json allreduce_json(const AllReduceStats& a) {
  return {{"bytes", a.bytes},
          {"count", a.count},
          {"seconds", a.seconds},
          {"algbw_gbs", number_or_null(a.algbw_gbs)},
          {"busbw_gbs", number_or_null(a.busbw_gbs)},
          {"p2p_gbs", number_or_null(a.p2p_gbs)},
          {"hidden_fraction", number_or_null(a.hidden_fraction)}};
}

nlohmann::json clock_json(const std::vector<ClockRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const ClockRow& c : rows) {
    out.push_back({{"rank", c.rank},
                   {"offset_ns", c.offset_ns},
                   {"offset_end_ns", c.offset_end_ns},
                   {"uncertainty_ns", c.uncertainty_ns},
                   {"drift_ppm", c.drift_ppm}});
  }
  return out;
}

nlohmann::json scaling_json(const std::optional<Scaling>& sc) {
  if (!sc) return nullptr;
  return {{"reference_run_id", sc->reference_run_id},
          {"reference_samples_per_s", sc->reference_samples_per_s},
          {"efficiency", sc->efficiency}};
}

nlohmann::json stages_json(const std::optional<PipelineStats>& p) {
  nlohmann::json out = nlohmann::json::array();
  if (!p) return out;
  for (const StageStats& st : p->stages_stats) {
    out.push_back({{"stage", st.stage},
                   {"ranks", st.ranks},
                   {"busy_s", st.busy_s},
                   {"bubble_s", st.bubble_s},
                   {"bubble_fraction", number_or_null(st.bubble_fraction)},
                   {"bubble_theory", number_or_null(st.bubble_theory)},
                   {"bubble_schedule", number_or_null(st.bubble_schedule)},
                   {"bubble_textbook", number_or_null(st.bubble_textbook)},
                   {"forward_ms", number_or_null(st.forward_ms)},
                   {"backward_ms", number_or_null(st.backward_ms)},
                   {"max_in_flight", st.max_in_flight},
                   {"peak_activation_bytes", st.peak_activation_bytes}});
  }
  return out;
}

nlohmann::json staleness_json(const StalenessStats& st) {
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerStaleness& w : st.workers) {
    workers.push_back({{"rank", w.rank},
                       {"updates", w.updates},
                       {"mean", w.mean},
                       {"p50", w.p50},
                       {"p95", w.p95},
                       {"max", w.max},
                       {"wait_s", w.wait_s}});
  }
  nlohmann::json out = {{"mode", st.mode},
                        {"overall", {{"mean", st.mean}, {"p50", st.p50}, {"p95", st.p95}, {"max", st.max}}},
                        {"workers", std::move(workers)}};
  if (st.mode == sync_mode_name(SyncMode::Ssp)) out["bound"] = st.bound;  // meaningless elsewhere
  return out;
}

nlohmann::json divergence_json(const DivergenceStats& d) {
  return {{"count", d.count}, {"mean", number_or_null(d.mean)}, {"last", number_or_null(d.last)}};
}

nlohmann::json ranks_json(const std::vector<RankBreakdown>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : ranks) {
    out.push_back({{"rank", r.rank},
                   {"device", r.device},
                   {"device_info", trace::device_info_to_json(r.device_info)},
                   {"compute_s", r.compute_s},
                   {"comm_s", r.comm_s},
                   {"optimizer_s", r.optimizer_s},
                   {"data_s", r.data_s},
                   {"idle_s", r.idle_s},
                   {"events_recorded", r.events_recorded >= 0 ? nlohmann::json(r.events_recorded) : nlohmann::json()},
                   {"events_stored", r.events_stored},
                   {"exposed_comm_s", r.exposed_comm_s},
                   {"window_s", r.window_s},
                   {"setup_s", r.setup_s},
                   {"warmup_s", r.warmup_s},
                   {"steady_steps", r.steady_steps},
                   {"sends_per_step", r.sends_per_step},
                   {"descheduled_s", r.descheduled_s}});
  }
  return out;
}
}  // namespace

nlohmann::json memory_json(const std::vector<RankMemory>& rows) {
  nlohmann::json out = nlohmann::json::array();
  auto part = [](std::int64_t v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(); };
  for (const RankMemory& m : rows)
    out.push_back({{"rank", m.rank},
                   {"total_bytes", m.total},
                   {"parameters_bytes", part(m.parameters)},
                   {"gradients_bytes", part(m.gradients)},
                   {"optimizer_bytes", part(m.optimizer)},
                   {"workspace_bytes", part(m.workspace)},
                   {"activations_bytes", part(m.activations)}});
  return out;
}

nlohmann::json summary_to_json(const RunSummary& s) {
  nlohmann::json plan = nlohmann::json::parse(s.run.plan_json, nullptr, /*allow_exceptions=*/false);
  if (plan.is_discarded()) plan = nullptr;
  const auto& p = s.pipeline;
  nlohmann::json out = {{"id", s.run.id},
          {"name", s.run.name},
          {"status", s.run.status},
          {"started_unix_ms", s.run.started_unix_ms},
          {"ended_unix_ms", s.run.ended_unix_ms},
          {"error", s.run.error},
          {"resumed_from", s.run.resumed_from != 0 ? nlohmann::json(s.run.resumed_from) : nlohmann::json()},
          {"resumed_at_step", s.resumed_at_step >= 0 ? nlohmann::json(s.resumed_at_step) : nlohmann::json()},
          {"plan", plan},
          {"world_size", s.world_size},
          {"steps", s.steps},
          {"wall_s", s.wall_s},
          {"samples", s.run.samples},
          {"samples_per_s", number_or_null(s.samples_per_s)},
          {"throughput_basis", s.throughput_basis},
          {"train_s", s.train_s},
          {"train_samples", s.train_samples},
          {"steady_steps", s.steady_steps},
          {"warmup_steps", kWarmupSteps},
          {"setup_s", s.setup_s},
          {"wall_samples_per_s", number_or_null(s.wall_samples_per_s)},
          {"warnings", s.warnings},
          {"final_loss", number_or_null(s.final_loss)},
          {"test_accuracy", number_or_null(s.test_accuracy)},
          {"final_param_norm", number_or_null(s.param_norm)},
          {"ranks", ranks_json(s.ranks)},
          {"device_memory", memory_json(s.memory)},
          {"devices", devices_json(s.devices)},
          {"allreduce", allreduce_json(s.allreduce)},
          {"clock", clock_json(s.clock)},
          {"scaling", scaling_json(s.scaling)},
          {"schedule", p ? nlohmann::json(p->schedule) : nlohmann::json()},
          {"microbatches", p ? nlohmann::json(p->microbatches) : nlohmann::json()},
          {"bubble_convention", p ? nlohmann::json(p->bubble_convention) : nlohmann::json()},
          {"stage_imbalance", p ? number_or_null(p->imbalance) : nlohmann::json()},
          {"stages", stages_json(p)}};
  // Optional sections are absent rather than null: most runs have neither.
  if (s.staleness.present) out["staleness"] = staleness_json(s.staleness);
  if (s.divergence) out["divergence"] = divergence_json(*s.divergence);
  if (s.serving) out["serving"] = serving_to_json(*s.serving);
  return out;
}

}  // namespace loom::analysis
