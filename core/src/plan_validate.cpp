// Semantic checks on a Plan, whether read from JSON or built in the designer: value
// ranges, the model against its dataset, layer names, pipeline stage placement, the
// device list against the strategy, and the divisibility rules that batching needs.
// Each finding names the JSON pointer it is about and how to fix it.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "loom/core/model_info.h"
#include "loom/core/plan_limits.h"
#include "plan_internal.h"

namespace loom {
namespace {

using detail::expected_got;
using detail::shown;

class Checker {
 public:
  explicit Checker(std::vector<PlanError>& errors) : errors_(errors) {}

  void error(std::string path, std::string reason) { errors_.push_back({std::move(path), std::move(reason)}); }
  void positive(const std::string& path, std::int64_t value) {
    if (value <= 0) error(path, expected_got("a positive integer", std::to_string(value)));
  }
  void non_negative(const std::string& path, std::int64_t value) {
    if (value < 0) error(path, expected_got("a non-negative integer", std::to_string(value)));
  }
  void positive(const std::string& path, double value) {
    if (!(value > 0)) error(path, expected_got("a positive number", number(value)));
  }
  void non_negative(const std::string& path, double value) {
    if (!(value >= 0)) error(path, expected_got("a non-negative number", number(value)));
  }
  void unit_interval(const std::string& path, double value) {
    if (!(value >= 0 && value < 1)) error(path, expected_got("a number in [0, 1)", number(value)));
  }
  static std::string number(double value) { return detail::Json(value).dump(); }

