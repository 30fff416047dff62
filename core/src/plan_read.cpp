// Reads a "loom-plan/1" JSON document into a Plan. The reader checks what a schema would:
// unknown keys (with a "did you mean" for typos), value types, enum names and required
// keys, and keeps going after a problem so that the user sees every error at once.
// Values keep their defaults where the document is wrong; the caller discards the plan
// when any error was recorded.
#include <algorithm>
#include <cmath>
#include <limits>

#include "plan_internal.h"

namespace loom::detail {
namespace {

using Keys = std::vector<std::string_view>;

const Keys kRootKeys{"format", "name", "model", "data", "training", "parallel", "serve"};
const Keys kServeKeys{"clients", "max_batch", "timeout_ms", "rate", "arrivals", "requests", "weights"};
const Keys kModelKeys{"input", "layers", "loss"};
const Keys kDataKeys{"source", "path", "train_limit", "test_limit", "shuffle", "kind", "classes",
                     "features", "train_samples", "test_samples", "noise", "seed"};
const Keys kTrainingKeys{"batch", "epochs", "steps", "seed", "eval_every", "threads", "hang_timeout_s", "checkpoint_every", "tf32",
                        "graph", "on_divergence", "optimizer"};
const Keys kOptimizerKeys{"type", "lr", "momentum", "beta1", "beta2", "eps", "weight_decay"};
const Keys kParallelKeys{"devices", "data_parallel", "stages", "microbatches", "schedule", "bucket_mb",
                         "grad_accumulation", "backend", "sync", "stragglers"};
const Keys kDeviceKeys{"kind", "host", "gpu"};
const Keys kSyncKeys{"mode", "bound", "period", "servers", "staleness_aware_lr"};
const Keys kStragglerKeys{"rank", "slowdown", "delay", "delay_ms"};
const Keys kBranchKeys{"stage", "layers"};

// Keys a layer of each kind accepts besides type, name and stage.
Keys layer_keys(LayerKind kind) {
  Keys keys{"type", "name", "stage"};
  auto add = [&keys](std::initializer_list<std::string_view> more) { keys.insert(keys.end(), more); };
  switch (kind) {
    case LayerKind::Linear: add({"out", "bias"}); break;
    case LayerKind::Conv2d: add({"out_channels", "kernel", "stride", "padding", "bias"}); break;
    case LayerKind::MaxPool2d: add({"kernel", "stride"}); break;
    case LayerKind::Dropout: add({"p"}); break;
    case LayerKind::Parallel: add({"branches"}); break;
    default: break;
  }
  return keys;
}

std::string child(const std::string& path, std::string_view key) { return path + "/" + std::string(key); }
std::string child(const std::string& path, std::size_t index) { return path + "/" + std::to_string(index); }

class PlanReader {
 public:
  explicit PlanReader(std::vector<PlanError>& errors) : errors_(errors) {}
  Plan read(const Json& root);

 private:
  void read_model(const Json& j, const std::string& path, ModelSpec& model);
  void read_input(const Json& j, const std::string& path, Shape& input);
  void read_layers(const Json& j, const std::string& path, std::vector<LayerSpec>& layers, int inherited_stage);
  void read_layer(const Json& j, const std::string& path, LayerSpec& layer, int inherited_stage);
  void read_layer_fields(const Json& j, const std::string& path, LayerSpec& layer);
  void read_branches(const Json& j, const std::string& path, LayerSpec& block);
  void read_data(const Json& j, const std::string& path, DataSpec& data);
  void read_training(const Json& j, const std::string& path, TrainingSpec& training);
  void read_optimizer(const Json& j, const std::string& path, OptimizerSpec& optimizer);
  void read_parallel(const Json& j, const std::string& path, ParallelSpec& parallel);
  void read_devices(const Json& j, const std::string& path, std::vector<DeviceSpec>& devices);
  void read_sync(const Json& j, const std::string& path, SyncSpec& sync);
  void read_stragglers(const Json& j, const std::string& path, std::vector<StragglerSpec>& stragglers);
  void read_serve(const Json& j, const std::string& path, ServeSpec& serve);

