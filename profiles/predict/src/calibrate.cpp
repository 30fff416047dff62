// calibrate(): the costs of every calibrating run of a host, then each run's residual,
// which needs the predictor (see calibration.h).
#include <algorithm>

#include "loom/predict/calibration.h"
#include "loom/predict/predictor.h"

namespace loom::predict {

Expected<Calibration> calibrate(store::RunStore& store, const std::string& host) {
  auto runs = store.list_runs();
  if (!runs.ok()) return runs.error();
  std::vector<trace::RunRecord> ordered = *runs;
  std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  Calibration cal;
  cal.host = host;
  std::vector<ObservedRun> observed;
  std::vector<Observation> all;
  for (const trace::RunRecord& r : ordered) {
    if (!host.empty() && r.host != host) continue;
    auto serving = observe_serving_run(store, r.id);
    if (!serving.ok()) return serving.error();
    if (*serving) {
      cal.runs.push_back(r.id);
      all.insert(all.end(), (*serving)->begin(), (*serving)->end());
      continue;
    }
    auto seen = observe_run(store, r.id);
    if (!seen.ok()) return seen.error();
    if (!*seen) continue;
    cal.runs.push_back(r.id);
    all.insert(all.end(), (*seen)->observations.begin(), (*seen)->observations.end());
    observed.push_back(std::move(**seen));
  }
  cal.costs = fit_costs(all);
  // What each run measured beyond what its own costs predict (negative where the model
  // predicts more: kept, and a cost is never used below 0).
  std::vector<Observation> residuals;
  for (const ObservedRun& run : observed) {
    auto predicted = predict_step(run.plan, cal, {run.cores});
    if (!predicted.ok() || run.steps == 0) continue;  // a plan the predictor does not cover
    const ParallelSpec& p = run.plan.parallel;
    const double ops = 2.0 * std::max(1, p.microbatches) * std::max(1, p.grad_accumulation);
    residuals.push_back({residual_key(run.plan, run.device), 0.0, ops, run.step_ms - predicted->step_ms, run.steps});
  }
  for (auto& [key, cost] : fit_costs(residuals)) cal.costs[key] = std::move(cost);
  return cal;
}

}  // namespace loom::predict
