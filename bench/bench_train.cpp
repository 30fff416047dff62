// Single-process training throughput of Loom's engine on a plan: samples/s, time per
// step and achieved GFLOP/s (forward + backward = 3x forward flops, the usual estimate).
// Prints one JSON line so bench/train_vs_torch.py (CPU) and bench/gpu_vs_torch.py (GPU)
// can put it beside PyTorch's figures.
//   bench_train PLAN [--steps N] [--warmup W] [--threads T] [--notrace] [--gpu N]
// --gpu N trains on the CUDA backend on GPU N (a CUDA build on a machine with a GPU).
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/device/open_device.h"
#include "loom/engine/rank_setup.h"
#include "loom/engine/data_parallel_trainer.h"
#include "loom/trace/recorder.h"

using namespace loom;

namespace {

struct Options {
  std::string plan_path;
  std::int64_t steps = 200;
  std::int64_t warmup = 20;
  int threads = 0;
  bool trace = true;
  int gpu = -1;  // -1: the CPU backend
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string("0"); };
    if (a == "--steps") o.steps = std::stoll(next());
    else if (a == "--warmup") o.warmup = std::stoll(next());
    else if (a == "--threads") o.threads = std::stoi(next());
    else if (a == "--notrace") o.trace = false;
    else if (a == "--gpu") o.gpu = std::stoi(next());
    else if (!a.empty() && a[0] != '-') o.plan_path = a;
    else return false;
  }
  return !o.plan_path.empty();
}

double time_steps(Plan plan, const ModelInfo& info, const data::TrainTest& data, std::int64_t steps, bool trace,
                  kernels::Backend& backend, std::int64_t* memory_bytes = nullptr) {
  plan.training.steps = steps;
  plan.training.eval_every = 0;
  trace::Recorder recorder;
  engine::Trainer trainer(plan, info, data, trace ? &recorder : nullptr, nullptr, backend);
  // Evaluation runs once at the end; subtract it by timing the training steps alone.
  double train_s = 0;
  engine::TrainerHooks hooks;
  hooks.on_step = [&train_s](const engine::StepProgress& p) { train_s = p.elapsed_s; };
  trainer.run(hooks);
  if (memory_bytes) *memory_bytes = backend.bytes_in_use();  // while the trainer still holds its buffers
  return train_s;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: bench_train PLAN [--steps N] [--warmup W] [--threads T] [--notrace] [--gpu N]\n");
    return 2;
  }
  PlanResult loaded = load_plan_file(o.plan_path);
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s: %s: %s\n", o.plan_path.c_str(), e.path.c_str(), e.reason.c_str());
    return 2;
  }
  Plan plan = *loaded.plan;
  if (o.threads > 0) plan.training.threads = o.threads;
  const int threads = engine::apply_thread_count(plan, 1);
  auto data = data::load_dataset(plan.data);
  if (!data.ok()) {
    std::fprintf(stderr, "bench_train: %s\n", data.error().describe().c_str());
    return 1;
  }
  std::vector<PlanError> errors;
  const ModelInfo info = infer_model(plan, &errors);
  DeviceSpec device;
  if (o.gpu >= 0) device = DeviceSpec{DeviceKind::Gpu, "localhost", o.gpu};
  auto backend = device::open_device(device, plan.training.tf32);
  if (!backend.ok()) {
    std::fprintf(stderr, "bench_train: %s\n", backend.error().describe().c_str());
    return 1;
  }
  time_steps(plan, info, *data, o.warmup, o.trace, **backend);
  // Each step ends with the loss read back from the device, so the clock covers the work.
  std::int64_t memory_bytes = 0;
  const double seconds = time_steps(plan, info, *data, o.steps, o.trace, **backend, &memory_bytes);
  const double samples = double(o.steps * plan.training.batch);
  const double gflops = 3.0 * double(info.forward_flops) * samples / seconds * 1e-9;
  nlohmann::json out = {{"engine", "loom"},        {"plan", plan.name},
                        {"threads", threads},       {"batch", plan.training.batch},
                        {"steps", o.steps},         {"samples_per_s", samples / seconds},
                        {"step_ms", seconds / double(o.steps) * 1e3}, {"gflops", gflops},
                        {"trace", o.trace},         {"device", device::device_label(device)},
                        {"device_memory_bytes", memory_bytes}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