  void error(std::string path, std::string reason) { errors_.push_back({std::move(path), std::move(reason)}); }
  bool expect_object(const Json& j, const std::string& path);
  bool expect_array(const Json& j, const std::string& path, std::string_view of_what);
  void reject_unknown_keys(const Json& obj, const std::string& path, const Keys& allowed, std::string_view owner);
  const Json* require(const Json& obj, const std::string& path, std::string_view key, std::string_view what);

  template <class Int>
  void read_int(const Json& obj, const std::string& path, std::string_view key, Int& out, std::string_view expected);
  void read_seed(const Json& obj, const std::string& path, std::string_view key, std::uint64_t& out);
  void read_number(const Json& obj, const std::string& path, std::string_view key, double& out,
                   std::string_view expected);
  void read_bool(const Json& obj, const std::string& path, std::string_view key, bool& out);
  void read_string(const Json& obj, const std::string& path, std::string_view key, std::string& out);
  template <class E, std::size_t N>
  void read_enum(const Json& obj, const std::string& path, std::string_view key, E& out,
                 const std::array<EnumName<E>, N>& table, std::string_view what);
  template <class E, std::size_t N>
  bool enum_value(const Json& j, const std::string& path, E& out, const std::array<EnumName<E>, N>& table,
                  std::string_view what);

