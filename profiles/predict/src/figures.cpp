// Predicted show figures (see figures.h).
#include "loom/predict/figures.h"

#include <cstdio>

#include "loom/predict/serving_prediction.h"

namespace loom::predict {

namespace {

// "/stages/3/max_in_flight" -> 3 for prefix "/stages/" and suffix "/max_in_flight".
std::optional<int> index_in(const std::string& pointer, const std::string& prefix, const std::string& suffix) {
  if (!pointer.starts_with(prefix) || !pointer.ends_with(suffix) || pointer.size() <= prefix.size() + suffix.size()) return {};
  int index = -1;
  if (std::sscanf(pointer.c_str() + prefix.size(), "%d", &index) != 1 || index < 0) return {};
  return index;
}

double count_spans(const Prediction& p, int rank, trace::EventKind kind, bool bytes) {
  double n = 0;
  for (const PredictedSpan& s : p.spans)
    if (s.rank == rank && s.kind == kind) n += bytes ? double(s.bytes) : 1.0;
  return n;
}

PredictedFigure from_step(const std::string& pointer, const Prediction& p, const Plan& plan) {
  if (pointer == "/samples_per_s") return {p.samples_per_s, {}};
  if (pointer == "/allreduce/count") return {count_spans(p, 0, trace::EventKind::AllReduce, false), {}};
  if (pointer == "/allreduce/bytes") return {count_spans(p, 0, trace::EventKind::AllReduce, true), {}};
  if (auto rank = index_in(pointer, "/ranks/", "/sends_per_step")) return {count_spans(p, *rank, trace::EventKind::Send, false), {}};
  if (p.staleness.present && pointer.starts_with("/staleness/overall/")) {
    const std::string which = pointer.substr(std::string("/staleness/overall/").size());
    if (which == "mean") return {p.staleness.mean, {}};
    if (which == "p50") return {p.staleness.p50, {}};
    if (which == "p95") return {p.staleness.p95, {}};
    if (which == "max") return {double(p.staleness.max), {}};
  }
  if (auto stage = index_in(pointer, "/stages/", "/max_in_flight")) {
    const int rank = *stage * std::max(1, plan.parallel.data_parallel);
    if (std::size_t(rank) < p.memory.size()) return {double(p.memory[std::size_t(rank)].in_flight), {}};
  }
  return {std::nullopt, "not predicted: " + pointer};
}

}  // namespace

bool figure_is_per_step(const std::string& pointer) { return pointer.starts_with("/allreduce/"); }

PredictedFigure predicted_figure(const std::string& pointer, const Plan& plan, const Calibration& calibration,
                                 const MachineShape& machine) {
  if (plan.serve) {
    if (pointer != "/serving/mean_batch") return {std::nullopt, "not predicted: " + pointer};
    auto s = predict_serving(plan, calibration, machine);
    if (!s.ok()) return {std::nullopt, s.error().message};
    return {s->mean_batch, {}};
  }
  auto p = predict_step(plan, calibration, machine);
  if (!p.ok()) return {std::nullopt, p.error().message};
  return from_step(pointer, *p, plan);
}

}  // namespace loom::predict
