// A prediction stored as a run of its own kind (RunRecord::kind "predicted"), so that the
// comparison, reports and the workbench put it beside measured runs with no view of its
// own: the predicted step repeated, every rank's spans as the predictor laid them out.
#pragma once

#include <cstdint>

#include "loom/predict/predictor.h"

namespace loom::predict {

// How many steps a stored prediction holds: the first is warm-up under Loom's steady rule
// (kWarmupSteps), so views have five steady steps, all equal.
inline constexpr int kStoredPredictionSteps = 6;

// Stores the prediction of `plan` in one transaction and returns the run's id. Its log
// names the calibration's runs and host and every note; its ranks' device is "predicted".
Expected<std::int64_t> store_prediction(store::RunStore& store, const Plan& plan, const Prediction& prediction,
                                        const Calibration& calibration);

}  // namespace loom::predict
