// The asynchronous modes' predictors (internal to loom_predict; see predictor.h):
// parameter server and ssp by simulation (async_simulation.h), local SGD as one period.
// Each fills the prediction's step, throughput, spans, cycle and staleness; the caller
// has set the threads and the memory.
#pragma once

#include <optional>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/predict/calibration.h"
#include "loom/predict/predictor.h"
#include "step_costs.h"

namespace loom::predict {

// Worker steps simulated per worker: the plan's steps, at most 20,000 worker steps in all
// (a 1,024-worker plan still predicts in well under a second), at least 20 per worker.
std::int64_t simulated_steps(const Plan& plan);

// The cores of each of the plan's hosts, simulated where its ranks outnumber them
// (async_simulation.h); 0 for a cluster file's hosts (not simulated) unless they are one
// machine's namespaces, whose ranks all share its cores. A task of a crowded
// server that finds too few free goes at a share x free cores / ranks waiting
// (AsyncSetup::contended_share): the share fitted to this machine's runs
// (Calibration::contended_share), else kDefaultContendedShare.
struct Crowding {
  int cores_per_host = 0;
  bool one_machine = false;  // the hosts share those cores (Cluster::shared_cores)
  std::optional<double> fitted_share;
};
Status predict_parameter_servers(const Plan& plan, const ModelInfo& model, StepCosts& costs, double residual_ms,
                                 const Crowding& crowding, Prediction& out);
void predict_local_sgd(const Plan& plan, const ModelInfo& model, StepCosts& costs, double residual_ms, Prediction& out);

}  // namespace loom::predict
