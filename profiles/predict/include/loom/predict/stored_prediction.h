// A prediction stored as a run of its own kind (RunRecord::kind "predicted"), so that the
// comparison, reports and the workbench put it beside measured runs with no view of its
// own: the predicted step (or cycle: local SGD's period) repeated, every rank's spans as
// the predictor laid them out, and the simulated updates of the parameter-server modes,
// so the comparison sets predicted staleness beside measured.
#pragma once

#include <cstdint>

#include "loom/predict/predictor.h"

namespace loom::predict {

// How many steps a stored prediction holds at least (whole cycles of them): the first is
// warm-up under Loom's steady rule (kWarmupSteps), so views have five steady steps.
inline constexpr int kStoredPredictionSteps = 6;

// Stores the prediction of `plan` and returns the run's id (the updates, where there
// are any, in a second transaction). Its log
// names the calibration's runs and host and every note; its ranks' device is "predicted".
Expected<std::int64_t> store_prediction(store::RunStore& store, const Plan& plan, const Prediction& prediction,
                                        const Calibration& calibration);

}  // namespace loom::predict
