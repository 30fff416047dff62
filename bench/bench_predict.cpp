// Predictor speed against issue 32's targets: one step of a 1,024-device plan predicted in
// under 1 s, a search over 200 layouts in under 5 s. A roofline cluster (no store to read):
// the time is the predictor's own. Usage: bench_predict [PLANS_DIR CLUSTERS_DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "loom/predict/layouts.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench_plan(const std::string& path, const loom::predict::Cluster& cluster) {
  loom::PlanResult plan = loom::load_plan_file(path);
  if (!plan.ok()) return std::fprintf(stderr, "cannot read %s\n", path.c_str()), 1;
  const loom::predict::MachineShape machine{2, &cluster};
  const loom::predict::Calibration none;
  loom::Plan big = *plan.plan;
  big.training.batch = 64 * 1024;
  auto laid = loom::predict::with_layout(big, {1024, 1, 1, loom::Schedule::OneFOneB, 25});
  if (!laid.ok()) return std::fprintf(stderr, "%s\n", laid.error().describe().c_str()), 1;
  std::vector<double> one, search;
  std::size_t layouts = 0, spans = 0;
  for (int round = 0; round < 5; ++round) {
    auto start = Clock::now();
    auto p = loom::predict::predict_step(*laid, none, machine);
    one.push_back(seconds_since(start));
    if (!p.ok()) return std::fprintf(stderr, "%s\n", p.error().describe().c_str()), 1;
    spans = p->spans.size();
    loom::predict::SearchSpace space;
    space.devices = cluster.devices();
    start = Clock::now();
    auto ranked = loom::predict::search_layouts(big, none, machine, space);
    search.push_back(seconds_since(start));
    if (!ranked.ok()) return std::fprintf(stderr, "%s\n", ranked.error().describe().c_str()), 1;
    layouts = ranked->size();
  }
  std::printf("%-22s 1,024-device step: median %.3f s (min %.3f, max %.3f; %zu spans) = %.1f%% of the 1 s target\n",
              plan.plan->name.c_str(), median(one), *std::min_element(one.begin(), one.end()), *std::max_element(one.begin(), one.end()),
              spans, 100 * median(one));
  std::printf("%-22s search of %zu layouts: median %.3f s (min %.3f, max %.3f) = %.3f s per 200 layouts, %.1f%% of the 5 s target\n",
              "", layouts, median(search), *std::min_element(search.begin(), search.end()),
              *std::max_element(search.begin(), search.end()), median(search) * 200 / double(layouts),
              100 * median(search) * 200 / double(layouts) / 5);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string plans = argc > 2 ? argv[1] : LOOM_PLANS_DIR, clusters = argc > 2 ? argv[2] : LOOM_CLUSTERS_DIR;
  auto cluster = loom::predict::load_cluster(clusters + "/h100_128_nodes.json");
  if (!cluster.ok()) return std::fprintf(stderr, "%s\n", cluster.error().describe().c_str()), 1;
  std::printf("cluster: %s (%d devices)\n", cluster->name.c_str(), cluster->devices());
  for (const char* name : {"mlp_fashion.json", "cnn_fashion.json"})
    if (bench_plan(plans + "/" + name, *cluster) != 0) return 1;
  return 0;
}
