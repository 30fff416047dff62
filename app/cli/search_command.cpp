// `loom-cli search PLAN [--cluster FILE] [--devices N] [--memory-per-device SIZE] [--save DIR]`:
// every layout of a plan predicted and ranked (loom/predict/layouts.h).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "loom/predict/layouts.h"
#include "loom/trace/machine.h"
#include "predict_common.h"

namespace loom::cli {

namespace {


// "512MiB", "16GiB", "1.5GB", "4096": bytes; nullopt when it is none of these.
std::optional<std::int64_t> parse_size(const std::string& text) {
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(number > 0)) return std::nullopt;
  const std::string unit = end;
  static const std::pair<const char*, double> units[] = {{"", 1},         {"B", 1},      {"KiB", 1024.0},  {"MiB", 1048576.0},
                                                         {"GiB", 1073741824.0}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}};
  for (const auto& [name, scale] : units)
    if (unit == name) return std::int64_t(number * scale);
  return std::nullopt;
}

// Ranks the layouts may use: --devices, else the cluster's devices, else the plan's ranks.
int device_budget(const Args& args, const Plan& plan, const std::optional<predict::Cluster>& cluster) {
  if (args.devices > 0) return args.devices;
  if (cluster) return cluster->devices();
  return std::max(1, plan.parallel.data_parallel) * std::max(1, plan.parallel.stages);
}

void print_ranking(const Plan& plan, const std::vector<predict::Candidate>& ranked, int devices, int shown) {
  int fit = 0, left_out = 0;
  for (const predict::Candidate& c : ranked) (c.left_out.empty() ? fit : left_out)++;
  std::printf("layouts of '%s' on up to %d devices (global batch %lld): %d predicted, %d left out\n", plan.name.c_str(),
              devices, static_cast<long long>(plan.training.batch), fit, left_out);
  std::printf("  %-4s %-62s %10s %12s %12s\n", "", "layout", "step ms", "samples/s", "peak memory");
  for (int i = 0; i < std::min(shown, fit); ++i) {
    const predict::Candidate& c = ranked[std::size_t(i)];
    std::printf("  %-4d %-62s %10.3f %12.0f %12s\n", i + 1, c.choice.describe().c_str(), c.prediction.step_ms,
                c.prediction.samples_per_s, format_bytes(c.peak_memory).c_str());
    if (c.prediction.staleness.present)
      std::printf("       staleness: mean %.2f, max %lld\n", c.prediction.staleness.mean,
                  static_cast<long long>(c.prediction.staleness.max));
    // Per global batch (what throughput ranks), which a worker's or a local step is not.
    const auto batch_ms = [&](const predict::Prediction& p) { return 1000.0 * double(plan.training.batch) / p.samples_per_s; };
    if (i > 0) std::printf("       loses by %.3f ms a batch: %s\n", batch_ms(c.prediction) - batch_ms(ranked.front().prediction),
                           predict::why_slower(ranked.front().prediction, c.prediction).c_str());
  }
  int shown_out = 0;
  for (const predict::Candidate& c : ranked)
    if (!c.left_out.empty() && shown_out++ < 3) std::printf("  left out: %s: %s\n", c.choice.describe().c_str(), c.left_out.c_str());
  if (left_out > 3) std::printf("  ... %d more left out (--json lists every one)\n", left_out - 3);
}

