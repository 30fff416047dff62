// Run analysis: turns a stored run into the figures a user compares runs by: per-rank
// time split into compute, communication, optimizer, data and idle, how much of the
// communication was exposed, all-reduce bandwidth, clock offsets, scaling efficiency
// against a single-rank run of the same plan, pipeline bubbles per stage against their
// theory, gradient staleness in the asynchronous modes, plus throughput and the final
// loss/accuracy. Pure functions over the RunStore; no GUI.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/analysis/device_identity.h"
#include "loom/analysis/serving.h"
#include "loom/store/run_store.h"
#include "loom/trace/event.h"

namespace loom::analysis {

// Every training figure is measured over steady training only (docs/figures.md is the
// one place these definitions are written out for users):
//   setup     = a rank's Setup spans: loading data, clock alignment, the bandwidth probe,
//               building the model (and the clock alignment after training)
//   warm-up   = the first kWarmupSteps steps of each rank (first touches of every buffer,
//               allocation, lazy initialisation)
//   training window = from the start of a rank's first steady step (the first step after
//               warm-up) to the end of its last step; a rank without Step spans (a
//               parameter server) uses its first to last event other than Setup. The
//               evaluations inside it (Evaluate spans on any stream: rank 0 evaluating,
//               the other ranks waiting for it) are not training and are left out of it.
inline constexpr int kWarmupSteps = 1;

struct TrainingWindow {
  std::int64_t start_ns = 0, end_ns = 0;  // empty (start == end) when nothing was recorded
  std::int64_t steady_steps = 0;          // Step spans inside the window
  std::int64_t warmup_ns = 0;             // union of the warm-up Step spans
  std::int64_t setup_ns = 0;              // union of the Setup spans (anywhere in the run)
  bool from_steps = false;                // false: no Step spans, the fallback above
  std::int64_t evaluation_ns = 0;         // union of the Evaluate spans inside [start, end)
  // The window's training time: its span less its evaluations.
  double seconds() const { return static_cast<double>(end_ns - start_ns - evaluation_ns) / 1e9; }
};

// The window of one rank's events (any order). While fewer than kWarmupSteps + 1 steps
// exist (a live view early in a run), the window covers the steps there are and
// steady_steps counts them.
TrainingWindow training_window(const std::vector<trace::Event>& events);

// A rank's steady step numbers in [from, to): the steps it ran (its Step spans, or for a
// rank without them, such as a parameter server, the steps its events name) less its
// first kWarmupSteps.
std::set<std::int32_t> steady_step_numbers(const std::vector<trace::Event>& events, std::int64_t from = 0,
                                           std::int64_t to = std::numeric_limits<std::int64_t>::max());

// Per-rank time breakdown over the rank's training window, in seconds of its clock:
//   compute   = Forward, Backward, Loss on the compute stream (evaluation is out of the
//               window, and out of every category)
//   comm      = AllReduce, Send, Recv, Push, Pull, Broadcast, Barrier (any stream)
//   optimizer = Optimizer (any stream)
//   data      = DataLoad (any stream)
//   idle      = window minus the union of every compute/comm/optimizer/data interval.
//               Step spans are containers, not work; Wait, Idle and InjectedDelay spans
//               count as idle time (they are what idle looks like from the inside).
//               Communication overlapping an Idle span (a pipeline stage blocked in a
//               receive: the bubble) is idle, and left out of comm and exposed_comm.
//   exposed_comm = the union of comm intervals minus its overlap with the union of
//               compute, optimizer and data intervals: communication during which the
//               rank does no work (what overlapping communication tries to remove).
//   descheduled = time the rank's threads were runnable but waiting for a core (ranks
//               outnumbering cores), measured by the kernel inside communication and
//               waiting spans (Event::descheduled_us), taken out of comm (exposed first)
//               and idle and reported on its own: communication excludes it.
// Every interval is clipped to the window first, so setup, warm-up and what follows the
// last step (final evaluation, clock alignment) count nowhere; setup_s and warmup_s report
// them apart. Each category is the length of the union of its intervals, so nested spans
// (a Forward per layer inside a Forward per micro-batch) are not counted twice. Categories
// may overlap one another (communication hidden behind backward counts in both), which is
// why idle uses the union of all of them.
struct RankBreakdown {
  int rank = 0;
  std::string device;  // what the rank computed on: "cpu", "gpu 0" (its RankRecord)
  double compute_s = 0, comm_s = 0, optimizer_s = 0, data_s = 0, idle_s = 0;
  // recorded: what the rank said it recorded (-1: it ended without saying: it died).
  std::int64_t events_recorded = 0, events_stored = 0;
  double exposed_comm_s = 0;
  double window_s = 0, setup_s = 0, warmup_s = 0, descheduled_s = 0;
  std::int64_t steady_steps = 0;
  // Point-to-point messages (Send spans) the rank started in its steady window, per
  // steady step: the synchronisation points of model parallelism, made countable.
  double sends_per_step = 0;
  trace::DeviceInfo device_info;  // what `device` is (device_info.h); may be not recorded
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

// Pipeline bubbles per stage, over steady steps only. Per worker rank:
//   window = the union of its steady Step spans (time inside optimizer steps)
//   busy   = the union of Forward, Backward, Loss, Optimizer and DataLoad spans on the
//            compute stream, intersected with the window
//   bubble = window - busy (the compute thread waited: Idle spans, receives, all-reduce)
// A stage's busy_s and bubble_s are the means over its ranks that have events. One
// convention for every schedule: bubble_fraction = bubble / window, never above 100%.
// Its references, in the same convention (pipeline_replay.h replays one step with free
// communication):
//   bubble_textbook = (p-1) / (m+p-1): uniform stages, only forwards and backwards
//   bubble_schedule = replay with every stage at the mean op times of all stages: the
//                     schedule's own bubble for this model's op sizes
//   bubble_theory   = replay with each stage's own mean op times: what the schedule and
//                     the stages' imbalance imply; bubble_theory - bubble_schedule is the
//                     cost of imbalance, bubble_fraction - bubble_theory communication and
//                     jitter. NaN where no replay applies (branches on other stages, a
//                     stage without steady steps).
// A rank without Step spans has busy = bubble = 0; a stage without time has fraction NaN.
// max_in_flight (micro-batches whose forward started and backward has not finished) and
// peak_activation_bytes are the maxima over the stage's ranks of the metrics of those
// names that each worker records at the end of training; 0 when absent.
struct StageStats {
  int stage = 0;
  std::vector<int> ranks;            // world ranks of this stage's replicas
  double busy_s = 0, bubble_s = 0;   // per rank, mean over the stage's ranks
  double bubble_fraction = kNaN, bubble_theory = kNaN, bubble_schedule = kNaN, bubble_textbook = kNaN;
  double forward_ms = kNaN, backward_ms = kNaN;  // mean op per micro-batch, steady steps
  std::int64_t max_in_flight = 0, peak_activation_bytes = 0;
};

struct PipelineStats {
  std::string schedule;           // "gpipe" / "1f1b"
  int stages = 1, microbatches = 1;
  std::string bubble_convention;  // always "of stage step time"
  // Busiest stage's busy time over the idlest's, minus one (0 = balanced); NaN for one stage.
  double imbalance = kNaN;
  // Set when imbalance > kImbalanceWarning: plain words on what dominates the bubble.
  std::string warning;
  std::vector<StageStats> stages_stats;  // one per stage, ordered; JSON key "stages"
};

// Stages whose busy times differ by more than this are called unbalanced.
inline constexpr double kImbalanceWarning = 0.25;

// Pure, for stored runs and live views alike. events_by_rank[r] = rank r's events (any
// order, own clock); ranks beyond the vector have no events. Metrics of other names are
// ignored.
PipelineStats pipeline_stats(const Plan& plan, const std::vector<std::vector<trace::Event>>& events_by_rank,
                             const std::vector<trace::MetricRecord>& metrics);

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
StalenessStats staleness_stats(const std::vector<trace::UpdateRecord>& updates,
                               const std::vector<std::vector<trace::Event>>& events_by_rank, const Plan& plan);

// Parameter divergence across local-SGD replicas: the "param_divergence" metrics.
struct DivergenceStats {
  std::int64_t count = 0;
  double mean = kNaN, last = kNaN;  // last = the latest by step, then time
};

// Run throughput (docs/figures.md):
//   train_s       = from the earliest start of a steady step on any first-stage worker to
//                   the latest end of a step on any worker, on rank 0's clock
//   train_samples = steady Step spans of the first-stage workers x (global batch /
//                   data_parallel): each such step consumed that many samples
//   samples_per_s = train_samples / train_s ("steady steps"), or the job's samples / wall_s
//                   ("whole run") when no Step spans were recorded (tracing off)
//   wall_s        = the whole job, launch and setup included; wall_samples_per_s the same
//                   samples over it
struct Throughput {
  double train_s = 0;
  std::int64_t train_samples = 0, steady_steps = 0;
  bool from_steps = false;
};

// Setup measurements that look wrong are reported, not silently used.
//   p2p probe: unusual when below kProbeUnusualFraction of the median probe of at least
//   kProbeHistory earlier runs on the same host with the same world size.
inline constexpr double kProbeUnusualFraction = 0.25;
inline constexpr int kProbeHistory = 3;

// A rank's backend memory at the end of its run, by part, from its device_memory_*
// metrics (docs/figures.md, "Device memory"); parts a run did not report are -1.
struct RankMemory {
  int rank = 0;
  std::int64_t total = 0, parameters = -1, gradients = -1, optimizer = -1, workspace = -1, activations = -1;
};

struct RunSummary {
  trace::RunRecord run;
  int world_size = 1;
  std::int64_t steps = 0;  // distinct steps with a "loss" metric, else max event step + 1
  // A resumed run (run.resumed_from != 0): the steps its checkpoint had completed, read
  // as the first step it reported a loss for; -1 when it reported none.
  std::int64_t resumed_at_step = -1;
  double wall_s = 0, samples_per_s = 0;
  double wall_samples_per_s = 0, train_s = 0, setup_s = 0;  // setup_s: slowest rank's
  std::int64_t train_samples = 0, steady_steps = 0;
  std::string throughput_basis;  // "steady steps" / "whole run" / "imported trace" (samples unknown)
  std::vector<std::string> warnings;  // unusual setup figures, unbalanced stages, ...
  double final_loss = std::numeric_limits<double>::quiet_NaN();     // last "loss" metric
  double test_accuracy = std::numeric_limits<double>::quiet_NaN();  // last "test_accuracy"
  double param_norm = std::numeric_limits<double>::quiet_NaN();     // last "param_norm": |parameters| at the end
  std::vector<RankBreakdown> ranks;  // ordered by rank
  AllReduceStats allreduce;
  std::vector<ClockRow> clock;       // one per row of the ranks table, ordered by rank
  std::optional<Scaling> scaling;    // only for world_size > 1 with a reference run
  std::optional<PipelineStats> pipeline;  // whenever the run's plan parses (1 stage without pipelining)
  StalenessStats staleness;               // present only when the run recorded updates (and its plan parses)
  std::optional<DivergenceStats> divergence;  // only with "param_divergence" metrics
  std::optional<ServingStats> serving;        // only for a plan with a "serve" section
  std::vector<RankMemory> memory;             // ranks that reported device_memory_bytes
  std::vector<DeviceGroup> devices;  // the ranks' device identities, grouped (device_identity.h)
};

// Copies each rank's device identity into its breakdown and groups them into s.devices
// (summarize_run does; device_identity.cpp).
void attach_devices(RunSummary& s, const std::vector<trace::RankRecord>& records);

// Breakdown of one rank's events (any order); exposed for tests and live views.
RankBreakdown breakdown_rank(int rank, const std::vector<trace::Event>& events);

// Steady throughput of a run from its ranks' events (see Throughput); offsets_ns[r] is rank
// r's clock minus rank 0's (0 where unknown). events_by_rank may hold only Step spans.
Throughput steady_throughput(const Plan& plan, const std::vector<std::vector<trace::Event>>& events_by_rank,
                             const std::vector<std::int64_t>& offsets_ns);

// Computes the steady throughput of a finished run and stores it with the run (train_s,
// train_samples), so run lists show the same figure as `show` without reading events.
Status store_training_figures(store::RunStore& store, std::int64_t run_id);

// Total length of the union of [start, end) intervals, in nanoseconds. Sorts its input by start.
std::int64_t union_length_ns(std::vector<std::pair<std::int64_t, std::int64_t>>& intervals);

// Length of (union of a) intersected with (union of b), in nanoseconds. Sorts its inputs by start.
std::int64_t overlap_length_ns(std::vector<std::pair<std::int64_t, std::int64_t>>& a,
                               std::vector<std::pair<std::int64_t, std::int64_t>>& b);

// True when two plan JSON texts describe the same training apart from "parallel" and
// "name" (the single-rank reference for scaling efficiency). False if either is unparsable.
bool same_plan_but_parallelism(const std::string& plan_json_a, const std::string& plan_json_b);

// Called with each rank's events (its own clock, any order) once summarize_run is done
// with them, so a caller that needs them too (compare, the critical path) reads the store
// once and may keep them without a copy (a million events are 48 MB).
using RankEventsVisitor = std::function<void(int rank, std::vector<trace::Event>&& events)>;

Expected<RunSummary> summarize_run(store::RunStore& store, std::int64_t run_id,
                                   const RankEventsVisitor& visit_rank_events = {});

// Layer names by LayerId (the number trace events carry), from the same inference that
// numbered the layers when tracing (an imported trace: the names its ranges gave); empty
// when the plan does not parse.
std::vector<std::string> layer_names_by_id(const std::string& plan_json);

// Keys: id, name, status, started_unix_ms, ended_unix_ms, error, plan (parsed plan JSON,
// null if absent or unparsable), world_size, steps, wall_s, samples, samples_per_s,
// final_loss, test_accuracy (null when unknown), ranks: [{rank, device, device_info
// (device_info.h keys, null when not recorded), compute_s, comm_s, optimizer_s, data_s,
// idle_s, events_recorded, events_stored, exposed_comm_s}], devices: [{ranks, text,
// device_info}] (identical ranks grouped, device_identity.h),
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


}  // namespace loom::analysis
