// Pieces shared by the plan reader, writer and validator inside loom_core: the tables
// that map enum values to the names written in plan files, a pre-order layer walker and
// the reader entry point. Not installed; other modules use plan.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/core/plan.h"

namespace loom::detail {

// Ordered so that written plans keep their sections in a readable order and errors come
// out in document order.
using Json = nlohmann::ordered_json;

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

inline constexpr std::array<EnumName<LayerKind>, 9> kLayerKindNames{{
    {LayerKind::Linear, "linear"},
    {LayerKind::Relu, "relu"},
    {LayerKind::Tanh, "tanh"},
    {LayerKind::Gelu, "gelu"},
    {LayerKind::Conv2d, "conv2d"},
    {LayerKind::MaxPool2d, "maxpool2d"},
    {LayerKind::Flatten, "flatten"},
    {LayerKind::Dropout, "dropout"},
    {LayerKind::Parallel, "parallel"},
}};
inline constexpr std::array<EnumName<LossKind>, 1> kLossNames{{
    {LossKind::SoftmaxCrossEntropy, "softmax_cross_entropy"},
}};
inline constexpr std::array<EnumName<DataSource>, 2> kDataSourceNames{{
    {DataSource::FashionMnist, "fashion-mnist"},
    {DataSource::Synthetic, "synthetic"},
}};
inline constexpr std::array<EnumName<SyntheticKind>, 2> kSyntheticKindNames{{
    {SyntheticKind::Blobs, "blobs"},
    {SyntheticKind::Spirals, "spirals"},
}};
inline constexpr std::array<EnumName<OptimizerKind>, 3> kOptimizerNames{{
    {OptimizerKind::Sgd, "sgd"},
    {OptimizerKind::Momentum, "momentum"},
    {OptimizerKind::Adam, "adam"},
}};
inline constexpr std::array<EnumName<DeviceKind>, 2> kDeviceKindNames{{
    {DeviceKind::Cpu, "cpu"},
    {DeviceKind::Gpu, "gpu"},
}};
inline constexpr std::array<EnumName<SyncMode>, 4> kSyncModeNames{{
    {SyncMode::AllReduce, "allreduce"},
    {SyncMode::ParameterServer, "parameter_server"},
    {SyncMode::Ssp, "ssp"},
    {SyncMode::LocalSgd, "local_sgd"},
}};
inline constexpr std::array<EnumName<Schedule>, 2> kScheduleNames{{
    {Schedule::GPipe, "gpipe"},
    {Schedule::OneFOneB, "1f1b"},
}};
inline constexpr std::array<EnumName<CommBackend>, 2> kBackendNames{{
    {CommBackend::Mpi, "mpi"},
    {CommBackend::Nccl, "nccl"},
}};
inline constexpr std::array<EnumName<DivergencePolicy>, 2> kDivergenceNames{{
    {DivergencePolicy::Stop, "stop"},
    {DivergencePolicy::Continue, "continue"},
}};
inline constexpr std::array<EnumName<DelayDistribution>, 4> kDelayNames{{
    {DelayDistribution::None, "none"},
    {DelayDistribution::Constant, "constant"},
    {DelayDistribution::Uniform, "uniform"},
    {DelayDistribution::Exponential, "exponential"},
}};

inline constexpr std::array<EnumName<Arrivals>, 2> kArrivalsNames{{
    {Arrivals::Constant, "constant"},
    {Arrivals::Poisson, "poisson"},
}};

template <class E, std::size_t N>
std::string_view enum_to_name(const std::array<EnumName<E>, N>& table, E value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

template <class E, std::size_t N>
std::optional<E> enum_from_name(const std::array<EnumName<E>, N>& table, std::string_view name) {
  for (const auto& entry : table) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

// "a, b or c": the accepted values, for error messages.
template <class E, std::size_t N>
std::string enum_choices(const std::array<EnumName<E>, N>& table) {
  std::string text;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) text += (i + 1 == N) ? " or " : ", ";
    text += "'" + std::string(table[i].name) + "'";
  }
  return text;
}

// The closest candidate within a small edit distance, for "did you mean" hints; empty
// when nothing is close enough to be a plausible typo.
std::string closest_name(std::string_view word, const std::vector<std::string_view>& candidates);

// A value from the plan as an error message shows it: whole up to 64 characters, else its
// start and its length, so a 10 MB key or name does not become a 10 MB message.
inline std::string shown(std::string_view value) {
  constexpr std::size_t kWhole = 64, kStart = 48;
  if (value.size() <= kWhole) return std::string(value);
  return std::string(value.substr(0, kStart)) + "... (" + std::to_string(value.size()) + " characters)";
}

// Where a layer sits, for walkers that need its JSON pointer and nesting.
struct LayerPlace {
  std::string path;   // "/model/layers/4/branches/1/layers/0"
  int depth = 0;
  int branch = -1;    // index of the branch inside the enclosing block (-1 at top level)
  int branch_stage = -1;  // resolved stage of the enclosing branch (-1 at top level)
};

// Calls visit(layer, place) for every layer in pre-order.
template <class Visit>
void walk_layers(const std::vector<LayerSpec>& layers, const LayerPlace& outer, Visit&& visit) {
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& layer = layers[i];
    LayerPlace place{outer.path + "/" + std::to_string(i), outer.depth, outer.branch, outer.branch_stage};
    visit(layer, place);
    for (std::size_t b = 0; b < layer.branches.size(); ++b) {
      const BranchSpec& branch = layer.branches[b];
      LayerPlace inner{place.path + "/branches/" + std::to_string(b) + "/layers", place.depth + 1,
                       static_cast<int>(b), branch.stage >= 0 ? branch.stage : layer.stage};
      walk_layers(branch.layers, inner, visit);
    }
  }
}

template <class Visit>
void walk_model(const ModelSpec& model, Visit&& visit) {
  walk_layers(model.layers, LayerPlace{"/model/layers", 0, -1, -1}, visit);
}

// Reads a parsed document into a Plan. Records syntax-level problems only: unknown keys,
// wrong types, unknown names, missing required keys. Ranges and consistency are
// validate_plan's job, so that plans built in memory get the same checks.
Plan read_plan(const Json& root, std::vector<PlanError>& errors);

// "expected a positive integer, got 0": the wording shared by reader and validator.
std::string expected_got(std::string_view expected, std::string_view got);

}  // namespace loom::detail
