// A stored run summarised: every figure family (breakdown, throughput, stages,
// staleness, scaling, serving, memory, devices) read from the store in one pass over its
// ranks' events. Pure over the RunStore; no GUI.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "loom/analysis/breakdown.h"
#include "loom/analysis/device_identity.h"
#include "loom/analysis/scaling.h"
#include "loom/analysis/serving.h"
#include "loom/analysis/stage_stats.h"
#include "loom/analysis/staleness.h"
#include "loom/core/status.h"
#include "loom/trace/event.h"
#include "loom/trace/records.h"

namespace loom::store {
class RunStore;
}  // namespace loom::store

namespace loom::analysis {

// One rank's clock against rank 0's (see run_store.h RankRecord, clock_align.h).
// offset_end_ns equals offset_ns when the rank has no end estimate.
struct ClockRow {
  int rank = 0;
  std::int64_t offset_ns = 0, offset_end_ns = 0, uncertainty_ns = 0;
  double drift_ppm = 0;
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

}  // namespace loom::analysis
