// The training window and steady steps (see training_window.h).
#include "loom/analysis/training_window.h"

#include <algorithm>
#include <iterator>

#include "figure_parts.h"

namespace loom::analysis {

using trace::Event;
using trace::EventKind;

// The first step index that counts as steady: the (kWarmupSteps+1)-th distinct step, or the
// first step while there are no more (training_window.h).
std::int32_t first_steady_step(const std::vector<Event>& events) {
  std::set<std::int32_t> steps;
  for (const Event& e : events)
    if (e.kind == EventKind::Step) steps.insert(e.step);
  if (steps.empty()) return std::numeric_limits<std::int32_t>::max();
  if (steps.size() <= static_cast<std::size_t>(kWarmupSteps)) return *steps.begin();
  return *std::next(steps.begin(), kWarmupSteps);
}


namespace {
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
}  // namespace

// The evaluations inside the window (Evaluate spans on any stream: a rank evaluating, or
// waiting for the rank that does), merged: not training, so out of the window.
Intervals evaluation_in(const std::vector<Event>& events, const TrainingWindow& w) {
  Intervals out;
  for (const Event& e : events)
    if (e.kind == EventKind::Evaluate) add_clipped(out, e, w);
  return merged(out);
}

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

}  // namespace loom::analysis
