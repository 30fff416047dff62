// How far float32 training lands from float64, and how much that varies between float32
// orderings: the measurement behind the training-equivalence bounds
// (tests/engine/float64_reference.h, docs/tests.md "Float64 reference").
//
// For each example plan (and variant) its single process trains 20 steps on the cpu-f64
// backend (the reference), on the float32 CPU backend as it is, and on the float32 CPU
// backend from initial parameters each moved one ulp up or down (seeded, per element):
// each seed is another float32 rounding trajectory of the same computation, as a GPU's
// summation order is. Printed per plan: the CPU's worst-tensor error against float64,
// the range over the orderings, the largest ratio between orderings (worst tensor, and
// tensor by tensor), and the worst loss error.
//
// OpenBLAS's own thread count unless --blas-threads says otherwise: the thread count
// changes its float32 summation order, so it is one more way to draw an ordering.
//
//   bench_float64_spread [--seeds N] [--blas-threads N] [file.json:variant ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "float64_reference.h"
#include "loom/kernels/cpu.h"
#include "loom/kernels/cpu_backend.h"

using namespace loom;

namespace {

// Every initial parameter moved one float ulp, up or down by a coin seeded with `seed`.
void move_one_ulp(engine::TrainingLoop& loop, int seed) {
  std::mt19937_64 rng{std::uint64_t(seed)};
  for (engine::Param* p : loop.params()) {
    std::vector<float> v = p->value.to_host();
    for (float& x : v) x = (rng() & 1) ? std::nextafter(x, 1e30f) : std::nextafter(x, -1e30f);
    p->value.assign(v);
  }
}

void measure(const std::string& file, const std::string& variant, int seeds) {
  PlanResult parsed = load_plan_file(std::string(LOOM_PLANS_DIR) + "/" + file);
  if (!parsed.plan) {
    std::printf("%s: does not load\n", file.c_str());
    return;
  }
  Plan plan = *parsed.plan;
  plan.training.steps = 20;
  plan.training.threads = 1;
  testing::apply_variant(plan, variant);
  const auto start = std::chrono::steady_clock::now();
  const auto f64 = cpu::make_cpu_f64_backend();
  const testing::TrainedRun ref = testing::train_single_process(plan, *f64);
  const testing::TrainedRun cpu = testing::train_single_process(plan, *cpu::make_cpu_backend());
  if (!ref.error.empty() || !cpu.error.empty()) {
    std::printf("%s %s: %s%s\n", file.c_str(), variant.c_str(), ref.error.c_str(), cpu.error.c_str());
    return;
  }
  const testing::Deviation base = testing::deviation(ref, cpu.params, cpu.losses);
  double low = base.worst_param(), high = low, worst_loss = base.worst_loss(), tensor_ratio = 1;
  for (int seed = 1; seed <= seeds; ++seed) {
    const testing::TrainedRun run = testing::train_single_process(
        plan, *cpu::make_cpu_backend(), [&](engine::TrainingLoop& loop) { move_one_ulp(loop, seed); });
    const testing::Deviation d = testing::deviation(ref, run.params, run.losses);
    low = std::min(low, d.worst_param());
    high = std::max(high, d.worst_param());
    worst_loss = std::max(worst_loss, d.worst_loss());
    for (std::size_t i = 0; i < d.params.size(); ++i)
      tensor_ratio = std::max(tensor_ratio, std::max(d.params[i], testing::kFloor / 10) /
                                                std::max(base.params[i], testing::kFloor / 10));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%-26s %-14s cpu %s | %d orderings: %.3g..%.3g (x%.1f), per tensor up to x%.1f, loss up to %.3g"
              " [%.0f s]\n",
              file.c_str(), variant.empty() ? "(as is)" : variant.c_str(), testing::describe(ref, base).c_str(),
              seeds + 1, low, high, high / low, tensor_ratio, worst_loss, seconds);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int seeds = 8, blas_threads = 0;
  std::vector<std::pair<std::string, std::string>> rows;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seeds" && i + 1 < argc) {
      seeds = std::max(1, std::atoi(argv[++i]));
      continue;
    }
    if (arg == "--blas-threads" && i + 1 < argc) {
      blas_threads = std::atoi(argv[++i]);
      continue;
    }
    const auto colon = arg.find(':');
    rows.emplace_back(arg.substr(0, colon), colon == std::string::npos ? "" : arg.substr(colon + 1));
  }
  if (rows.empty())
    rows = {{"mlp_fashion.json", ""},          {"mlp_fashion.json", "tanh-momentum"},
            {"cnn_fashion.json", "momentum"},  {"cnn_fashion.json", "tanh-momentum"},
            {"cnn_fashion.json", ""},          {"branches_example.json", ""},
            {"gpipe_mlp.json", ""},            {"gpipe_mlp.json", "tanh"},
            {"dp4_mlp_fashion.json", ""},      {"dp4_mlp_fashion.json", "tanh"},
            {"branches_two_devices.json", ""}, {"branches_two_devices.json", "tanh"}};
  cpu::set_blas_threads(blas_threads);
  std::printf("OpenBLAS threads: %d, %d orderings per plan (the CPU as it is, and %d seeds)\n", cpu::blas_threads(),
              seeds + 1, seeds);
  for (const auto& [file, variant] : rows) measure(file, variant, seeds);
  return 0;
}
