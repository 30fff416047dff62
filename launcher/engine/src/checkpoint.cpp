// Parameters as named tensors (see checkpoint.h).
#include "loom/engine/checkpoint.h"

#include <algorithm>
#include <cmath>

namespace loom::engine {

std::vector<NamedTensor> named_copies(const std::vector<Param*>& params) {
  std::vector<NamedTensor> out;
  for (const Param* p : params) out.push_back({p->name, p->value.to_host()});
  return out;
}

Status save_params(const std::string& path, const std::vector<Param*>& params) {
  return store::save_params(path, named_copies(params));
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(a[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace loom::engine
