// Writes a Plan as canonical "loom-plan/1" JSON: every field spelled out (defaults
// included) in a fixed key order, so that the run store keeps a self-contained record and
// parse_plan(plan_to_json(p)) gives p back.
#include "plan_internal.h"

namespace loom {
namespace {

using detail::enum_to_name;
using detail::Json;

Json layers_to_json(const std::vector<LayerSpec>& layers);

// Resolves the "0 means default" strides so that the written plan says what runs.
std::int64_t written_stride(const LayerSpec& layer) {
  if (layer.stride > 0) return layer.stride;
  return layer.kind == LayerKind::MaxPool2d ? layer.kernel : 1;
}

Json layer_to_json(const LayerSpec& layer) {
  Json j;
  j["type"] = layer_kind_name(layer.kind);
  if (!layer.name.empty()) j["name"] = layer.name;
  switch (layer.kind) {
    case LayerKind::Linear:
      j["out"] = layer.out;
      j["bias"] = layer.bias;
      break;
    case LayerKind::Conv2d:
      j["out_channels"] = layer.out_channels;
      j["kernel"] = layer.kernel;
      j["stride"] = written_stride(layer);
      j["padding"] = layer.padding;
      j["bias"] = layer.bias;
      break;
    case LayerKind::MaxPool2d:
      j["kernel"] = layer.kernel;
      j["stride"] = written_stride(layer);
      break;
    case LayerKind::Dropout:
      j["p"] = layer.p;
      break;
    default:
      break;
  }
  j["stage"] = layer.stage;
  if (layer.kind == LayerKind::Parallel) {
    Json branches = Json::array();
    for (const BranchSpec& branch : layer.branches) {
      Json b;
      if (branch.stage >= 0) b["stage"] = branch.stage;  // absent = the block's stage
      b["layers"] = layers_to_json(branch.layers);
      branches.push_back(std::move(b));
    }
    j["branches"] = std::move(branches);
  }
  return j;
}

Json layers_to_json(const std::vector<LayerSpec>& layers) {
  Json j = Json::array();
  for (const LayerSpec& layer : layers) j.push_back(layer_to_json(layer));
  return j;
}

Json model_to_json(const ModelSpec& model) {
  Json j;
  j["input"] = model.input;
  j["layers"] = layers_to_json(model.layers);
  j["loss"] = enum_to_name(detail::kLossNames, model.loss);
  return j;
}

// Synthetic fields are written for every source so that switching the source back and
// forth in the editor loses nothing.
Json data_to_json(const DataSpec& data) {
  Json j;
  j["source"] = data_source_name(data.source);
  j["path"] = data.path;
  j["train_limit"] = data.train_limit;
  j["test_limit"] = data.test_limit;
  j["shuffle"] = data.shuffle;
  j["kind"] = synthetic_kind_name(data.synthetic);
  j["classes"] = data.classes;
  j["features"] = data.features;
  j["train_samples"] = data.train_samples;
  j["test_samples"] = data.test_samples;
  j["noise"] = data.noise;
  j["seed"] = data.seed;
  return j;
}

Json training_to_json(const TrainingSpec& training) {
  const OptimizerSpec& opt = training.optimizer;
  Json optimizer;
  optimizer["type"] = optimizer_name(opt.kind);
  optimizer["lr"] = opt.lr;
  optimizer["momentum"] = opt.momentum;
  optimizer["beta1"] = opt.beta1;
  optimizer["beta2"] = opt.beta2;
  optimizer["eps"] = opt.eps;
  optimizer["weight_decay"] = opt.weight_decay;
  Json j;
  j["batch"] = training.batch;
  j["epochs"] = training.epochs;
  j["steps"] = training.steps;
  j["seed"] = training.seed;
  j["eval_every"] = training.eval_every;
  j["threads"] = training.threads;
  j["hang_timeout_s"] = training.hang_timeout_s;
  j["checkpoint_every"] = training.checkpoint_every;
  j["tf32"] = training.tf32;
  j["graph"] = training.graph;
  j["on_divergence"] = enum_to_name(detail::kDivergenceNames, training.on_divergence);
  j["optimizer"] = std::move(optimizer);
  return j;
}

Json devices_to_json(const std::vector<DeviceSpec>& devices) {
  Json j = Json::array();
  for (const DeviceSpec& device : devices) {
    Json d;
    d["kind"] = device_kind_name(device.kind);
    d["host"] = device.host;
    if (device.gpu >= 0) d["gpu"] = device.gpu;
    j.push_back(std::move(d));
  }
  return j;
}

Json parallel_to_json(const ParallelSpec& parallel) {
  Json sync;
  sync["mode"] = sync_mode_name(parallel.sync.mode);
  sync["bound"] = parallel.sync.bound;
  sync["period"] = parallel.sync.period;
  sync["servers"] = parallel.sync.servers;
  sync["staleness_aware_lr"] = parallel.sync.staleness_aware_lr;
  Json stragglers = Json::array();
  for (const StragglerSpec& s : parallel.stragglers) {
    stragglers.push_back(Json{{"rank", s.rank}, {"slowdown", s.slowdown}, {"delay", delay_name(s.delay)},
                              {"delay_ms", s.delay_ms}});
  }
  Json j;
  j["devices"] = devices_to_json(parallel.devices);
  j["data_parallel"] = parallel.data_parallel;
  j["stages"] = parallel.stages;
  j["microbatches"] = parallel.microbatches;
  j["schedule"] = schedule_name(parallel.schedule);
  j["bucket_mb"] = parallel.bucket_mb;
  j["grad_accumulation"] = parallel.grad_accumulation;
  j["backend"] = backend_name(parallel.backend);
  j["sync"] = std::move(sync);
  j["stragglers"] = std::move(stragglers);
  return j;
}

Json serve_to_json(const ServeSpec& serve) {
  Json j;
  j["clients"] = serve.clients;
  j["max_batch"] = serve.max_batch;
  j["timeout_ms"] = serve.timeout_ms;
  j["rate"] = serve.rate;
  j["arrivals"] = arrivals_name(serve.arrivals);
  j["requests"] = serve.requests;
  j["weights"] = serve.weights;
  return j;
}

}  // namespace

std::string plan_to_json(const Plan& plan, int indent) {
  Json j;
  j["format"] = kPlanFormat;
  j["name"] = plan.name;
  j["model"] = model_to_json(plan.model);
  j["data"] = data_to_json(plan.data);
  j["training"] = training_to_json(plan.training);
  j["parallel"] = parallel_to_json(plan.parallel);
  if (plan.serve) j["serve"] = serve_to_json(*plan.serve);
  // Replace invalid UTF-8 instead of throwing: a name typed in the editor must not crash a save.
  return j.dump(indent < 0 ? -1 : indent, ' ', false, nlohmann::detail::error_handler_t::replace);
}

}  // namespace loom
