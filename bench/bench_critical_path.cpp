// The critical path of a stored run, timed in process: reading its events from SQLite and
// aligning them, then walking every steady step and attributing waits.
//   bench_critical_path RUNS.db RUN_ID [--repeats N]
// Prints one line per phase (median and min-max over the repeats) and one JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/analysis/critical_path.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_critical_path RUNS.db RUN_ID [--repeats N]\n");
    return 2;
  }
  const std::int64_t run_id = std::atoll(argv[2]);
  const int repeats = argc > 4 && std::string(argv[3]) == "--repeats" ? std::atoi(argv[4]) : 5;
  auto store = loom::store::RunStore::open(argv[1]);
  if (!store.ok()) return std::fprintf(stderr, "%s\n", store.error().describe().c_str()), 1;
  std::vector<double> read_s, walk_s;
  std::size_t events = 0;
  int steps = 0;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto run = store->load_run(run_id);
    auto ranks = store->load_ranks(run_id);
    if (!run.ok() || !ranks.ok()) return std::fprintf(stderr, "run %lld not readable\n", (long long)run_id), 1;
    std::vector<std::vector<loom::trace::Event>> by_rank;
    for (const auto& r : *ranks) {
      auto e = store->load_events(run_id, r.rank);
      if (!e.ok()) return 1;
      if (by_rank.size() <= std::size_t(r.rank)) by_rank.resize(std::size_t(r.rank) + 1);
      by_rank[std::size_t(r.rank)] = std::move(e).value();
    }
    read_s.push_back(seconds_since(start));
    events = 0;
    for (const auto& v : by_rank) events += v.size();
    start = std::chrono::steady_clock::now();
    const auto analysis = loom::analysis::analyze_run_paths(*run, *ranks, std::move(by_rank));
    walk_s.push_back(seconds_since(start));
    steps = analysis.path.steps;
  }
  std::printf("run %lld: %zu events, %d steady steps, %d repeats\n", (long long)run_id, events, steps, repeats);
  std::printf("  read events from SQLite      %.3f s median (%.3f-%.3f)\n", median(read_s),
              *std::min_element(read_s.begin(), read_s.end()), *std::max_element(read_s.begin(), read_s.end()));
  std::printf("  align, walk every step, waits %.3f s median (%.3f-%.3f)\n", median(walk_s),
              *std::min_element(walk_s.begin(), walk_s.end()), *std::max_element(walk_s.begin(), walk_s.end()));
  std::printf("%s\n", nlohmann::json{{"events", events}, {"steps", steps}, {"read_s", median(read_s)},
                                     {"walk_s", median(walk_s)}}.dump().c_str());
  return 0;
}
