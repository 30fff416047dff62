// Run analysis: turns a stored run into the figures a user compares runs by: per-rank
// time split into compute, communication, optimizer, data and idle, how much of the
// communication was exposed, all-reduce bandwidth, clock offsets, scaling efficiency
// against a single-rank run of the same plan, pipeline bubbles per stage against their
// theory, gradient staleness in the asynchronous modes, plus throughput and the final
// loss/accuracy. Pure functions over the RunStore; no GUI.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/core/plan.h"
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
//               Communication overlapping an Idle span (a pipeline stage blocked in a
//               receive: the bubble) is idle, and left out of comm and exposed_comm.
//   exposed_comm = the union of comm intervals minus its overlap with the union of
//               compute, optimizer and data intervals: communication during which the
//               rank does no work (what overlapping communication tries to remove).
// Each category is the length of the union of its intervals, so nested spans (a Forward
// per layer inside a Forward per micro-batch) are not counted twice. Categories may
// overlap one another (communication hidden behind backward counts in both), which is why
// idle uses the union of all of them.
struct RankBreakdown {
  int rank = 0;
  double compute_s = 0, comm_s = 0, optimizer_s = 0, data_s = 0, idle_s = 0;
  std::int64_t events_recorded = 0, events_stored = 0;
  double exposed_comm_s = 0;
};

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Gradient all-reduce figures, with the nccl-tests definitions (GB = 1e9 bytes):
//   bytes, count, seconds: over every rank's AllReduce events (seconds = per rank, the
//               time any all-reduce was in flight, issue to completion; summed over ranks)
//   algbw     = per rank, sum of AllReduce bytes / time any all-reduce was in flight; then
//               the mean over ranks that ran any all-reduce
//   busbw     = algbw * 2(n-1)/n with n = world size (NaN for n == 1: nothing moves)
//   p2p_gbs   = the last "p2p_gbs" metric of the run (the launcher's ping-pong probe)
//   hidden_fraction = 1 - sum(exposed_comm_s) / sum(comm_s) over ranks (NaN without comm)
// A bucket's time includes waiting for the rank to drive MPI's progress (between layers),
// so algbw is what training achieved, below what the link could do alone.
struct AllReduceStats {
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  double seconds = 0;
  double algbw_gbs = kNaN, busbw_gbs = kNaN, p2p_gbs = kNaN, hidden_fraction = kNaN;
};

// One rank's clock against rank 0's (see run_store.h RankRecord, clock_align.h).
// offset_end_ns equals offset_ns when the rank has no end estimate.
struct ClockRow {
  int rank = 0;
  std::int64_t offset_ns = 0, offset_end_ns = 0, uncertainty_ns = 0;
  double drift_ppm = 0;
};

// Throughput against the newest completed single-rank run of the same plan (the plan
// JSON with "parallel" and "name" removed compares equal):
//   efficiency = samples_per_s / (world_size * reference_samples_per_s).
struct Scaling {
  std::int64_t reference_run_id = 0;
  double reference_samples_per_s = 0;
  double efficiency = 0;
};

// Pipeline bubbles per stage. Per worker rank:
//   window = the union of its Step spans (time inside optimizer steps)
//   busy   = the union of Forward, Backward, Loss, Optimizer and DataLoad spans on the
//            compute stream, intersected with the window
//   bubble = window - busy (the compute thread waited: Idle spans, receives, all-reduce)
// A stage's busy_s and bubble_s are the means over its ranks that have events. The
// fraction follows the convention each schedule's textbook figure uses, so the measured
// number and the theory compare like for like (p stages, m micro-batches):
//   gpipe: bubble_fraction = bubble / window, bubble_theory = (p-1) / (m+p-1)  "of wall time"
//   1f1b:  bubble_fraction = bubble / busy,   bubble_theory = (p-1) / m        "of ideal compute"
// A rank without Step spans has busy = bubble = 0; a stage without time has fraction NaN.
// max_in_flight (micro-batches whose forward started and backward has not finished) and
// peak_activation_bytes are the maxima over the stage's ranks of the metrics of those
// names that each worker records at the end of training; 0 when absent.
struct StageStats {
  int stage = 0;
  std::vector<int> ranks;            // world ranks of this stage's replicas
  double busy_s = 0, bubble_s = 0;   // per rank, mean over the stage's ranks
  double bubble_fraction = kNaN, bubble_theory = kNaN;
  std::int64_t max_in_flight = 0, peak_activation_bytes = 0;
};

struct PipelineStats {
  std::string schedule;           // "gpipe" / "1f1b"
  int stages = 1, microbatches = 1;
  std::string bubble_convention;  // "of wall time" (gpipe) / "of ideal compute" (1f1b)
  std::vector<StageStats> stages_stats;  // one per stage, ordered; JSON key "stages"
};

// Pure, for stored runs and live views alike. events_by_rank[r] = rank r's events (any
// order, own clock); ranks beyond the vector have no events. Metrics of other names are
// ignored.
PipelineStats pipeline_stats(const Plan& plan, const std::vector<std::vector<trace::Event>>& events_by_rank,
                             const std::vector<store::MetricRecord>& metrics);

