// The plan's entry points: parse_plan (read, then validate, keeping every error),
// load_plan_file, the embedded default plan, and the names written in plan files.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "loom/core/plan_limits.h"
#include "plan_internal.h"

namespace loom {

using detail::enum_to_name;
using detail::Json;

std::string_view layer_kind_name(LayerKind kind) { return enum_to_name(detail::kLayerKindNames, kind); }
std::string_view sync_mode_name(SyncMode mode) { return enum_to_name(detail::kSyncModeNames, mode); }
std::string_view optimizer_name(OptimizerKind kind) { return enum_to_name(detail::kOptimizerNames, kind); }
std::string_view schedule_name(Schedule schedule) { return enum_to_name(detail::kScheduleNames, schedule); }
std::string_view backend_name(CommBackend backend) { return enum_to_name(detail::kBackendNames, backend); }
std::string_view device_kind_name(DeviceKind kind) { return enum_to_name(detail::kDeviceKindNames, kind); }
std::string_view delay_name(DelayDistribution delay) { return enum_to_name(detail::kDelayNames, delay); }
std::string_view data_source_name(DataSource source) { return enum_to_name(detail::kDataSourceNames, source); }
std::string_view synthetic_kind_name(SyntheticKind kind) {
  return enum_to_name(detail::kSyntheticKindNames, kind);
}

std::string_view arrivals_name(Arrivals arrivals) { return enum_to_name(detail::kArrivalsNames, arrivals); }

int world_size(const Plan& plan) {
  if (plan.serve) return static_cast<int>(std::clamp<long long>(1LL + plan.serve->clients, 1, std::numeric_limits<int>::max()));
  const ParallelSpec& p = plan.parallel;
  // 64-bit so that absurd values typed into an editor cannot overflow.
  long long ranks = static_cast<long long>(p.data_parallel) * p.stages;
  if (p.sync.mode == SyncMode::ParameterServer || p.sync.mode == SyncMode::Ssp) ranks += p.sync.servers;
  return static_cast<int>(std::clamp<long long>(ranks, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
}

RankRole rank_role(const Plan& plan, int rank) {
  const ParallelSpec& p = plan.parallel;
  RankRole role;
  if (plan.serve) {
    if (rank >= 0 && rank < world_size(plan)) role.kind = rank == 0 ? RankKind::InferenceServer : RankKind::Client;
    return role;
  }
  if (rank < 0 || rank >= world_size(plan) || p.data_parallel < 1 || p.stages < 1) return role;
  const long long workers = static_cast<long long>(p.data_parallel) * p.stages;
  if (rank < workers) {
    role.kind = RankKind::Worker;
    role.stage = rank / p.data_parallel;
    role.replica = rank % p.data_parallel;
  } else {
    role.kind = RankKind::Server;
    role.server = static_cast<int>(rank - workers);
  }
  return role;
}

int dataset_classes(const Plan& plan) {
  return plan.data.source == DataSource::FashionMnist ? 10 : plan.data.classes;
}

namespace {

// Names are numbered by pre-order position so that "relu_4" points at LayerId 4.
void name_layers(std::vector<LayerSpec>& layers, int& index, std::set<std::string>& taken) {
  for (LayerSpec& layer : layers) {
    if (layer.name.empty()) {
      std::string base = std::string(layer_kind_name(layer.kind)) + "_" + std::to_string(index);
      std::string name = base;
      for (int suffix = 1; taken.count(name) > 0; ++suffix) name = base + "_" + std::to_string(suffix);
      layer.name = name;
      taken.insert(name);
    }
    ++index;
    for (BranchSpec& branch : layer.branches) name_layers(branch.layers, index, taken);
  }
}

// Drops validator findings at or below a location the reader already complained about:
// a missing "out" should not also be reported as "out must be positive".
std::vector<PlanError> merge_errors(std::vector<PlanError> read_errors, const std::vector<PlanError>& checks) {
  std::vector<PlanError> merged = read_errors;
  for (const PlanError& check : checks) {
    bool covered = std::any_of(read_errors.begin(), read_errors.end(), [&](const PlanError& e) {
      return check.path == e.path || (check.path.rfind(e.path + "/", 0) == 0 && !e.path.empty());
    });
    if (!covered) merged.push_back(check);
  }
  return merged;
}

// "[json.exception.parse_error.101] parse error at line 1, ..." -> "parse error at line 1, ..."
std::string strip_exception_id(const std::string& what) {
  auto end = what.find("] ");
  return (what.rfind("[json.exception", 0) == 0 && end != std::string::npos) ? what.substr(end + 2) : what;
}

PlanResult parse_plan_unguarded(std::string_view json_text) {
  PlanResult result;
  // Before parsing: the parser and the reader recurse once per nesting level.
  if (limits::json_depth(json_text) > limits::kMaxJsonDepth) {
    result.errors.push_back({"", "the document nests arrays and objects more than " +
                                     std::to_string(limits::kMaxJsonDepth) +
                                     " levels deep, which no plan needs (docs/plan-format.md, Limits)"});
    return result;
  }
  Json root;
  try {
    root = Json::parse(json_text.begin(), json_text.end());
  } catch (const nlohmann::json::parse_error& e) {
    result.errors.push_back({"", "invalid JSON at byte " + std::to_string(e.byte) + ": " + strip_exception_id(e.what())});
    return result;
  }
  std::vector<PlanError> read_errors;
  Plan plan = detail::read_plan(root, read_errors);
  if (!root.is_object()) {
    result.errors = std::move(read_errors);
    return result;
  }
  result.errors = merge_errors(std::move(read_errors), validate_plan(plan));
  if (result.errors.empty()) result.plan = std::move(plan);
  return result;
}

}  // namespace

void assign_default_layer_names(ModelSpec& model) {
  std::set<std::string> taken;
  detail::walk_model(model, [&taken](const LayerSpec& layer, const detail::LayerPlace&) {
    if (!layer.name.empty()) taken.insert(layer.name);
  });
  int index = 0;
  name_layers(model.layers, index, taken);
}

PlanResult parse_plan(std::string_view json_text) {
  try {
    return parse_plan_unguarded(json_text);
  } catch (const std::exception& e) {  // a bug, but the API promises not to throw
    PlanResult result;
    result.errors.push_back({"", std::string("internal error while reading the plan: ") + e.what()});
    return result;
  }
}

namespace {
PlanResult plan_file_error(std::string reason) {
  PlanResult result;
  result.errors.push_back({"", std::move(reason)});
  return result;
}
}  // namespace

// A plan is a small text file: anything else is refused before it is read (a FIFO would
// block, /dev/zero never ends, a 2 GB file would be read whole into memory).
PlanResult load_plan_file(const std::string& path) {
  using limits::kMaxPlanBytes;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    return plan_file_error("cannot open plan file '" + path + "': " + (ec ? ec.message() : "no such file"));
  if (!std::filesystem::is_regular_file(status))
    return plan_file_error("'" + path + "' is not a regular file (a directory, a FIFO or a device): give a plan file");
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > std::uintmax_t(kMaxPlanBytes))
    return plan_file_error("plan file '" + path + "' is " + std::to_string(size) + " bytes; a plan is at most " +
                           std::to_string(kMaxPlanBytes >> 20) + " MiB of JSON");
  std::ifstream file(path, std::ios::binary);
  if (!file) return plan_file_error("cannot open plan file '" + path + "': " + std::strerror(errno));
  // Room for the size seen and one byte more, to notice a file that grew meanwhile.
  std::string text(std::size_t(ec ? kMaxPlanBytes : std::int64_t(size)) + 1, '\0');
  file.read(text.data(), std::streamsize(text.size()));
  text.resize(std::size_t(file.gcount()));
  if (text.size() > std::size_t(kMaxPlanBytes) || (!ec && text.size() > size))  // it grew while being read
    return plan_file_error("plan file '" + path + "' is over " + std::to_string(kMaxPlanBytes >> 20) + " MiB");
  if (const auto nul = text.find('\0'); nul != std::string::npos)
    return plan_file_error("plan file '" + path + "' holds a NUL byte at offset " + std::to_string(nul) +
                           ": a plan is JSON text");
  return parse_plan(text);
}

Plan default_plan() {
  Plan plan;
  plan.name = "mlp-fashion";
  plan.model.input = {1, 28, 28};
  auto layer = [](LayerKind kind, std::int64_t out = 0) {
    LayerSpec spec;
    spec.kind = kind;
    spec.out = out;
    return spec;
  };
  plan.model.layers = {layer(LayerKind::Flatten),     layer(LayerKind::Linear, 256), layer(LayerKind::Relu),
                       layer(LayerKind::Linear, 128), layer(LayerKind::Relu),        layer(LayerKind::Linear, 10)};
  assign_default_layer_names(plan.model);
  plan.training.batch = 64;
  plan.training.epochs = 3;
  plan.training.seed = 42;
  plan.training.optimizer.kind = OptimizerKind::Adam;
  plan.training.optimizer.lr = 1e-3;
  plan.parallel.devices = {DeviceSpec{}};
  return plan;
}

}  // namespace loom
