// Comparison of stored runs: 2 to 6 runs side by side, the first one the baseline. A
// metrics table (step time, throughput, time split, pipeline bubble, all-reduce, staleness,
// accuracy, efficiency), each row with the better run marked, and a phase diff: for each
// rank role (pipeline stage, or worker, or parameter server; so runs with different world
// sizes still line up) and phase (forward and backward per layer, each all-reduce bucket,
// send/receive, push/pull, optimizer, wait...), the median time per step in every run.
// Pure functions over the RunStore, like analysis.h; `loom-cli compare` and the workbench
// print and draw what these return. docs/figures.md defines every figure once.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/analysis/analysis.h"
#include "loom/core/status.h"
#include "loom/store/run_store.h"

namespace loom::analysis {

inline constexpr int kMinCompared = 2;
inline constexpr int kMaxCompared = 6;

// Steps [from, to) that step times and the phase diff are taken over, on top of the steady
// rule (each rank's first kWarmupSteps steps are warm-up and never count). The per-rank
// time split and throughput are the runs' own steady figures, whatever the range.
struct StepRange {
  std::int64_t from = 0;
  std::int64_t to = std::numeric_limits<std::int64_t>::max();
  bool whole() const { return from == 0 && to == std::numeric_limits<std::int64_t>::max(); }
};

// "FROM:TO", "FROM:" or ":TO" (steps, FROM < TO); InvalidArgument naming the text otherwise.
Expected<StepRange> parse_step_range(const std::string& text);

struct CompareOptions {
  StepRange steps;
  // Time to reach this test accuracy (0..1); NaN: the row is left out.
  double target_accuracy = std::numeric_limits<double>::quiet_NaN();
};

enum class Better { Lower, Higher, Neither };

// One figure for every run. values[i] is run i's, NaN where it does not apply (no pipeline,
// no all-reduce, ...). best = index of the better run, -1 when no run is better (Neither,
// fewer than two known values, or the best value is shared).
struct CompareRow {
  std::string key;    // stable JSON name, "step_time_median_ms"
  std::string label;  // for people, "step time, median"
  std::string unit;   // "ms", "samples/s", "%", "" ...
  Better better = Better::Neither;
  std::vector<double> values;
  int best = -1;
};

// Median over (rank, step) of the time one rank of this role spent in this phase in one
// step, in ms; NaN where the run has no such phase. steps[i] = how many (rank, step) pairs
// run i had. Roles: "stage S" (pipeline workers), "worker" (one stage), "server".
struct PhaseRow {
  std::string role;
  std::string phase;  // "forward fc1", "backward fc1", "all-reduce bucket 0", "send", ...
  std::vector<double> median_ms;
  std::vector<std::int64_t> samples;
};

struct ComparedRun {
  std::int64_t id = 0;
  std::string name;
  trace::RunStatus status = trace::RunStatus::Completed;
  std::string mode;  // mode: "all-reduce, 4 replicas", "1f1b pipeline, 2 stages x 8 micro-batches"
  int world_size = 1;
  std::int64_t steps = 0;
  std::vector<DeviceGroup> devices;  // what its ranks ran on, grouped (device_identity.h)
};

struct Comparison {
  CompareOptions options;
  std::vector<ComparedRun> runs;
  std::vector<CompareRow> metrics;
  std::vector<PhaseRow> phases;
};

// How a run trains, in words: "all-reduce, 4 replicas", "1f1b pipeline, 2 stages x 8
// micro-batches", "parameter server, 3 workers, 1 server", "imported PyTorch trace, 2 ranks".
std::string run_mode(const trace::RunRecord& run);

// InvalidArgument for fewer than 2 or more than 6 runs or one run named twice; NotFound
// for an unknown run.
Expected<Comparison> compare_runs(store::RunStore& store, const std::vector<std::int64_t>& run_ids,
                                  const CompareOptions& options = {});

// Pure parts, for tests and live views:
// Median and nearest-rank p95 of the steady step times in `range`, in ms: per step, the
// longest Step span among the ranks that ran it. NaN without steps.
struct StepTimes {
  double median_ms = kNaN, p95_ms = kNaN;
  std::int64_t steps = 0;
};
StepTimes step_times(const std::vector<std::vector<trace::Event>>& step_spans_by_rank, const StepRange& range);

// The POP efficiencies over a run's worker ranks (those with steady steps), with
// useful = compute + optimizer + data of a rank and runtime = the longest training window:
//   load_balance = mean useful / max useful
//   communication_efficiency = max useful / runtime
//   parallel_efficiency = mean useful / runtime = load_balance x communication_efficiency
// NaN without worker ranks.
struct Efficiency {
  double load_balance = kNaN, communication_efficiency = kNaN, parallel_efficiency = kNaN;
};
Efficiency pop_efficiency(const std::vector<RankBreakdown>& ranks);
// {load_balance, communication_efficiency, parallel_efficiency} (fractions, null unknown).
nlohmann::json efficiency_to_json(const Efficiency& e);

// Seconds from the start of rank 0's first step to the first "test_accuracy" metric of rank
// 0 at or above target, and that metric's step; NaN / -1 when never reached.
struct TimeToAccuracy {
  double seconds = kNaN;
  std::int64_t step = -1;
};
TimeToAccuracy time_to_accuracy(const std::vector<trace::MetricRecord>& accuracy, std::int64_t first_step_start_ns,
                                double target);

// Keys: steps {from, to} (to null when open), target_accuracy (null when unset), runs
// [{id, name, status, mode, world_size, steps}], metrics [{key, label, unit, better
// ("lower"/"higher"/null), values, ratio (value / baseline's), delta (value - baseline's),
// best (index or null)}], phases [{role, phase, median_ms, delta_ms, samples}]; every
// unknown number null. docs/figures.md documents the shape.
nlohmann::json comparison_to_json(const Comparison& c);

// Where the step time went: run i's critical path per step minus run A's, split into the
// parts the path is made of (critical_path.h): compute (the path's work less the pipeline's
// fill and drain), exposed communication (all communication on the path is exposed),
// waiting for late ranks, pipeline bubble (the fill and drain, path_bubble_ms; shown
// when either run has one), descheduled, untraced. The parts sum to the difference. One
// entry per later run whose path and A's are known.
struct StepTimeDelta {
  int run = 0;
  double total_ms = kNaN;
  std::vector<std::pair<std::string, double>> parts;  // {"work", +1.2}, ...; unknown parts left out
};
std::vector<StepTimeDelta> step_time_split(const Comparison& c);



}  // namespace loom::analysis
