// The float64 reference of the training-equivalence tests (docs/tests.md, "Float64
// reference"). A float32 run of a plan is judged by its error against the plan's single
// process trained in double (the cpu-f64 backend, kernels/cpu), not against another
// float32 run: two float32 runs that sum in different orders (OpenBLAS and cuBLAS,
// micro-batches, all-reduce) differ by their rounding, which only the double run
// separates from a defect.
//
// Error of a run: max over parameter tensors of max|run - ref| / max|ref|, and max over
// steps of |loss - ref| / |ref|. A run passes when each is within
//     kMultiple * max(the CPU's own error, kFloor, the row's measured spread)
// where the CPU's own error is that of the same single process in float32 on the CPU
// backend. The run's worst tensor, not tensor by tensor: between float32 orderings of one
// plan a single tensor's error varies up to 4.8x (a bias one run rounds luckily), the
// worst tensor's far less on smooth plans.
//
// The spread: where training takes discrete decisions (the sign of a ReLU input, a
// max-pool's winner, Adam's step on a near-zero gradient), a rounding-sized difference
// sometimes flips one, and 20 steps make that flip a visible difference in every tensor.
// Whether a float32 run flips, and when, depends on its rounding, so its error against
// float64 is a random variable: across nine float32 orderings (bench_float64_spread) the
// worst-tensor error varies 1.1-1.2x on smooth plans (tanh, momentum, no max-pool) but
// 2.4x to 69x on plans with such decisions (the CNN under ReLU and Adam), so one CPU run
// does not measure it. Those rows state the largest error seen among the orderings (two
// OpenBLAS thread counts, 18 runs); the smooth rows need none, and they are the sharp ones.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/checkpoint.h"
#include "loom/engine/training_loops.h"
#include "loom/kernels/backend.h"

