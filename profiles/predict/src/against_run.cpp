// A prediction against a measured run (see against_run.h).
#include "loom/predict/against_run.h"

#include <algorithm>
#include <map>
#include <set>

#include "loom/analysis/stats.h"

namespace loom::predict {

using trace::Event;
using trace::EventKind;

bool compared_kind(EventKind kind) {
  switch (kind) {
    case EventKind::DataLoad:
    case EventKind::Forward:
    case EventKind::Loss:
    case EventKind::Backward:
    case EventKind::Optimizer:
    case EventKind::AllReduce:
    case EventKind::Send:
    case EventKind::Wait:
    case EventKind::Idle:
    case EventKind::InjectedDelay:
      return true;
    default:
      return false;
  }
}

namespace {

// One rank's time per kind in each steady step (steps after its first); the median.
std::map<EventKind, double> measured_per_kind(const std::vector<Event>& events, std::set<std::int32_t>& steps) {
  std::int32_t first = INT32_MAX;
  for (const Event& e : events)
    if (e.kind == EventKind::Step) first = std::min(first, e.step);
  std::map<EventKind, std::map<std::int32_t, double>> per_step;
  for (const Event& e : events) {
    if (e.step <= first) continue;
    if (e.kind == EventKind::Step) steps.insert(e.step);
    if (compared_kind(e.kind)) per_step[e.kind][e.step] += double(e.end_ns - e.start_ns) / 1e6;
  }
  std::map<EventKind, double> out;
  for (auto& [kind, by_step] : per_step) {
    std::vector<double> v;
    for (std::int32_t s : steps) v.push_back(by_step.count(s) ? by_step[s] : 0.0);  // a step without it: 0
    out[kind] = analysis::median(v, 0.0);
  }
  return out;
}

// Each rank's device_memory_* metrics (the last of each name) beside its prediction.
Expected<std::vector<MemoryAgainstRun>> memory_against(const Prediction& prediction, store::RunStore& store, std::int64_t run_id) {
  auto metrics = store.load_metrics(run_id);
  if (!metrics.ok()) return metrics.error();
  std::map<int, std::map<std::string, double>> reported;
  for (const trace::MetricRecord& m : *metrics)
    if (m.name.starts_with("device_memory_")) reported[m.rank][m.name] = m.value;
  std::vector<MemoryAgainstRun> out;
  for (std::size_t rank = 0; rank < prediction.memory.size(); ++rank) {
    const RankMemory& p = prediction.memory[rank];
    MemoryAgainstRun m{int(rank), p.total(), -1, p.parameters + p.gradients + p.optimizer_state, -1, p.activations + p.workspace, -1};
    if (auto it = reported.find(int(rank)); it != reported.end() && it->second.count("device_memory_bytes")) {
      auto& r = it->second;
      m.measured_total = std::int64_t(r["device_memory_bytes"]);
      m.measured_weights = std::int64_t(r["device_memory_parameters_bytes"] + r["device_memory_gradients_bytes"] +
                                        r["device_memory_optimizer_bytes"]);
      m.measured_rest = m.measured_total - m.measured_weights;
    }
    out.push_back(m);
  }
  return out;
}

}  // namespace

Expected<AgainstRun> against_run(const Prediction& prediction, store::RunStore& store, std::int64_t run_id) {
  auto run = store.load_run(run_id);
  if (!run.ok()) return run.error();
  int ranks = 0;
  for (const PredictedSpan& s : prediction.spans) ranks = std::max(ranks, s.rank + 1);
  if (run->world_size != ranks)
    return make_error(ErrorCode::InvalidArgument,
                      "run " + std::to_string(run_id) + " has " + std::to_string(run->world_size) + " ranks, the prediction " +
                          std::to_string(ranks),
                      "compare a prediction with a run of the same plan");
  AgainstRun out;
  out.predicted_step_ms = prediction.step_ms;
  std::map<std::int32_t, double> slowest;
  for (int rank = 0; rank < ranks; ++rank) {
    auto events = store.load_events(run_id, rank);
    if (!events.ok()) return events.error();
    std::set<std::int32_t> steps;
    std::map<EventKind, double> measured = measured_per_kind(*events, steps);
    for (const Event& e : *events)
      if (e.kind == EventKind::Step && steps.count(e.step)) slowest[e.step] = std::max(slowest[e.step], double(e.end_ns - e.start_ns) / 1e6);
    std::map<EventKind, double> predicted;
    for (const PredictedSpan& s : prediction.spans)
      if (s.rank == rank && compared_kind(s.kind)) predicted[s.kind] += (s.end_ms - s.start_ms) / std::max(1, prediction.cycle_steps);
    std::set<EventKind> kinds;
    for (const auto& [k, ms] : measured) kinds.insert(k);
    for (const auto& [k, ms] : predicted) kinds.insert(k);
    for (EventKind k : kinds) out.kinds.push_back({rank, k, predicted[k], measured[k]});
  }
  std::vector<double> steps;
  for (const auto& [step, ms] : slowest) steps.push_back(ms);
  out.measured_step_ms = analysis::median(steps, 0.0);
  out.steady_steps = std::int64_t(steps.size());
  auto memory = memory_against(prediction, store, run_id);
  if (!memory.ok()) return memory.error();
  out.memory = std::move(*memory);
  return out;
}

}  // namespace loom::predict
