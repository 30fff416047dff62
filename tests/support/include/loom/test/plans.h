// Plans several tests start from: a layer in one call, the default plan with a parallel
// block, as data-parallel replicas, or spread over named hosts. Each is the default plan
// (loom::default_plan) with only what its name says changed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/plan.h"

namespace loom::testing {

inline loom::LayerSpec layer(loom::LayerKind kind, std::int64_t out = 0, int stage = 0) {
  loom::LayerSpec spec;
  spec.kind = kind;
  spec.out = out;
  spec.stage = stage;
  return spec;
}

// flatten, parallel{[linear 32, relu], [linear 16]}, linear 10; layers named as parsing
// names them.
inline loom::Plan branch_plan() {
  loom::Plan plan = loom::default_plan();
  loom::LayerSpec block = layer(loom::LayerKind::Parallel);
  block.branches = {loom::BranchSpec{{layer(loom::LayerKind::Linear, 32), layer(loom::LayerKind::Relu)}, -1},
                    loom::BranchSpec{{layer(loom::LayerKind::Linear, 16)}, -1}};
  plan.model.layers = {layer(loom::LayerKind::Flatten), block, layer(loom::LayerKind::Linear, 10)};
  loom::assign_default_layer_names(plan.model);
  return plan;
}

// `replicas` data-parallel replicas, one default device each.
inline loom::Plan data_parallel_plan(const char* name, int replicas) {
  loom::Plan plan = loom::default_plan();
  plan.name = name;
  plan.parallel.data_parallel = replicas;
  plan.parallel.devices.assign(static_cast<std::size_t>(replicas), loom::DeviceSpec{});
  return plan;
}

// One data-parallel replica per host name, in order.
inline loom::Plan plan_with_hosts(const std::vector<std::string>& hosts) {
  loom::Plan plan = loom::default_plan();
  plan.parallel.data_parallel = static_cast<int>(hosts.size());
  plan.parallel.devices.clear();
  for (const auto& h : hosts) {
    loom::DeviceSpec d;
    d.host = h;
    plan.parallel.devices.push_back(d);
  }
  return plan;
}

}  // namespace loom::testing