namespace loom::testing {

// Measured (docs/tests.md, "Float64 reference"). K: valid float32 orderings of a smooth
// plan lie within 1.2x of each other; 4 leaves room for a GPU's own exp/tanh and fused
// multiply-adds. The floor: the smooth rows' CPU error is 3.0e-7..3.9e-7 after 20 steps,
// so the smallest bound, 4e-6, is ~10x it. Sensitivity: a stage boundary that drops the
// 8 low mantissa bits of what it passes (3e-5 relative) fails the GPipe row (6.8e-6);
// one that drops 6 bits (7.6e-6) stays inside (1.7e-6).
constexpr double kMultiple = 4.0;
constexpr double kFloor = 1e-6;

// What a test keeps of a training run: rank 0's loss per step and every parameter.
struct TrainedRun {
  std::vector<double> losses;
  std::vector<engine::NamedTensor> params;
  std::string error;
};

// ReLU -> tanh everywhere, branches included: removes the ReLU kink (the file comment).
inline void relu_to_tanh(std::vector<LayerSpec>& layers) {
  for (LayerSpec& l : layers) {
    if (l.kind == LayerKind::Relu) l.kind = LayerKind::Tanh;
    for (BranchSpec& b : l.branches) relu_to_tanh(b.layers);
  }
}

// The training variants the tests and bench_float64_spread share: "" the plan as it is,
// "tanh" its ReLUs made tanh, "momentum" SGD with momentum 0.9, lr 0.05, weight decay
// 1e-4, "tanh-momentum" both.
inline void apply_variant(Plan& plan, const std::string& variant) {
  if (variant == "tanh" || variant == "tanh-momentum") relu_to_tanh(plan.model.layers);
  if (variant == "momentum" || variant == "tanh-momentum") {
    plan.training.optimizer.kind = OptimizerKind::Momentum;
    plan.training.optimizer.lr = 0.05;
    plan.training.optimizer.momentum = 0.9;
    plan.training.optimizer.weight_decay = 1e-4;
  }
}

// The largest worst-tensor error against float64 among the float32 orderings of the
// single process of (example plan file, variant), 20 steps, for the rows with discrete
// decisions (bench_float64_spread with 1 and 2 OpenBLAS threads on the 2-core CPU VM,
// OpenBLAS 0.3.21; docs/tests.md). 0 for smooth rows: there the CPU's own error
// measures the spread.
inline double measured_spread(const std::string& file, const std::string& variant) {
  struct Row {
    const char* file;
    const char* variant;
    double spread;
  };
  static const Row rows[] = {
      {"mlp_fashion.json", "", 1.12e-4},                  // ReLU, Adam
      {"cnn_fashion.json", "", 9.41e-3},                  // ReLU, max-pool, Adam
      {"cnn_fashion.json", "tanh-momentum", 1.43e-5},     // max-pool
      {"branches_example.json", "", 2.76e-4},             // ReLU, max-pool, Adam, dropout
      {"branches_two_devices.json", "", 4.77e-6},         // ReLU, max-pool
  };
  for (const Row& r : rows)
    if (file == r.file && variant == r.variant) return r.spread;
  return 0;
}

// The plan as one process: no replicas, stages, micro-batches or accumulation. In exact
// arithmetic every synchronous strategy of the plan computes this process's steps
// (gradients scaled by the global batch, dropout keyed by the global sample index).
inline Plan single_process_plan(Plan plan) {
  plan.parallel = ParallelSpec{};
  plan.parallel.devices.assign(1, DeviceSpec{});
  return plan;
}

// Builds the plan's single process on `backend`, lets `prepare` touch it before the
// first step (bench_float64_spread moves its initial parameters), and trains it.
template <class Prepare>
TrainedRun train_single_process(const Plan& plan, kernels::Backend& backend, const Prepare& prepare) {
  const Plan single = single_process_plan(plan);
  auto data = data::load_dataset(single.data);
  TrainedRun run;
  if (!data.ok()) {
    run.error = data.error().describe();
    return run;
  }
  std::vector<PlanError> errors;
  auto loop = engine::make_training_loop(single, infer_model(single, &errors), *data, nullptr, nullptr, backend);
  prepare(*loop);
  engine::TrainerHooks hooks;
  hooks.on_step = [&](const engine::StepProgress& p) { run.losses.push_back(p.loss); };
  run.error = loop->run(hooks).error;
  if (!backend.status().ok()) run.error += backend.status().error().describe();
  auto params = loop->gather_params();
  if (params.ok()) run.params = *params;
  else run.error += params.error().describe();
  return run;
}

// The plan's single process trained through `backend` (cpu-f64 for the reference).
inline TrainedRun train_single_process(const Plan& plan, kernels::Backend& backend) {
  return train_single_process(plan, backend, [](engine::TrainingLoop&) {});
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

// What a run's error may be where the CPU's is `cpu` and the row's spread `spread`.
inline double bound_for(double cpu, double spread = 0) { return kMultiple * std::max({cpu, kFloor, spread}); }

inline std::string format(const char* pattern, double a, double b, double c) {
  char text[160];
  std::snprintf(text, sizeof text, pattern, a, b, c);
  return text;
}

// Empty when the run's errors are within the bounds the CPU's errors set (the file
// comment); otherwise says which is outside, and its worst tensor or step.
inline std::string outside_bound(const TrainedRun& ref, const Deviation& run, const Deviation& cpu,
                                 double spread = 0) {
  if (run.params.size() != cpu.params.size()) return "the run has another number of parameter tensors";
  const double param_bound = bound_for(cpu.worst_param(), spread);
  const double loss_bound = bound_for(cpu.worst_loss(), spread);
  if (!(run.worst_param() <= param_bound)) {
    const auto at = std::max_element(run.params.begin(), run.params.end()) - run.params.begin();
    return ref.params[std::size_t(at)].name +
           format(": error %.3g against float64, the CPU's worst %.3g, bound %.3g", run.worst_param(),
                  cpu.worst_param(), param_bound);
  }
  if (!(run.worst_loss() <= loss_bound)) {
    const auto at = std::max_element(run.losses.begin(), run.losses.end()) - run.losses.begin();
    return "loss of step " + std::to_string(at + 1) +
           format(": error %.3g against float64, the CPU's worst %.3g, bound %.3g", run.worst_loss(),
                  cpu.worst_loss(), loss_bound);
  }
  return {};
}

// One line for the log: the worst tensor error (and its tensor), the worst loss error.
inline std::string describe(const TrainedRun& ref, const Deviation& d) {
  std::size_t worst = 0;
  for (std::size_t i = 0; i < d.params.size(); ++i)
    if (d.params[i] > d.params[worst]) worst = i;
  const std::string name = d.params.empty() ? "" : ref.params[worst].name;
  return format("params %.3g (", d.worst_param(), 0, 0) + name + format("), losses %.3g", d.worst_loss(), 0, 0);
}

}  // namespace loom::testing