  std::vector<PlanError>& errors_;
};

const Json* find_key(const Json& obj, std::string_view key) {
  auto it = obj.find(std::string(key));
  return it == obj.end() ? nullptr : &*it;
}

// JSON numbers written as 64.0 or 1e3 count as integers when they are whole.
std::optional<std::int64_t> as_integer(const Json& j) {
  if (j.is_number_unsigned()) {
    auto v = j.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(v);
  }
  if (j.is_number_integer()) return j.get<std::int64_t>();
  if (j.is_number_float()) {
    double d = j.get<double>();
    if (std::trunc(d) == d && std::fabs(d) < 9.0e15) return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

std::string describe_value(const Json& j) {
  if (j.is_number()) return "number " + j.dump();
  return j.type_name();
}

bool PlanReader::expect_object(const Json& j, const std::string& path) {
  if (j.is_object()) return true;
  error(path, expected_got("an object", j.type_name()));
  return false;
}

bool PlanReader::expect_array(const Json& j, const std::string& path, std::string_view of_what) {
  if (j.is_array()) return true;
  error(path, expected_got(std::string("an array of ") + std::string(of_what), j.type_name()));
  return false;
}

void PlanReader::reject_unknown_keys(const Json& obj, const std::string& path, const Keys& allowed,
                                     std::string_view owner) {
  for (const auto& [key, value] : obj.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string reason = "unknown key '" + shown(key) + "'";
    if (!owner.empty()) reason += " for " + std::string(owner);
    std::string guess = key.size() <= 64 ? closest_name(key, allowed) : "";
    if (!guess.empty()) reason += " (did you mean '" + guess + "'?)";
    error(child(path, shown(key)), reason);
  }
}

const Json* PlanReader::require(const Json& obj, const std::string& path, std::string_view key,
                                std::string_view what) {
  const Json* value = find_key(obj, key);
  if (value == nullptr) error(child(path, key), "missing required key '" + std::string(key) + "' (" + std::string(what) + ")");
  return value;
}

template <class Int>
void PlanReader::read_int(const Json& obj, const std::string& path, std::string_view key, Int& out,
                          std::string_view expected) {
  const Json* j = find_key(obj, key);
  if (j == nullptr) return;
  std::optional<std::int64_t> value = as_integer(*j);
  if (!value) {
    error(child(path, key), expected_got(expected, describe_value(*j)));
    return;
  }
  if (*value < std::numeric_limits<Int>::min() || *value > std::numeric_limits<Int>::max()) {
    error(child(path, key), "value " + std::to_string(*value) + " is out of range");
    return;
  }
  out = static_cast<Int>(*value);
}

void PlanReader::read_seed(const Json& obj, const std::string& path, std::string_view key, std::uint64_t& out) {
  const Json* j = find_key(obj, key);
  if (j == nullptr) return;
  if (j->is_number_unsigned()) {
    out = j->get<std::uint64_t>();
  } else if (auto v = as_integer(*j); v && *v >= 0) {
    out = static_cast<std::uint64_t>(*v);
  } else {
    error(child(path, key), expected_got("a non-negative integer", describe_value(*j)));
  }
}

void PlanReader::read_number(const Json& obj, const std::string& path, std::string_view key, double& out,
                             std::string_view expected) {
  const Json* j = find_key(obj, key);
  if (j == nullptr) return;
  if (!j->is_number()) {
    error(child(path, key), expected_got(expected, j->type_name()));
    return;
  }
  out = j->get<double>();
}

void PlanReader::read_bool(const Json& obj, const std::string& path, std::string_view key, bool& out) {
  const Json* j = find_key(obj, key);
  if (j == nullptr) return;
  if (!j->is_boolean()) {
    error(child(path, key), expected_got("true or false", describe_value(*j)));
    return;
  }
  out = j->get<bool>();
}

void PlanReader::read_string(const Json& obj, const std::string& path, std::string_view key, std::string& out) {
  const Json* j = find_key(obj, key);
  if (j == nullptr) return;
  if (!j->is_string()) {
    error(child(path, key), expected_got("a string", describe_value(*j)));
    return;
  }
  out = j->get<std::string>();
}

template <class E, std::size_t N>
bool PlanReader::enum_value(const Json& j, const std::string& path, E& out,
                            const std::array<EnumName<E>, N>& table, std::string_view what) {
  if (!j.is_string()) {
    error(path, expected_got("one of " + enum_choices(table), describe_value(j)));
    return false;
  }
  auto name = j.get<std::string>();
  if (auto value = enum_from_name(table, name)) {
    out = *value;
    return true;
  }
  std::vector<std::string_view> names;
  for (const auto& entry : table) names.push_back(entry.name);
  std::string reason = "unknown " + std::string(what) + " '" + shown(name) + "'";
  std::string guess = name.size() <= 64 ? closest_name(name, names) : "";
  reason += guess.empty() ? "; expected " + enum_choices(table) : " (did you mean '" + guess + "'?)";
  error(path, reason);
  return false;
}

template <class E, std::size_t N>
void PlanReader::read_enum(const Json& obj, const std::string& path, std::string_view key, E& out,
                           const std::array<EnumName<E>, N>& table, std::string_view what) {
  if (const Json* j = find_key(obj, key)) enum_value(*j, child(path, key), out, table, what);
}

Plan PlanReader::read(const Json& root) {
  Plan plan;
  if (!root.is_object()) {
    error("", "a plan must be a JSON object, got " + std::string(root.type_name()));
    return plan;
  }
  reject_unknown_keys(root, "", kRootKeys, "");
  if (const Json* format = require(root, "", "format", "\"format\": \"loom-plan/1\"")) {
    if (!format->is_string()) {
      error("/format", expected_got("the string \"loom-plan/1\"", describe_value(*format)));
    } else if (format->get<std::string>() != kPlanFormat) {
      error("/format", "unsupported format '" + shown(format->get<std::string>()) + "'; this Loom reads \"loom-plan/1\"");
    }
  }
  read_string(root, "", "name", plan.name);
  if (const Json* model = require(root, "", "model", "the network to train")) read_model(*model, "/model", plan.model);
  if (const Json* data = find_key(root, "data")) read_data(*data, "/data", plan.data);
  if (const Json* training = find_key(root, "training")) read_training(*training, "/training", plan.training);
  if (const Json* serve = find_key(root, "serve")) read_serve(*serve, "/serve", plan.serve.emplace());
  const Json* parallel = find_key(root, "parallel");
  if (parallel != nullptr) read_parallel(*parallel, "/parallel", plan.parallel);
  if (parallel == nullptr || !parallel->is_object() || !parallel->contains("devices")) {
    // One cpu rank per slot the strategy needs, all on this machine.
    int ranks = std::max(0, std::min(world_size(plan), 4096));
    plan.parallel.devices.assign(static_cast<std::size_t>(ranks), DeviceSpec{});
  }
  assign_default_layer_names(plan.model);
  return plan;
}

void PlanReader::read_model(const Json& j, const std::string& path, ModelSpec& model) {
  if (!expect_object(j, path)) return;
  reject_unknown_keys(j, path, kModelKeys, "model");
  if (const Json* input = require(j, path, "input", "per-sample input shape such as [1, 28, 28]")) {
    read_input(*input, child(path, "input"), model.input);
  }
  if (const Json* layers = require(j, path, "layers", "the list of layers")) {
    read_layers(*layers, child(path, "layers"), model.layers, 0);
  }
  read_enum(j, path, "loss", model.loss, kLossNames, "loss");
}

void PlanReader::read_input(const Json& j, const std::string& path, Shape& input) {
  bool all_integers = j.is_array() && std::all_of(j.begin(), j.end(), [](const Json& d) { return as_integer(d).has_value(); });
  if (!all_integers) {
    error(path, expected_got("an array of positive integers such as [1, 28, 28]", describe_value(j)));
    return;
  }
  for (const Json& dim : j) input.push_back(*as_integer(dim));
}

void PlanReader::read_layers(const Json& j, const std::string& path, std::vector<LayerSpec>& layers,
                             int inherited_stage) {
  if (!expect_array(j, path, "layers")) return;
  layers.resize(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) read_layer(j[i], child(path, i), layers[i], inherited_stage);
}

void PlanReader::read_layer(const Json& j, const std::string& path, LayerSpec& layer, int inherited_stage) {
  if (!expect_object(j, path)) return;
  const Json* type = require(j, path, "type", "one of " + enum_choices(kLayerKindNames));
  if (type == nullptr || !enum_value(*type, child(path, "type"), layer.kind, kLayerKindNames, "layer type")) {
    return;  // without a type the other keys cannot be judged
  }
  reject_unknown_keys(j, path, layer_keys(layer.kind), std::string("a ") + std::string(layer_kind_name(layer.kind)) + " layer");
  read_string(j, path, "name", layer.name);
  if (j.contains("name") && j["name"].is_string() && layer.name.empty()) {
    error(child(path, "name"), "a layer name must not be empty (leave \"name\" out to get one)");
  }
  layer.stage = inherited_stage;
  read_int(j, path, "stage", layer.stage, "a non-negative integer");
  read_layer_fields(j, path, layer);
}

void PlanReader::read_layer_fields(const Json& j, const std::string& path, LayerSpec& layer) {
  switch (layer.kind) {
    case LayerKind::Linear:
      if (require(j, path, "out", "number of output features")) read_int(j, path, "out", layer.out, "a positive integer");
      read_bool(j, path, "bias", layer.bias);
      break;
    case LayerKind::Conv2d:
      if (require(j, path, "out_channels", "number of output channels")) {
        read_int(j, path, "out_channels", layer.out_channels, "a positive integer");
      }
      if (require(j, path, "kernel", "square kernel size")) read_int(j, path, "kernel", layer.kernel, "a positive integer");
      layer.stride = 1;
      read_int(j, path, "stride", layer.stride, "a positive integer");
      read_int(j, path, "padding", layer.padding, "a non-negative integer");
      read_bool(j, path, "bias", layer.bias);
      break;
    case LayerKind::MaxPool2d:
      if (require(j, path, "kernel", "pooling window size")) read_int(j, path, "kernel", layer.kernel, "a positive integer");
      layer.stride = layer.kernel;
      read_int(j, path, "stride", layer.stride, "a positive integer");
      break;
    case LayerKind::Dropout:
      layer.p = 0.5;  // PyTorch's default, so that {"type": "dropout"} means what users expect
      read_number(j, path, "p", layer.p, "a probability in [0, 1)");
      break;
    case LayerKind::Parallel:
      if (const Json* branches = require(j, path, "branches", "the list of branches")) {
        read_branches(*branches, child(path, "branches"), layer);
      }
      break;
    default:
      break;
  }
}

void PlanReader::read_branches(const Json& j, const std::string& path, LayerSpec& block) {
  if (!expect_array(j, path, "branches")) return;
  block.branches.resize(j.size());
  for (std::size_t b = 0; b < j.size(); ++b) {
    const std::string branch_path = child(path, b);
    BranchSpec& branch = block.branches[b];
    if (!expect_object(j[b], branch_path)) continue;
    reject_unknown_keys(j[b], branch_path, kBranchKeys, "a branch");
    read_int(j[b], branch_path, "stage", branch.stage, "a non-negative integer");
    if (const Json* layers = require(j[b], branch_path, "layers", "the branch's layers")) {
      int stage = branch.stage >= 0 ? branch.stage : block.stage;
      read_layers(*layers, child(branch_path, "layers"), branch.layers, stage);
    }
  }
}

void PlanReader::read_data(const Json& j, const std::string& path, DataSpec& data) {
  if (!expect_object(j, path)) return;
  reject_unknown_keys(j, path, kDataKeys, "data");
  read_enum(j, path, "source", data.source, kDataSourceNames, "data source");
  read_string(j, path, "path", data.path);
  read_int(j, path, "train_limit", data.train_limit, "a non-negative integer");
  read_int(j, path, "test_limit", data.test_limit, "a non-negative integer");
  read_bool(j, path, "shuffle", data.shuffle);
  read_enum(j, path, "kind", data.synthetic, kSyntheticKindNames, "synthetic data kind");
  read_int(j, path, "classes", data.classes, "an integer of at least 2");
  read_int(j, path, "features", data.features, "a positive integer");
  read_int(j, path, "train_samples", data.train_samples, "a positive integer");
  read_int(j, path, "test_samples", data.test_samples, "a positive integer");
  read_number(j, path, "noise", data.noise, "a non-negative number");
  read_seed(j, path, "seed", data.seed);
}

void PlanReader::read_training(const Json& j, const std::string& path, TrainingSpec& training) {
  if (!expect_object(j, path)) return;
  reject_unknown_keys(j, path, kTrainingKeys, "training");
  read_int(j, path, "batch", training.batch, "a positive integer");
  read_int(j, path, "epochs", training.epochs, "a positive integer");
  read_int(j, path, "steps", training.steps, "a non-negative integer");
  read_seed(j, path, "seed", training.seed);
  read_int(j, path, "eval_every", training.eval_every, "a non-negative integer");
  read_int(j, path, "threads", training.threads, "a non-negative integer");
  read_number(j, path, "hang_timeout_s", training.hang_timeout_s, "a non-negative number of seconds");
  read_int(j, path, "checkpoint_every", training.checkpoint_every, "a non-negative integer");
  read_bool(j, path, "tf32", training.tf32);
  read_bool(j, path, "graph", training.graph);
  read_enum(j, path, "on_divergence", training.on_divergence, kDivergenceNames, "divergence policy");
  if (const Json* optimizer = find_key(j, "optimizer")) read_optimizer(*optimizer, child(path, "optimizer"), training.optimizer);
}

void PlanReader::read_optimizer(const Json& j, const std::string& path, OptimizerSpec& optimizer) {
  if (j.is_string()) {  // shorthand: "optimizer": "adam"
    enum_value(j, path, optimizer.kind, kOptimizerNames, "optimizer");
    return;
  }
  if (!j.is_object()) {
    error(path, expected_got("an object or one of " + enum_choices(kOptimizerNames), describe_value(j)));
    return;
  }
  reject_unknown_keys(j, path, kOptimizerKeys, "the optimizer");
  read_enum(j, path, "type", optimizer.kind, kOptimizerNames, "optimizer");
  read_number(j, path, "lr", optimizer.lr, "a positive number");
  read_number(j, path, "momentum", optimizer.momentum, "a number in [0, 1)");
  read_number(j, path, "beta1", optimizer.beta1, "a number in [0, 1)");
  read_number(j, path, "beta2", optimizer.beta2, "a number in [0, 1)");
  read_number(j, path, "eps", optimizer.eps, "a positive number");
  read_number(j, path, "weight_decay", optimizer.weight_decay, "a non-negative number");
}

void PlanReader::read_parallel(const Json& j, const std::string& path, ParallelSpec& parallel) {
  if (!expect_object(j, path)) return;
  reject_unknown_keys(j, path, kParallelKeys, "parallel");
  read_int(j, path, "data_parallel", parallel.data_parallel, "a positive integer");
  read_int(j, path, "stages", parallel.stages, "a positive integer");
  read_int(j, path, "microbatches", parallel.microbatches, "a positive integer");
  read_enum(j, path, "schedule", parallel.schedule, kScheduleNames, "schedule");
  read_number(j, path, "bucket_mb", parallel.bucket_mb, "a positive number");
  read_int(j, path, "grad_accumulation", parallel.grad_accumulation, "a positive integer");
  read_enum(j, path, "backend", parallel.backend, kBackendNames, "backend");
  if (const Json* sync = find_key(j, "sync")) read_sync(*sync, child(path, "sync"), parallel.sync);
  if (const Json* devices = find_key(j, "devices")) read_devices(*devices, child(path, "devices"), parallel.devices);
  if (const Json* stragglers = find_key(j, "stragglers")) {
    read_stragglers(*stragglers, child(path, "stragglers"), parallel.stragglers);
  }
}

void PlanReader::read_devices(const Json& j, const std::string& path, std::vector<DeviceSpec>& devices) {
  if (!expect_array(j, path, "devices")) return;
  devices.resize(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string device_path = child(path, i);
    if (!expect_object(j[i], device_path)) continue;
    reject_unknown_keys(j[i], device_path, kDeviceKeys, "a device");
    read_enum(j[i], device_path, "kind", devices[i].kind, kDeviceKindNames, "device kind");
    read_string(j[i], device_path, "host", devices[i].host);
    read_int(j[i], device_path, "gpu", devices[i].gpu, "a non-negative GPU index");
  }
}

void PlanReader::read_sync(const Json& j, const std::string& path, SyncSpec& sync) {
  if (!expect_object(j, path)) return;
  reject_unknown_keys(j, path, kSyncKeys, "sync");
  read_enum(j, path, "mode", sync.mode, kSyncModeNames, "sync mode");
  read_int(j, path, "bound", sync.bound, "a non-negative integer");
  read_int(j, path, "period", sync.period, "a positive integer");
  read_int(j, path, "servers", sync.servers, "a positive integer");
  read_bool(j, path, "staleness_aware_lr", sync.staleness_aware_lr);
}

void PlanReader::read_stragglers(const Json& j, const std::string& path, std::vector<StragglerSpec>& stragglers) {
  if (!expect_array(j, path, "stragglers")) return;
  stragglers.resize(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string straggler_path = child(path, i);
    if (!expect_object(j[i], straggler_path)) continue;
    reject_unknown_keys(j[i], straggler_path, kStragglerKeys, "a straggler");
    if (require(j[i], straggler_path, "rank", "the rank to slow down")) {
      read_int(j[i], straggler_path, "rank", stragglers[i].rank, "a rank number");
    }
    read_number(j[i], straggler_path, "slowdown", stragglers[i].slowdown, "a number of at least 1");
    read_enum(j[i], straggler_path, "delay", stragglers[i].delay, kDelayNames, "delay distribution");
    read_number(j[i], straggler_path, "delay_ms", stragglers[i].delay_ms, "a non-negative number");
  }
}

void PlanReader::read_serve(const Json& j, const std::string& path, ServeSpec& serve) {
  if (!expect_object(j, path)) return;
  reject_unknown_keys(j, path, kServeKeys, "serve");
  read_int(j, path, "clients", serve.clients, "a positive integer");
  read_int(j, path, "max_batch", serve.max_batch, "a positive integer");
  read_number(j, path, "timeout_ms", serve.timeout_ms, "a non-negative number of milliseconds");
  read_number(j, path, "rate", serve.rate, "a positive number of requests per second");
  read_enum(j, path, "arrivals", serve.arrivals, kArrivalsNames, "arrival process");
  read_int(j, path, "requests", serve.requests, "a positive integer");
  read_string(j, path, "weights", serve.weights);
}

}  // namespace

Plan read_plan(const Json& root, std::vector<PlanError>& errors) { return PlanReader(errors).read(root); }

std::string expected_got(std::string_view expected, std::string_view got) {
  return "expected " + std::string(expected) + ", got " + std::string(got);
}

std::string closest_name(std::string_view word, const std::vector<std::string_view>& candidates) {
  // Levenshtein distance, one row at a time; names are short.
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      std::size_t diagonal = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
        diagonal = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
      }
    }
    return row[b.size()];
  };
  std::string best;
  std::size_t best_distance = std::min<std::size_t>(2, word.size() > 1 ? word.size() - 1 : 0) + 1;
  for (std::string_view candidate : candidates) {
    std::size_t d = distance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(candidate);
    }
  }
  return best;
}

}  // namespace loom::detail
