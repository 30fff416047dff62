// Run analysis: turns a stored run into the figures a user compares runs by: per-rank
// time split into compute, communication, optimizer, data and idle, plus throughput and
// the final loss/accuracy. Pure functions over the RunStore; no GUI.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/core/status.h"
#include "loom/profiles/event.h"
#include "loom/profiles/run_store.h"

namespace loom::analysis {

// Per-rank time breakdown, in seconds of this rank's clock. Definitions:
//   compute   = Forward, Backward, Loss, Evaluate on the compute stream
//   comm      = AllReduce, Send, Recv, Push, Pull, Broadcast, Barrier (any stream)
//   optimizer = Optimizer (any stream)
//   data      = DataLoad (any stream)
//   idle      = the rank's wall time (first event start to last event end, Step spans
//               included) minus the union of every compute/comm/optimizer/data interval.
//               Step spans are containers, not work; Wait, Idle and InjectedDelay spans
//               count as idle time (they are what idle looks like from the inside).
// Each category is the length of the union of its intervals, so nested spans (a Forward
// per layer inside a Forward per micro-batch) are not counted twice. Categories may
// overlap one another (communication hidden behind backward counts in both), which is why
// idle uses the union of all of them.
struct RankBreakdown {
  int rank = 0;
  double compute_s = 0, comm_s = 0, optimizer_s = 0, data_s = 0, idle_s = 0;
  std::int64_t events_recorded = 0, events_stored = 0;
};

struct RunSummary {
  store::RunRecord run;
  int world_size = 1;
  std::int64_t steps = 0;  // distinct steps with a "loss" metric, else max event step + 1
  double wall_s = 0, samples_per_s = 0;
  double final_loss = std::numeric_limits<double>::quiet_NaN();     // last "loss" metric
  double test_accuracy = std::numeric_limits<double>::quiet_NaN();  // last "test_accuracy"
  std::vector<RankBreakdown> ranks;  // ordered by rank
};

// Breakdown of one rank's events (any order); exposed for tests and live views.
RankBreakdown breakdown_rank(int rank, const std::vector<trace::Event>& events);

// Total length of the union of [start, end) intervals, in nanoseconds. Sorts its input.
std::int64_t union_length_ns(std::vector<std::pair<std::int64_t, std::int64_t>>& intervals);

Expected<RunSummary> summarize_run(store::RunStore& store, std::int64_t run_id);

// Keys: id, name, status, started_unix_ms, ended_unix_ms, error, plan (parsed plan JSON,
// null if absent or unparsable), world_size, steps, wall_s, samples, samples_per_s,
// final_loss, test_accuracy (null when unknown), ranks: [{rank, compute_s, comm_s,
// optimizer_s, data_s, idle_s, events_recorded, events_stored}].
nlohmann::json summary_to_json(const RunSummary& s);

// Human-readable text for `loom-cli show`.
std::string format_summary(const RunSummary& s);

}  // namespace loom::analysis
