// Parameters of a model as named tensors, for parameter files and checkpoints (the file
// formats live in profiles/checkpoint_files.h), and the difference the equivalence tests
// bound.
#pragma once

#include <string>
#include <vector>

#include "loom/core/status.h"
#include "loom/engine/tensor.h"
#include "loom/store/checkpoint_files.h"

namespace loom::engine {

using store::Checkpoint;
using store::checkpoint_file;
using store::checkpoint_step_dir;
using store::latest_checkpoint;
using store::load_checkpoint;
using store::load_params;
using store::NamedTensor;
using store::prune_checkpoints;
using store::save_checkpoint;
using store::save_params;

Status save_params(const std::string& path, const std::vector<Param*>& params);
// Named copies of parameters, in the given order.
std::vector<NamedTensor> named_copies(const std::vector<Param*>& params);

// max |a - b| / max |a| over one tensor: the per-tensor relative difference the
// equivalence tests bound.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace loom::engine
