// What the figure families share inside the analysis target, never outside it: interval
// helpers beyond the public union and overlap, pieces of the training window, and the
// per-rank reductions summarize_run keeps while it loads one rank at a time (a rank's
// events are dropped once these are taken, which bounds memory to the largest rank).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "loom/analysis/intervals.h"
#include "loom/analysis/summary.h"
#include "loom/analysis/throughput.h"
#include "loom/analysis/training_window.h"

namespace loom::analysis {

inline constexpr double kNsPerS = 1e9;

using Intervals = std::vector<std::pair<std::int64_t, std::int64_t>>;

// Orders by start, which is all merging needs. Intervals built from a rank's events in
// stored order are sorted already, so the check usually saves the sort.
inline void sort_by_start(Intervals& intervals) {
  constexpr auto by_start = [](const auto& a, const auto& b) { return a.first < b.first; };
  if (!std::is_sorted(intervals.begin(), intervals.end(), by_start))
    std::sort(intervals.begin(), intervals.end(), by_start);
}

// Sorted, disjoint, non-empty intervals covering the same points as the input.
Intervals merged(Intervals& intervals);

// `intervals` less every point of `removed` (sorted, disjoint).
Intervals without(const Intervals& intervals, const Intervals& removed);

// The first step index that counts as steady (training_window.cpp).
std::int32_t first_steady_step(const std::vector<trace::Event>& events);

// Appends [e.start, e.end) cut to the window, if anything is left of it.
inline void add_clipped(Intervals& out, const trace::Event& e, const TrainingWindow& w) {
  const std::int64_t s = std::max(e.start_ns, w.start_ns), t = std::min(e.end_ns, w.end_ns);
  if (t > s) out.emplace_back(s, t);
}

// The evaluations inside the window, merged (training_window.cpp).
Intervals evaluation_in(const std::vector<trace::Event>& events, const TrainingWindow& w);

// Per-rank all-reduce totals; algbw is averaged over ranks, so it is kept per rank.
struct AllReduceTotals {
  std::int64_t bytes = 0, count = 0, ns = 0;
};


AllReduceTotals allreduce_totals(const std::vector<trace::Event>& events);
AllReduceStats allreduce_stats(const std::vector<AllReduceTotals>& per_rank, const std::vector<RankBreakdown>& ranks,
                               int world_size, double p2p_gbs);

// Steady throughput from per-rank training windows; offsets by rank (throughput.cpp).
Throughput throughput_from_windows(const Plan& plan, const std::map<int, TrainingWindow>& windows,
                                   const std::vector<std::int64_t>& offsets_ns);

// One worker rank's steady step windows and the work inside them (StageStats in
// stage_stats.h), with the forward / backward / optimizer split the replay needs.
struct StepWork {
  std::int64_t window_ns = 0, busy_ns = 0;
  std::int64_t forward_ns = 0, backward_ns = 0, optimizer_ns = 0;
  std::int64_t steps = 0;
};
StepWork step_work(const std::vector<trace::Event>& events);
// `work` holds the ranks that have events; stored runs and live views fill it differently.
PipelineStats pipeline_from_work(const Plan& plan, const std::map<int, StepWork>& work,
                                 const std::vector<trace::MetricRecord>& metrics);

// Time blocked in Wait spans (staleness.cpp).
std::int64_t wait_ns(const std::vector<trace::Event>& events);
// staleness_stats with the per-rank Wait totals already reduced.
StalenessStats staleness_from(const std::vector<trace::UpdateRecord>& updates, const std::map<int, std::int64_t>& waits,
                              const Plan& plan);

// The newest completed single-rank run with the same plan apart from parallelism (scaling.cpp).
Expected<std::optional<Scaling>> find_scaling(store::RunStore& store, const RunSummary& s);

// A serving run's figures from its metrics; nullopt for a plan without "serve" (summary.cpp).
Expected<std::optional<ServingStats>> serving_of_run(store::RunStore& store, const trace::RunRecord& run);

}  // namespace loom::analysis
