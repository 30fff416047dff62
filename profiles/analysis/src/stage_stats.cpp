// Pipeline stage statistics (definitions in stage_stats.h).
#include "loom/analysis/stage_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "loom/analysis/pipeline_replay.h"

#include "figure_parts.h"

namespace loom::analysis {

using trace::Event;
using trace::EventKind;

namespace {
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
}  // namespace

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


namespace {
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

// bubble_theory and bubble_schedule of every stage (stage_stats.h StageStats), in place.
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

}  // namespace

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

PipelineStats pipeline_stats(const Plan& plan, const std::vector<std::vector<Event>>& events_by_rank,
                             const std::vector<trace::MetricRecord>& metrics) {
  std::map<int, StepWork> work;
  for (std::size_t r = 0; r < events_by_rank.size(); ++r)
    if (!events_by_rank[r].empty()) work[static_cast<int>(r)] = step_work(events_by_rank[r]);
  return pipeline_from_work(plan, work, metrics);
}

}  // namespace loom::analysis
