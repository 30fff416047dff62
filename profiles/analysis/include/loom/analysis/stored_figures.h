// Figures written back into the store with a finished run, so run lists show the same
// throughput as `show` without reading events.
#pragma once

#include <cstdint>

#include "loom/core/status.h"

namespace loom::store {
class RunStore;
}  // namespace loom::store

namespace loom::analysis {

// Computes the steady throughput of a finished run and stores it with the run (train_s,
// train_samples), so run lists show the same figure as `show` without reading events.
Status store_training_figures(store::RunStore& store, std::int64_t run_id);

}  // namespace loom::analysis
