// The short real runs that calibrate a plan's neighbours when the store has no history
// (`loom-cli calibrate`, the workbench's Run > Calibrate): the plan as written, one
// process with every core (at its batch and four times it), two replicas (the same; the
// larger with 1 KB buckets), and a two-stage 1F1B pipeline, each where the batch and the
// layers allow; an asynchronous plan, only as written. A plan whose devices name other
// hosts gets those runs on this machine (its devices moved here: the layers' costs are
// measured here, and predict takes other hosts to be like this one), then one run as
// written, across its hosts, which measures their links (host_links.h). Each is a
// measured run like any other, tagged kCalibrationTag; predict never runs them itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/plan.h"
#include "loom/core/status.h"

namespace loom::predict {

inline constexpr std::int64_t kCalibrationSteps = 200;
inline constexpr const char* kCalibrationTag = "calibration";

struct CalibrationRun {
  std::string what;  // "two replicas, 4x the batch, 1 KB buckets"
  Plan plan;         // named "<plan> (calibration: <what>)", `steps` steps, no evaluation
  bool across_hosts = false;  // the run on the plan's other hosts (it needs mpirun to reach them)
};

// InvalidArgument (naming why) for a serving plan: serving is not predicted.
Status check_calibratable(const Plan& plan);

// The runs for this plan; check_calibratable's error where it cannot be calibrated.
Expected<std::vector<CalibrationRun>> calibration_runs(const Plan& plan, std::int64_t steps = kCalibrationSteps);

}  // namespace loom::predict