 private:
  std::vector<PlanError>& errors_;
};

void check_training(const TrainingSpec& t, Checker& check) {
  check.positive("/training/batch", t.batch);
  check.positive("/training/epochs", static_cast<std::int64_t>(t.epochs));
  check.non_negative("/training/steps", t.steps);
  check.non_negative("/training/eval_every", t.eval_every);
  check.non_negative("/training/threads", static_cast<std::int64_t>(t.threads));
  check.non_negative("/training/hang_timeout_s", t.hang_timeout_s);
  check.non_negative("/training/checkpoint_every", t.checkpoint_every);
  const OptimizerSpec& o = t.optimizer;
  check.positive("/training/optimizer/lr", o.lr);
  check.unit_interval("/training/optimizer/momentum", o.momentum);
  check.unit_interval("/training/optimizer/beta1", o.beta1);
  check.unit_interval("/training/optimizer/beta2", o.beta2);
  check.positive("/training/optimizer/eps", o.eps);
  check.non_negative("/training/optimizer/weight_decay", o.weight_decay);
}

void check_data(const DataSpec& d, Checker& check) {
  check.non_negative("/data/train_limit", d.train_limit);
  check.non_negative("/data/test_limit", d.test_limit);
  if (d.source == DataSource::FashionMnist) {
    if (d.path.empty()) {
      check.error("/data/path", "the fashion-mnist source needs the directory of its IDX files");
    } else if (std::error_code ec; !std::filesystem::exists(d.path, ec)) {
      // Checked here, not when a rank starts: a typo is found before anything launches.
      check.error("/data/path", "'" + shown(d.path) + "' does not exist on this machine (Debian: apt-get install "
                                "dataset-fashion-mnist puts it in /usr/share/datasets/fashion-mnist)");
    }
    return;
  }
  if (d.classes < 2) check.error("/data/classes", expected_got("at least 2 classes", std::to_string(d.classes)));
  if (d.synthetic == SyntheticKind::Blobs) check.positive("/data/features", static_cast<std::int64_t>(d.features));
  check.positive("/data/train_samples", d.train_samples);
  check.positive("/data/test_samples", d.test_samples);
  check.non_negative("/data/noise", d.noise);
}

// The input shape the dataset delivers, and a description for messages.
std::vector<Shape> dataset_shapes(const DataSpec& d) {
  if (d.source == DataSource::FashionMnist) return {{1, 28, 28}, {784}};
  if (d.synthetic == SyntheticKind::Spirals) return {{2}};
  return {{d.features}};
}

std::string dataset_label(const DataSpec& d) {
  if (d.source == DataSource::FashionMnist) return "fashion-mnist";
  return "synthetic " + std::string(synthetic_kind_name(d.synthetic));
}

void check_model_against_data(const Plan& plan, const ModelInfo& info, Checker& check) {
  const ModelSpec& model = plan.model;
  if (model.layers.empty()) {
    check.error("/model/layers", "the model has no layers; add at least a linear layer producing the class scores");
    return;
  }
  std::vector<Shape> accepted = dataset_shapes(plan.data);
  bool input_ok = std::find(accepted.begin(), accepted.end(), model.input) != accepted.end();
  if (!model.input.empty() && !input_ok) {
    std::string wanted = "[" + format_shape(accepted[0]) + "]";
    if (accepted.size() > 1) wanted += " or [" + format_shape(accepted[1]) + "]";
    check.error("/model/input", dataset_label(plan.data) + " samples have shape " + wanted +
                                    " but the model input is [" + format_shape(model.input) + "]");
  }
  const int classes = dataset_classes(plan);
  const Shape wanted_output{classes};
  if (info.output.empty() || info.output == wanted_output) return;  // unknown: already reported
  std::string reason = "the model output is [" + format_shape(info.output) + "] but " + dataset_label(plan.data) +
                       " has " + std::to_string(classes) + " classes: the last layer must produce " +
                       std::to_string(classes) + " class scores";
  if (info.output.size() > 1) reason += " (add a flatten layer, then a linear layer with out " + std::to_string(classes) + ")";
  check.error("/model/layers/" + std::to_string(model.layers.size() - 1), reason);
}

void check_layer_names(const ModelSpec& model, Checker& check) {
  std::map<std::string, std::string> first_use;  // name -> path of the layer that has it
  detail::walk_model(model, [&](const LayerSpec& layer, const detail::LayerPlace& place) {
    if (layer.name.empty()) return;  // the reader reports empty names; editors fill them in
    auto [it, inserted] = first_use.emplace(layer.name, place.path);
    if (!inserted) {
      check.error(place.path + "/name", "duplicate layer name '" + shown(layer.name) + "' (also used by " + shown(it->second) + ")");
    }
  });
}

// Pipeline stages must follow the model: a layer never runs on an earlier stage than a
// layer before it. Siblings in a parallel block may use any stage at or after the stages
// before the block, since they run side by side. Stages that do not exist are reported
// elsewhere and left out here, so that one typo gives one error.
int check_stage_order(const std::vector<LayerSpec>& layers, const std::string& path, int running, int stages,
                      Checker& check) {
  auto order_error = [&check](const std::string& where, int stage, int earlier) {
    check.error(where, "stage " + std::to_string(stage) + " comes after stage " + std::to_string(earlier) +
                           ": stages must follow model order (a layer cannot run on an earlier stage than a "
                           "layer before it)");
  };
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& layer = layers[i];
    const std::string layer_path = path + "/" + std::to_string(i);
    if (layer.stage < 0 || layer.stage >= stages) continue;
    if (layer.stage < running) order_error(layer_path + "/stage", layer.stage, running);
    running = std::max(running, layer.stage);
    int after_block = running;
    for (std::size_t b = 0; b < layer.branches.size(); ++b) {
      const BranchSpec& branch = layer.branches[b];
      const std::string branch_path = layer_path + "/branches/" + std::to_string(b);
      const int branch_stage = branch.stage >= 0 ? branch.stage : layer.stage;
      if (branch_stage >= stages) continue;
      if (branch_stage < running) order_error(branch_path + "/stage", branch_stage, running);
      const int end = check_stage_order(branch.layers, branch_path + "/layers", branch_stage, stages, check);
      after_block = std::max(after_block, end);
    }
    running = after_block;
  }
  return running;
}

void check_stage_placement(const Plan& plan, Checker& check) {
  const int stages = plan.parallel.stages;
  if (stages < 1) return;  // reported with the parallel section
  std::set<int> used;
  detail::walk_model(plan.model, [&](const LayerSpec& layer, const detail::LayerPlace& place) {
    const std::string path = place.path + "/stage";
    if (layer.stage < 0) {
      check.error(path, expected_got("a non-negative integer", std::to_string(layer.stage)));
    } else if (layer.stage >= stages) {
      check.error(path, "stage " + std::to_string(layer.stage) + " does not exist: parallel.stages is " +
                            std::to_string(stages) + " (stages are numbered from 0)");
    } else if (place.branch_stage >= 0 && layer.stage != place.branch_stage) {
      check.error(path, "a layer inside a branch runs on its branch's stage (" + std::to_string(place.branch_stage) +
                            "); set \"stage\" on the branch instead");
    }
    used.insert(layer.stage);
    for (std::size_t b = 0; b < layer.branches.size(); ++b) {
      const int s = layer.branches[b].stage;
      const std::string branch_path = place.path + "/branches/" + std::to_string(b) + "/stage";
      if (s >= stages) {
        check.error(branch_path,
                    "stage " + std::to_string(s) + " does not exist: parallel.stages is " + std::to_string(stages));
      } else if (s >= 0 && place.branch_stage >= 0 && s != place.branch_stage) {
        // A nested block runs as one piece on its branch's stage; only top-level blocks split.
        check.error(branch_path, "a parallel block inside a branch runs on its branch's stage (" +
                                     std::to_string(place.branch_stage) +
                                     "); only top-level parallel blocks may place branches on other stages");
      }
    }
  });
  const int devices = static_cast<int>(plan.parallel.devices.size());
  if (stages > devices && devices > 0) {
    check.error("/parallel/stages", std::to_string(stages) + " stages but only " + std::to_string(devices) +
                                        " device(s): every stage runs on its own rank (list one device per rank, "
                                        "or lower parallel.stages)");
  }
  if (plan.model.layers.empty()) return;
  for (int s = 0; s < stages; ++s) {
    if (used.count(s) == 0) {
      check.error("/parallel/stages", "stage " + std::to_string(s) +
                                          " has no layers; give some layers \"stage\": " + std::to_string(s) +
                                          " or lower parallel.stages");
    }
  }
  check_stage_order(plan.model.layers, "/model/layers", 0, stages, check);
}

void check_parallel_ranges(const ParallelSpec& p, Checker& check) {
  check.positive("/parallel/data_parallel", static_cast<std::int64_t>(p.data_parallel));
  check.positive("/parallel/stages", static_cast<std::int64_t>(p.stages));
  check.positive("/parallel/microbatches", static_cast<std::int64_t>(p.microbatches));
  check.positive("/parallel/grad_accumulation", static_cast<std::int64_t>(p.grad_accumulation));
  check.positive("/parallel/bucket_mb", p.bucket_mb);
  check.non_negative("/parallel/sync/bound", static_cast<std::int64_t>(p.sync.bound));
  check.positive("/parallel/sync/period", static_cast<std::int64_t>(p.sync.period));
  check.positive("/parallel/sync/servers", static_cast<std::int64_t>(p.sync.servers));
}

// The global batch splits into data_parallel replicas x grad_accumulation micro-steps,
// and each of those into micro-batches for the pipeline.
void check_batch_split(const Plan& plan, Checker& check) {
  const ParallelSpec& p = plan.parallel;
  const std::int64_t batch = plan.training.batch;
  if (batch <= 0 || p.data_parallel <= 0 || p.grad_accumulation <= 0 || p.microbatches <= 0) return;
  const std::int64_t split = static_cast<std::int64_t>(p.data_parallel) * p.grad_accumulation;
  if (batch % split != 0) {
    check.error("/training/batch", "batch " + std::to_string(batch) + " is not divisible by data_parallel x " +
                                       "grad_accumulation = " + std::to_string(split));
    return;
  }
  const std::int64_t per_step = batch / split;
  if (per_step % p.microbatches != 0) {
    check.error("/parallel/microbatches", std::to_string(p.microbatches) +
                                              " micro-batches do not divide the per-replica batch of " +
                                              std::to_string(per_step) +
                                              " (batch / data_parallel / grad_accumulation)");
  }
}

std::string rank_breakdown(const Plan& plan) {
  if (plan.serve) return "1 inference server + " + std::to_string(plan.serve->clients) + " client(s)";
  const ParallelSpec& p = plan.parallel;
  std::string text = "data_parallel " + std::to_string(p.data_parallel) + " x stages " + std::to_string(p.stages);
  if (p.sync.mode == SyncMode::ParameterServer || p.sync.mode == SyncMode::Ssp) {
    text += " + " + std::to_string(p.sync.servers) + " server(s)";
  }
  return text;
}

void check_devices(const Plan& plan, Checker& check) {
  const ParallelSpec& p = plan.parallel;
  const int ranks = world_size(plan);
  if (static_cast<int>(p.devices.size()) != ranks) {
    check.error("/parallel/devices", std::to_string(p.devices.size()) + " devices listed but the plan needs " +
                                         std::to_string(ranks) + " ranks (" + rank_breakdown(plan) +
                                         "): list one device per rank");
  }
  for (std::size_t i = 0; i < p.devices.size(); ++i) {
    const DeviceSpec& d = p.devices[i];
    const std::string path = "/parallel/devices/" + std::to_string(i);
    if (d.host.empty()) check.error(path + "/host", "a device needs a host name (\"localhost\" for this machine)");
    if (d.kind == DeviceKind::Gpu && d.gpu < 0) {
      check.error(path, "a gpu device needs a \"gpu\" index (0 for the first GPU on the host)");
    } else if (d.kind == DeviceKind::Cpu && d.gpu >= 0) {
      check.error(path + "/gpu", "a cpu device takes no \"gpu\" index (set \"kind\": \"gpu\" to use the GPU)");
    }
  }
}

// How NCCL ranks must sit on GPUs. Only meaningful in a build that can run them: without
// NCCL the backend is refused as a whole (check_gpu_path), and advice such as "the nccl
// backend needs gpu devices" would point the user at a setting that is refused too.
void check_nccl_devices(const ParallelSpec& p, Checker& check) {
  if (p.backend != CommBackend::Nccl) return;
  std::map<std::pair<std::string, int>, std::size_t> nccl_gpus;  // (host, gpu) -> first rank
  for (std::size_t i = 0; i < p.devices.size(); ++i) {
    const DeviceSpec& d = p.devices[i];
    const std::string path = "/parallel/devices/" + std::to_string(i);
    if (d.kind == DeviceKind::Cpu) {
      check.error(path + "/kind", "the nccl backend needs gpu devices; use \"backend\": \"mpi\" for cpu devices");
    } else if (d.gpu >= 0) {
      auto [it, inserted] = nccl_gpus.emplace(std::make_pair(d.host, d.gpu), i);
      if (!inserted) {
        check.error(path, "gpu " + std::to_string(d.gpu) + " on " + d.host + " is already used by rank " +
                              std::to_string(it->second) +
                              "; NCCL refuses two ranks on one GPU (use another gpu or backend mpi)");
      }
    }
  }
}

// No silent substitution: a build without the CUDA backend would run a gpu device's rank
// on the CPU and store it as if nothing happened, so such a plan is refused here, where
// the CLI, the rank and the designer all look. A CUDA build runs gpu devices; their ranks
// exchange tensors through host memory over MPI until NCCL is there.
void check_gpu_path(const ParallelSpec& p, const BuildCapabilities& build, Checker& check) {
  if (p.backend == CommBackend::Nccl) {
    if (build.nccl) {
      check_nccl_devices(p, check);
    } else {
      check.error("/parallel/backend", build.cuda ? "this build has no NCCL communicator: set \"backend\": \"mpi\" "
                                                    "(gpu ranks then exchange tensors through host memory)"
                                                  : "this build has no NCCL communicator: set \"backend\": \"mpi\" "
                                                    "(and \"kind\": \"cpu\" on every device)");
    }
  }
  if (build.cuda) return;
  for (std::size_t i = 0; i < p.devices.size(); ++i) {
    if (p.devices[i].kind != DeviceKind::Gpu) continue;
    check.error("/parallel/devices/" + std::to_string(i) + "/kind",
                "this build has no CUDA support: rebuild with the CUDA toolkit (nvcc), or set \"kind\": \"cpu\"");
  }
}

// TF32 is a GPU's math mode: on a plan without a gpu device it would change nothing, so
// asking for it is a mistake worth naming.
void check_tf32(const Plan& plan, Checker& check) {
  if (!plan.training.tf32) return;
  const auto& devices = plan.parallel.devices;
  if (std::none_of(devices.begin(), devices.end(), [](const DeviceSpec& d) { return d.kind == DeviceKind::Gpu; }))
    check.error("/training/tf32", "TF32 is a math mode of gpu devices and this plan has none: set it to false");
}

void check_stragglers(const Plan& plan, Checker& check) {
  const int ranks = world_size(plan);
  const auto& stragglers = plan.parallel.stragglers;
  for (std::size_t i = 0; i < stragglers.size(); ++i) {
    const StragglerSpec& s = stragglers[i];
    const std::string path = "/parallel/stragglers/" + std::to_string(i);
    if (s.rank < 0 || s.rank >= ranks) {
      check.error(path + "/rank", "rank " + std::to_string(s.rank) + " is out of range: the plan has ranks 0.." +
                                      std::to_string(ranks - 1));
    }
    if (!(s.slowdown >= 1.0)) {
      check.error(path + "/slowdown", "slowdown must be at least 1 (1 = normal speed), got " + Checker::number(s.slowdown));
    }
    check.non_negative(path + "/delay_ms", s.delay_ms);
  }
}

// The asynchronous modes replicate the whole model on every worker: no pipeline stages,
// and no micro-batches.
void check_asynchronous(const Plan& plan, Checker& check) {
  const ParallelSpec& p = plan.parallel;
  if (p.sync.mode == SyncMode::AllReduce) return;
  const std::string mode(sync_mode_name(p.sync.mode));
  if (p.stages > 1) {
    check.error("/parallel/stages", "sync mode " + mode + " trains whole-model replicas; use stages 1 (got " +
                                        std::to_string(p.stages) + ")");
  }
  if (p.microbatches > 1) {
    check.error("/parallel/microbatches", "sync mode " + mode + " has no pipeline; use microbatches 1");
  }
}

// A serving plan runs the whole model on one server rank: no replicas, stages or
// micro-batches, and the parameter file it names must exist.
void check_serving(const Plan& plan, Checker& check) {
  if (!plan.serve) return;
  const ServeSpec& s = *plan.serve;
  check.positive("/serve/clients", static_cast<std::int64_t>(s.clients));
  check.positive("/serve/max_batch", s.max_batch);
  check.non_negative("/serve/timeout_ms", s.timeout_ms);
  check.positive("/serve/rate", s.rate);
  check.positive("/serve/requests", s.requests);
  if (s.clients > 0 && s.requests > 0 && s.requests < s.clients) {
    check.error("/serve/requests", std::to_string(s.requests) + " requests cannot be split over " +
                                       std::to_string(s.clients) + " clients: send at least one per client");
  }
  const ParallelSpec& p = plan.parallel;
  const char* whole = " in a serving plan: the server runs the whole model";
  if (p.data_parallel != 1) check.error("/parallel/data_parallel", std::string("use data_parallel 1") + whole);
  if (p.stages != 1) check.error("/parallel/stages", std::string("use stages 1") + whole);
  if (p.microbatches != 1) check.error("/parallel/microbatches", std::string("use microbatches 1") + whole);
  if (p.sync.mode != SyncMode::AllReduce) {
    check.error("/parallel/sync/mode", "a serving plan trains nothing: use sync mode allreduce (the default)");
  }
  std::error_code ec;
  if (!s.weights.empty() && !std::filesystem::is_regular_file(s.weights, ec)) {
    check.error("/serve/weights", "no parameter file '" + s.weights +
                                      "' (save one with loom-cli run PLAN --dump-params FILE, or leave weights empty "
                                      "for the initial weights)");
  }
}

}  // namespace

std::vector<PlanError> validate_plan(const Plan& plan) { return validate_plan(plan, this_build()); }

std::vector<PlanError> validate_plan(const Plan& plan, const BuildCapabilities& build) {
  // Limits first: what follows sizes vectors and recurses by plan values.
  std::vector<PlanError> errors = limits::check_limits(plan);
  if (!errors.empty()) return errors;
  Checker check(errors);
  ModelInfo info = infer_model(plan, &errors);
  for (PlanError& e : limits::check_parameters(info)) errors.push_back(std::move(e));
  check_model_against_data(plan, info, check);
  check_layer_names(plan.model, check);
  check_stage_placement(plan, check);
  check_data(plan.data, check);
  check_training(plan.training, check);
  check_parallel_ranges(plan.parallel, check);
  check_batch_split(plan, check);
  check_devices(plan, check);
  check_gpu_path(plan.parallel, build, check);
  check_tf32(plan, check);
  check_stragglers(plan, check);
  check_asynchronous(plan, check);
  check_serving(plan, check);
  return errors;
}

}  // namespace loom