// Gradient staleness in the asynchronous modes, from the updates the parameter servers
// applied (run_store.h UpdateRecord: staleness = version_applied - version_read, versions
// counting updates in parameter_server mode and completed clocks in ssp mode).
// Percentiles are nearest-rank: the p-th percentile of n values is the smallest value
// with at least p% of the values <= it, i.e. the ceil(p*n/100)-th smallest; it is always
// one of the observed values. Per worker (a rank whose plan role is Worker, plus any rank
// named by an update), the same over that worker's updates; a worker without updates has
// zeros. wait_s = the union of that rank's Wait spans (blocked on a pull or on the
// staleness bound), in seconds of its own clock.
struct WorkerStaleness {
  int rank = 0;
  std::int64_t updates = 0;
  double mean = 0, p50 = 0, p95 = 0;
  std::int64_t max = 0;
  double wait_s = 0;
};

struct StalenessStats {
  bool present = false;  // the run recorded any update
  std::string mode;      // sync_mode_name(plan.parallel.sync.mode)
  int bound = -1;        // plan.parallel.sync.bound in ssp mode, else -1
  double mean = 0, p50 = 0, p95 = 0;
  std::int64_t max = 0;
  std::vector<WorkerStaleness> workers;  // ordered by rank
};

// Pure, like pipeline_stats: events_by_rank[r] = rank r's events (only Wait spans are read).
StalenessStats staleness_stats(const std::vector<store::UpdateRecord>& updates,
                               const std::vector<std::vector<trace::Event>>& events_by_rank, const Plan& plan);

// Parameter divergence across local-SGD replicas: the "param_divergence" metrics.
struct DivergenceStats {
  std::int64_t count = 0;
  double mean = kNaN, last = kNaN;  // last = the latest by step, then time
};

struct RunSummary {
  store::RunRecord run;
  int world_size = 1;
  std::int64_t steps = 0;  // distinct steps with a "loss" metric, else max event step + 1
  double wall_s = 0, samples_per_s = 0;
  double final_loss = std::numeric_limits<double>::quiet_NaN();     // last "loss" metric
  double test_accuracy = std::numeric_limits<double>::quiet_NaN();  // last "test_accuracy"
  std::vector<RankBreakdown> ranks;  // ordered by rank
  AllReduceStats allreduce;
  std::vector<ClockRow> clock;       // one per row of the ranks table, ordered by rank
  std::optional<Scaling> scaling;    // only for world_size > 1 with a reference run
  std::optional<PipelineStats> pipeline;  // whenever the run's plan parses (1 stage without pipelining)
  StalenessStats staleness;               // present only when the run recorded updates (and its plan parses)
  std::optional<DivergenceStats> divergence;  // only with "param_divergence" metrics
};

// Breakdown of one rank's events (any order); exposed for tests and live views.
RankBreakdown breakdown_rank(int rank, const std::vector<trace::Event>& events);

// Total length of the union of [start, end) intervals, in nanoseconds. Sorts its input.
std::int64_t union_length_ns(std::vector<std::pair<std::int64_t, std::int64_t>>& intervals);

// Length of (union of a) intersected with (union of b), in nanoseconds. Sorts its inputs.
std::int64_t overlap_length_ns(std::vector<std::pair<std::int64_t, std::int64_t>>& a,
                               std::vector<std::pair<std::int64_t, std::int64_t>>& b);

// True when two plan JSON texts describe the same training apart from "parallel" and
// "name" (the single-rank reference for scaling efficiency). False if either is unparsable.
bool same_plan_but_parallelism(const std::string& plan_json_a, const std::string& plan_json_b);

Expected<RunSummary> summarize_run(store::RunStore& store, std::int64_t run_id);

// Keys: id, name, status, started_unix_ms, ended_unix_ms, error, plan (parsed plan JSON,
// null if absent or unparsable), world_size, steps, wall_s, samples, samples_per_s,
// final_loss, test_accuracy (null when unknown), ranks: [{rank, compute_s, comm_s,
// optimizer_s, data_s, idle_s, events_recorded, events_stored, exposed_comm_s}],
// allreduce: {bytes, count, seconds, algbw_gbs, busbw_gbs, p2p_gbs, hidden_fraction}
// (unknown figures null), clock: [{rank, offset_ns, offset_end_ns, uncertainty_ns,
// drift_ppm}], scaling: {reference_run_id, reference_samples_per_s, efficiency} or null,
// schedule, microbatches, bubble_convention (null without a parsable plan), stages:
// [{stage, ranks, busy_s, bubble_s, bubble_fraction, bubble_theory, max_in_flight,
// peak_activation_bytes}] (empty without a parsable plan).
// Only when staleness.present: staleness: {mode, bound (ssp only), overall: {mean, p50,
// p95, max}, workers: [{rank, updates, mean, p50, p95, max, wait_s}]}.
// Only with param_divergence metrics: divergence: {count, mean, last}.
nlohmann::json summary_to_json(const RunSummary& s);

// Human-readable text for `loom-cli show`.
std::string format_summary(const RunSummary& s);

}  // namespace loom::analysis
