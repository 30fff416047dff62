// The float64 reference of the training-equivalence tests (docs/tests.md, "float64
// reference"). A float32 run of a plan is judged by its error against the plan's single
// process trained in double (the cpu-f64 backend, kernels/cpu), not against another float32
// run: two float32 runs that sum in different orders (OpenBLAS and cuBLAS, micro-batches,
// all-reduce) differ by their rounding, which only the double run separates from a defect.
//
// The error of a run is max|run - ref| / max|ref| per parameter tensor and |run - ref| /
// |ref| per step's loss. A run passes when every error is within kMultiple times the CPU's
// own: the same single process in float32 on the CPU backend, against the same reference,
// for the same tensor (or step), raised to kFloor where that is smaller.
#pragma once

#include <QString>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/checkpoint.h"
#include "loom/engine/trainer.h"
#include "loom/kernels/backend.h"

namespace loom::testing {

// Measured on the CPU (docs/tests.md has the table): see the values' comments there.
constexpr double kMultiple = 4.0;
constexpr double kFloor = 1e-6;

// What a test keeps of a training run: rank 0's loss per step and every parameter.
struct TrainedRun {
  std::vector<double> losses;
  std::vector<engine::NamedTensor> params;
  std::string error;
};

// The plan as one process: no replicas, stages, micro-batches or accumulation. In exact
// arithmetic every synchronous strategy of the plan computes this process's steps
// (gradients scaled by the global batch, dropout keyed by the global sample index).
inline Plan single_process_plan(Plan plan) {
  plan.parallel = ParallelSpec{};
  plan.parallel.devices.assign(1, DeviceSpec{});
  return plan;
}

// The plan's single process trained through `backend` (cpu-f64 for the reference).
inline TrainedRun train_single_process(const Plan& plan, kernels::Backend& backend) {
  const Plan single = single_process_plan(plan);
  auto data = data::load_dataset(single.data);
  TrainedRun run;
  if (!data.ok()) {
    run.error = data.error().describe();
    return run;
  }
  std::vector<PlanError> errors;
  auto loop = engine::make_training_loop(single, infer_model(single, &errors), *data, nullptr, nullptr, backend);
  engine::TrainerHooks hooks;
  hooks.on_step = [&](const engine::StepProgress& p) { run.losses.push_back(p.loss); };
  run.error = loop->run(hooks).error;
  if (!backend.status().ok()) run.error += backend.status().error().describe();
  auto params = loop->gather_params();
  if (params.ok()) run.params = *params;
  else run.error += params.error().describe();
  return run;
}

// Errors of one run against the reference, per parameter tensor and per step's loss.
struct Deviation {
  std::vector<double> params;
  std::vector<double> losses;
  double worst_param() const { return params.empty() ? 0 : *std::max_element(params.begin(), params.end()); }
  double worst_loss() const { return losses.empty() ? 0 : *std::max_element(losses.begin(), losses.end()); }
};

inline Deviation deviation(const TrainedRun& ref, const std::vector<engine::NamedTensor>& params,
                           const std::vector<double>& losses = {}) {
  Deviation d;
  for (std::size_t i = 0; i < ref.params.size(); ++i)
    d.params.push_back(i < params.size() && params[i].name == ref.params[i].name
                           ? engine::relative_difference(ref.params[i].values, params[i].values)
                           : INFINITY);
  for (std::size_t s = 0; s < losses.size() && s < ref.losses.size(); ++s)
    d.losses.push_back(std::abs(losses[s] - ref.losses[s]) / std::abs(ref.losses[s]));
  return d;
}

// kMultiple * max(cpu, kFloor): what a run's error may be where the CPU's is `cpu`.
inline double bound_for(double cpu) { return kMultiple * std::max(cpu, kFloor); }

// Empty when every error of `run` is within the bound set by `cpu` (the float32 single
// process on the CPU); otherwise names the first tensor or step outside it.
inline QString outside_bound(const TrainedRun& ref, const Deviation& run, const Deviation& cpu) {
  if (run.params.size() != cpu.params.size()) return "the run has another number of parameter tensors";
  for (std::size_t i = 0; i < run.params.size(); ++i)
    if (!(run.params[i] <= bound_for(cpu.params[i])))
      return QString("%1: error %2 against float64, the CPU's %3, bound %4")
          .arg(QString::fromStdString(ref.params[i].name)).arg(run.params[i], 0, 'g', 3)
          .arg(cpu.params[i], 0, 'g', 3).arg(bound_for(cpu.params[i]), 0, 'g', 3);
  for (std::size_t s = 0; s < run.losses.size() && s < cpu.losses.size(); ++s)
    if (!(run.losses[s] <= bound_for(cpu.losses[s])))
      return QString("step %1 loss: error %2 against float64, the CPU's %3, bound %4")
          .arg(s + 1).arg(run.losses[s], 0, 'g', 3).arg(cpu.losses[s], 0, 'g', 3)
          .arg(bound_for(cpu.losses[s]), 0, 'g', 3);
  return {};
}

// One line for the log: the worst tensor error and the tensor's name.
inline QString describe(const TrainedRun& ref, const Deviation& d) {
  std::size_t worst = 0;
  for (std::size_t i = 0; i < d.params.size(); ++i)
    if (d.params[i] > d.params[worst]) worst = i;
  return QString("params %1 (%2), losses %3")
      .arg(d.worst_param(), 0, 'g', 3)
      .arg(d.params.empty() ? QString() : QString::fromStdString(ref.params[worst].name))
      .arg(d.worst_loss(), 0, 'g', 3);
}

}  // namespace loom::testing
