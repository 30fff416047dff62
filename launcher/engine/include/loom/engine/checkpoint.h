// Saves and loads a model's parameters: name, element count and float values per tensor.
// Used to compare parallel runs with single-process training, and as the checkpoint
// format. Little-endian float32, no alignment padding; the header says "loom-params/1".
#pragma once

#include <string>
#include <vector>

#include "loom/core/status.h"
#include "loom/engine/tensor.h"

namespace loom::engine {

struct NamedTensor {
  std::string name;
  std::vector<float> values;
};

Status save_params(const std::string& path, const std::vector<NamedTensor>& tensors);
Status save_params(const std::string& path, const std::vector<Param*>& params);
// Named copies of parameters, in the given order.
std::vector<NamedTensor> named_copies(const std::vector<Param*>& params);
Expected<std::vector<NamedTensor>> load_params(const std::string& path);

// max |a - b| / max |a| over one tensor: the per-tensor relative difference the
// equivalence tests bound.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace loom::engine