nlohmann::json ranking_json(const Plan& plan, const std::vector<predict::Candidate>& ranked, int devices) {
  nlohmann::json layouts = nlohmann::json::array();
  for (const predict::Candidate& c : ranked) {
    nlohmann::json j = {{"replicas", c.choice.replicas},      {"stages", c.choice.stages},
                        {"microbatches", c.choice.microbatches}, {"schedule", schedule_name(c.choice.schedule)},
                        {"bucket_mb", c.choice.bucket_mb}};
    if (c.choice.sync) {
      const SyncSpec& sync = *c.choice.sync;
      j["sync"] = sync_mode_name(sync.mode);
      if (sync.mode == SyncMode::ParameterServer || sync.mode == SyncMode::Ssp) j["servers"] = sync.servers;
      if (sync.mode == SyncMode::Ssp) j["bound"] = sync.bound;
      if (sync.mode == SyncMode::LocalSgd) j["period"] = sync.period;
    }
    if (c.choice.accumulation > 0) j["grad_accumulation"] = c.choice.accumulation;
    if (c.prediction.staleness.present) j["staleness_mean"] = c.prediction.staleness.mean;
    if (!c.left_out.empty()) {
      j["left_out"] = c.left_out;
    } else {
      j["step_ms"] = c.prediction.step_ms;
      j["samples_per_s"] = c.prediction.samples_per_s;
      j["peak_memory_bytes"] = c.peak_memory;
      if (&c != &ranked.front()) j["why_slower"] = predict::why_slower(ranked.front().prediction, c.prediction);
    }
    layouts.push_back(std::move(j));
  }
  return {{"plan", plan.name}, {"devices", devices}, {"layouts", layouts}};
}

// The top layouts as plan files, to open in the workbench or run; the paths written, or
// nullopt when one could not be (the error printed).
std::optional<std::vector<std::string>> save_layouts(const Plan& plan, const std::vector<predict::Candidate>& ranked,
                                                     const std::string& dir, int count) {
  std::vector<std::string> written;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (int i = 0; i < std::min<int>(count, int(ranked.size())); ++i) {
    const predict::Candidate& c = ranked[std::size_t(i)];
    if (!c.left_out.empty()) break;
    auto laid = predict::with_layout(plan, c.choice);
    if (!laid.ok()) continue;
    laid->name = plan.name + " (layout " + std::to_string(i + 1) + ")";
    const std::string path = dir + "/layout-" + std::to_string(i + 1) + ".json";
    std::ofstream out(path);
    out << plan_to_json(*laid) << "\n";
    if (!out) {
      std::fprintf(stderr, "loom-cli: cannot write %s\n", path.c_str());
      return std::nullopt;
    }
    written.push_back(path);
  }
  return written;
}

}  // namespace

int cmd_search(const Args& args) {
  auto plan = read_plan_argument(args, true);
  if (!plan) return kInvalidInput;
  std::optional<predict::Cluster> cluster;
  if (!read_cluster(args, cluster)) return kInvalidInput;
  predict::SearchSpace space;
  space.devices = device_budget(args, *plan, cluster);
  space.asynchronous = args.asynchronous;
  if (args.memory_per_device) {
    const auto bytes = parse_size(*args.memory_per_device);
    if (!bytes) {
      std::fprintf(stderr, "loom-cli: --memory-per-device needs a size such as 512MiB or 16GiB (got '%s')\n",
                   args.memory_per_device->c_str());
      return kInvalidInput;
    }
    space.memory_per_device = *bytes;
  }
  auto opened = open_calibrated(args);
  if (!opened) return kFailed;
  const predict::MachineShape machine{machine::cores_available(), cluster ? &*cluster : nullptr};
  auto ranked = predict::search_layouts(*plan, opened->calibration, machine, space);
  if (!ranked.ok()) return prediction_failed(ranked.error());
  std::vector<std::string> saved;
  if (args.save) {
    auto written = save_layouts(*plan, *ranked, *args.save, args.top);
    if (!written) return kFailed;
    saved = std::move(*written);
  }
  if (args.json) {
    nlohmann::json j = ranking_json(*plan, *ranked, space.devices);
    if (args.save) j["saved"] = saved;
    std::printf("%s\n", j.dump().c_str());
  } else {
    print_ranking(*plan, *ranked, space.devices, args.top);
    for (const std::string& path : saved) std::printf("  saved %s\n", path.c_str());
  }
  return kOk;
}

}  // namespace loom::cli
