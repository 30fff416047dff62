// What `predict`, `search` and `calibration` share: the store and this host's calibration
// from it, the cluster file, and how a failed prediction exits.
#pragma once

#include <optional>

#include "commands.h"
#include "loom/predict/calibration.h"
#include "loom/predict/cluster.h"

namespace loom::cli {

// The store the arguments name and this host's calibration from it; nullopt when either
// failed (the error printed).
struct Calibrated {
  store::RunStore store;
  predict::Calibration calibration;
};
std::optional<Calibrated> open_calibrated(const Args& args);

// --cluster FILE read into `cluster` (left empty without the option); false when the file
// is wrong (the error printed).
bool read_cluster(const Args& args, std::optional<predict::Cluster>& cluster);

// Prints the error; exit 1 for a missing calibration or a failure, 2 for invalid input or
// what the predictor does not cover.
int prediction_failed(const Error& error);

}  // namespace loom::cli
