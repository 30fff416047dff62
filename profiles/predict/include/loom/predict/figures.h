// Figures of `loom-cli show --json` as the predictor would give them, before the run: for
// lessons ("Loom predicted", beside the theory and the student's guess). Only figures the
// predictor has a value for; the rest say why not.
#pragma once

#include <optional>
#include <string>

#include "loom/predict/predictor.h"

namespace loom::predict {

struct PredictedFigure {
  std::optional<double> value;
  std::string why_not;  // when there is no value: "not predicted: staleness", a missing cost
};

// `pointer` into show's JSON: /samples_per_s, /serving/mean_batch, /stages/S/max_in_flight,
// /ranks/R/sends_per_step, and, per step, /allreduce/count and /allreduce/bytes (show gives
// them over the run: compare them only as ratios of runs with the same steps).
PredictedFigure predicted_figure(const std::string& pointer, const Plan& plan, const Calibration& calibration,
                                 const MachineShape& machine);

// Whether /allreduce/... and the like are per step here and over the run in show.
bool figure_is_per_step(const std::string& pointer);

}  // namespace loom::predict
