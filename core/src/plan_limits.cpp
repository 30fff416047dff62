// The limits on plan values (see plan_limits.h).
#include "loom/core/plan_limits.h"

#include <algorithm>
#include <string>

#include "loom/core/model_info.h"
#include "plan_internal.h"

namespace loom::limits {

int json_depth(std::string_view text, int stop_at) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}') depth = std::max(0, depth - 1);
    if (deepest >= stop_at) return deepest;
  }
  return deepest;
}

namespace {

class LimitChecker {
 public:
  explicit LimitChecker(std::vector<PlanError>& errors) : errors_(errors) {}
  template <class T>
  void at_most(const std::string& path, T value, T limit, const char* what) {
    if (value <= limit) return;
    errors_.push_back({path, std::to_string(value) + " is above the limit of " + std::to_string(limit) + " " + what +
                                 " (docs/plan-format.md, Limits)"});
  }

 private:
  std::vector<PlanError>& errors_;
};

// Layers (branches included) and the deepest nesting of parallel blocks, counted with an
// explicit stack: a model nested too deep must not overflow this check's own stack.
void check_model_shape(const ModelSpec& model, LimitChecker& check, std::vector<PlanError>& errors) {
  struct Item {
    const std::vector<LayerSpec>* layers;
    std::string path;
    int nesting;
  };
  std::vector<Item> pending{{&model.layers, "/model/layers", 0}};
  std::int64_t count = 0;
  while (!pending.empty()) {
    Item item = std::move(pending.back());
    pending.pop_back();
    if (item.nesting > kMaxNesting) {
      errors.push_back({item.path, "parallel blocks nested " + std::to_string(item.nesting) +
                                       " deep: the limit is " + std::to_string(kMaxNesting)});
      continue;
    }
    for (std::size_t i = 0; i < item.layers->size(); ++i) {
      const LayerSpec& layer = (*item.layers)[i];
      const std::string path = item.path + "/" + std::to_string(i);
      ++count;
      check.at_most(path + "/out", layer.out, kMaxDimension, "features");
      check.at_most(path + "/out_channels", layer.out_channels, kMaxDimension, "channels");
      check.at_most(path + "/kernel", layer.kernel, kMaxKernel, "");
      check.at_most(path + "/stride", layer.stride, kMaxKernel, "");
      check.at_most(path + "/padding", layer.padding, kMaxKernel, "");
      for (std::size_t b = 0; b < layer.branches.size(); ++b)
        pending.push_back({&layer.branches[b].layers, path + "/branches/" + std::to_string(b) + "/layers",
                           item.nesting + 1});
    }
  }
  check.at_most<std::int64_t>("/model/layers", count, kMaxLayers, "layers in the model");
  for (std::size_t d = 0; d < model.input.size(); ++d)
    check.at_most("/model/input/" + std::to_string(d), model.input[d], kMaxDimension, "");
}

void check_counts(const Plan& plan, LimitChecker& check) {
  const TrainingSpec& t = plan.training;
  check.at_most("/training/batch", t.batch, kMaxBatch, "samples");
  check.at_most("/training/steps", t.steps, kMaxSteps, "steps");
  check.at_most("/training/epochs", t.epochs, kMaxEpochs, "epochs");
  check.at_most("/training/threads", t.threads, kMaxThreads, "threads");
  const ParallelSpec& p = plan.parallel;
  check.at_most("/parallel/stages", p.stages, kMaxStages, "stages");
  check.at_most("/parallel/data_parallel", p.data_parallel, kMaxRanks, "replicas");
  check.at_most("/parallel/microbatches", p.microbatches, kMaxMicrobatches, "micro-batches");
  check.at_most("/parallel/grad_accumulation", p.grad_accumulation, kMaxMicrobatches, "micro-steps");
  check.at_most("/parallel/sync/servers", p.sync.servers, kMaxRanks, "servers");
  check.at_most<long long>("/parallel", static_cast<long long>(p.data_parallel) * p.stages + p.sync.servers,
                           kMaxRanks, "ranks (data_parallel x stages + servers)");
  const DataSpec& d = plan.data;
  check.at_most("/data/train_limit", d.train_limit, kMaxSamples, "samples");
  check.at_most("/data/test_limit", d.test_limit, kMaxSamples, "samples");
  check.at_most("/data/train_samples", d.train_samples, kMaxSamples, "samples");
  check.at_most("/data/test_samples", d.test_samples, kMaxSamples, "samples");
  check.at_most("/data/classes", d.classes, kMaxClasses, "classes");
  check.at_most<std::int64_t>("/data/features", d.features, kMaxDimension, "features");
  if (const auto& serve = plan.serve) {
    check.at_most("/serve/clients", serve->clients, kMaxRanks - 1, "clients");
    check.at_most("/serve/max_batch", serve->max_batch, kMaxBatch, "requests");
    check.at_most("/serve/requests", serve->requests, kMaxSamples, "requests");
  }
}

}  // namespace

std::vector<PlanError> check_limits(const Plan& plan) {
  std::vector<PlanError> errors;
  LimitChecker check(errors);
  check_model_shape(plan.model, check, errors);
  check_counts(plan, check);
  return errors;
}

std::vector<PlanError> check_parameters(const ModelInfo& info) {
  std::vector<PlanError> errors;
  LimitChecker check(errors);
  check.at_most("/model", info.total_params, kMaxParameters, "parameters");
  return errors;
}

std::vector<PlanError> check_memory(const Plan& plan, std::int64_t memory_bytes) {
  return memory_bytes > 0 ? check_memory(plan, infer_model(plan, nullptr), memory_bytes) : std::vector<PlanError>{};
}

namespace {
bool on_this_machine(const std::string& host) { return host.empty() || host == "localhost" || host == "127.0.0.1"; }

// The worker ranks placed on this machine (host "localhost") need their memory at once:
// four ranks of 14 GiB do not fit 24 GiB though each would alone.
std::vector<PlanError> check_this_machine(const Plan& plan, const ModelInfo& info, std::int64_t memory_bytes) {
  std::int64_t together = 0;
  int ranks = 0;
  const int world = world_size(plan);
  for (int rank = 0; rank < world && rank < static_cast<int>(plan.parallel.devices.size()); ++rank) {
    const RankRole role = rank_role(plan, rank);
    if (role.kind != RankKind::Worker || role.stage < 0 ||
        role.stage >= static_cast<int>(info.stage_memory_bytes.size()) ||
        !on_this_machine(plan.parallel.devices[static_cast<std::size_t>(rank)].host))
      continue;
    together += info.stage_memory_bytes[static_cast<std::size_t>(role.stage)];
    ++ranks;
  }
  if (ranks < 2 || together <= memory_bytes) return {};
  return {{"/parallel/devices", "the " + std::to_string(ranks) + " ranks on this machine need about " +
                                    format_bytes(together) + " together (each its weights, gradients, optimizer "
                                    "state and activations), more than its " + format_bytes(memory_bytes) +
                                    " of memory: make the layers or the batch smaller, use fewer devices here, "
                                    "or place some on other hosts"}};
}
}  // namespace

std::vector<PlanError> check_memory(const Plan& plan, const ModelInfo& info, std::int64_t memory_bytes) {
  if (memory_bytes <= 0) return {};
  const auto largest = std::max_element(info.stage_memory_bytes.begin(), info.stage_memory_bytes.end());
  if (largest == info.stage_memory_bytes.end()) return {};
  if (*largest <= memory_bytes) return check_this_machine(plan, info, memory_bytes);
  const auto stage = largest - info.stage_memory_bytes.begin();
  return {{"/model", "a rank of stage " + std::to_string(stage) + " needs about " + format_bytes(*largest) +
                         " (weights, gradients, optimizer state and activations of the global batch), more than "
                         "this machine's " + format_bytes(memory_bytes) + " of memory: make the layers or the batch "
                         "smaller, or split the model over more stages"}};
}

}  // namespace loom::limits
