// A stored run summarised (see summary.h): one pass over its ranks, then the figures
// that need the store (metrics, updates, earlier runs).
#include "loom/analysis/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "loom/analysis/import_kineto.h"
#include "loom/core/model_info.h"
#include "loom/store/run_store.h"
#include "loom/trace/clock_align.h"

#include "figure_parts.h"

namespace loom::analysis {

using trace::Event;
using trace::EventKind;

Expected<std::optional<ServingStats>> serving_of_run(store::RunStore& store, const trace::RunRecord& run) {
  const PlanResult plan = parse_plan(run.plan_json);
  if (!plan.ok() || !plan.plan->serve) return std::optional<ServingStats>();
  auto metrics = store.load_metrics(run.id);
  if (!metrics.ok()) return metrics.error();
  return serving_stats(*plan.plan, *metrics);
}

namespace {
double last_value(const std::vector<trace::MetricRecord>& metrics) {
  // load_metrics orders by step then time: the last row is the latest.
  return metrics.empty() ? std::numeric_limits<double>::quiet_NaN() : metrics.back().value;
}

// What the per-rank pass gathers besides the breakdowns, so no rank is loaded twice.
struct RankScan {
  std::int32_t max_step = -1;
  std::set<std::int32_t> step_spans;  // the numbers of every rank's Step spans
  std::vector<AllReduceTotals> allreduce;
  std::map<int, StepWork> step_work;  // ranks with events
  std::map<int, std::int64_t> wait_ns;  // ranks with events
  std::map<int, TrainingWindow> windows;  // ranks with events
};

// A run's steps, one definition for every source and view (docs/figures.md): the steps
// with a loss value; where none is recorded (an imported trace), the steps that have a
// Step span; else the highest step any event names, plus one.
std::int64_t steps_recorded(const std::set<std::int64_t>& loss_steps, const RankScan& scan) {
  if (!loss_steps.empty()) return static_cast<std::int64_t>(loss_steps.size());
  if (!scan.step_spans.empty()) return static_cast<std::int64_t>(scan.step_spans.size());
  return static_cast<std::int64_t>(scan.max_step) + 1;
}

// Breaks down every rank with a record, with events, or below world_size (a silent rank
// is news too), accumulating all-reduce totals and step work. Ranks are loaded one at a
// time since Event has no rank field, which also bounds memory to the largest rank.
Status add_rank_breakdowns(store::RunStore& store, std::int64_t run_id, const std::vector<trace::RankRecord>& records,
                           RunSummary& s, RankScan& scan, const RankEventsVisitor& visit) {
  auto event_ranks = store.event_ranks(run_id);
  if (!event_ranks.ok()) return event_ranks.error();
  std::set<int> rank_ids(event_ranks->begin(), event_ranks->end());
  for (const auto& r : records) rank_ids.insert(r.rank);
  for (int r = 0; r < s.world_size; ++r) rank_ids.insert(r);
  for (int r : rank_ids) {
    auto events = store.load_events(run_id, r);
    if (!events.ok()) return events.error();
    for (const Event& e : *events) {
      scan.max_step = std::max(scan.max_step, e.step);
      if (e.kind == EventKind::Step) scan.step_spans.insert(e.step);
    }
    RankBreakdown b = breakdown_rank(r, *events);
    for (const auto& rec : records)
      if (rec.rank == r) b.events_recorded = rec.events_recorded, b.device = rec.device;
    s.ranks.push_back(b);
    scan.allreduce.push_back(allreduce_totals(*events));
    if (!events->empty()) scan.step_work[r] = step_work(*events);
    if (!events->empty()) scan.wait_ns[r] = wait_ns(*events);
    if (!events->empty()) scan.windows[r] = training_window(*events);
    if (visit) visit(r, std::move(*events));
  }
  return {};
}

std::vector<ClockRow> clock_rows(const std::vector<trace::RankRecord>& records) {
  std::vector<ClockRow> rows;
  for (const auto& r : records) {
    const std::int64_t end = clock::has_end_estimate(r) ? r.offset_end_ns : r.offset_ns;
    rows.push_back({r.rank, r.offset_ns, end, r.uncertainty_ns, clock::drift_ppm(r)});
  }
  return rows;
}

// Every plan has stages (one without pipelining); a plan that no longer parses has none.
Expected<std::optional<PipelineStats>> pipeline_of_run(store::RunStore& store, const trace::RunRecord& run,
                                                       const std::map<int, StepWork>& work) {
  const PlanResult plan = parse_plan(run.plan_json);
  if (!plan.ok()) return std::optional<PipelineStats>();
  std::vector<trace::MetricRecord> metrics;
  for (const char* name : {"max_in_flight", "peak_activation_bytes"}) {
    auto m = store.load_metrics(run.id, name);
    if (!m.ok()) return m.error();
    metrics.insert(metrics.end(), m->begin(), m->end());
  }
  return std::optional<PipelineStats>(pipeline_from_work(*plan.plan, work, metrics));
}

// Staleness needs the plan (mode, bound, which ranks are workers); without one, none.
Expected<StalenessStats> staleness_of_run(store::RunStore& store, const trace::RunRecord& run,
                                          const std::map<int, std::int64_t>& waits) {
  const PlanResult plan = parse_plan(run.plan_json);
  if (!plan.ok()) return StalenessStats{};
  auto updates = store.load_updates(run.id);
  if (!updates.ok()) return updates.error();
  return staleness_from(*updates, waits, *plan.plan);
}

Expected<std::optional<DivergenceStats>> divergence_of_run(store::RunStore& store, std::int64_t run_id) {
  auto metrics = store.load_metrics(run_id, "param_divergence");
  if (!metrics.ok()) return metrics.error();
  if (metrics->empty()) return std::optional<DivergenceStats>();
  DivergenceStats d;
  double sum = 0;
  for (const auto& m : *metrics) sum += m.value;
  d.count = std::int64_t(metrics->size());
  d.mean = sum / double(d.count);
  d.last = last_value(*metrics);
  return std::optional<DivergenceStats>(d);
}

// The summary's throughput for a serving run: requests per second (serving.h).
void set_serving_throughput(RunSummary& s) {
  if (!s.serving) return;
  const ServingStats& v = *s.serving;
  s.throughput_basis = "serving";
  s.samples_per_s = v.throughput_per_s;
  s.train_samples = v.served;
  s.train_s = v.throughput_per_s > 0 ? double(s.train_samples) / v.throughput_per_s : 0.0;
  s.steady_steps = 0;
}

// Steady throughput (throughput.h) into the summary; the whole-run figure stays
// beside it. Offsets put every rank's window on rank 0's clock.
void set_throughput(RunSummary& s, const std::map<int, TrainingWindow>& windows,
                    const std::vector<trace::RankRecord>& records) {
  s.wall_samples_per_s = s.wall_s > 0 ? static_cast<double>(s.run.samples) / s.wall_s : 0.0;
  s.samples_per_s = s.wall_samples_per_s;
  s.throughput_basis = "whole run";
  for (const auto& [rank, w] : windows) s.setup_s = std::max(s.setup_s, static_cast<double>(w.setup_ns) / kNsPerS);
  const PlanResult plan = parse_plan(s.run.plan_json);
  if (!plan.ok()) {
    if (kineto::is_imported_plan(s.run.plan_json)) {
      s.throughput_basis = "imported trace";
      s.samples_per_s = std::numeric_limits<double>::quiet_NaN();  // samples per step unknown, not zero
      s.wall_samples_per_s = s.samples_per_s;
      // Its steady steps and window are known as for any run (the critical path uses them).
      for (const auto& [rank, w] : windows) {
        s.steady_steps = std::max(s.steady_steps, w.steady_steps);
        s.train_s = std::max(s.train_s, w.seconds());
      }
    }
    return;
  }
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(std::max(0, s.world_size)), 0);
  for (const auto& r : records)
    if (r.rank >= 0 && r.rank < s.world_size) offsets[std::size_t(r.rank)] = r.offset_ns;
  const Throughput t = throughput_from_windows(*plan.plan, windows, offsets);
  if (!t.from_steps) return;
  s.train_s = t.train_s;
  s.train_samples = t.train_samples;
  s.steady_steps = t.steady_steps;
  s.samples_per_s = static_cast<double>(t.train_samples) / t.train_s;
  s.throughput_basis = "steady steps";
}

// The hosts of ranks 0 and 1, the probe's ends ("" for a rank that left no record).
Expected<std::pair<std::string, std::string>> probe_hosts(store::RunStore& store, std::int64_t run_id) {
  auto ranks = store.load_ranks(run_id);
  if (!ranks.ok()) return ranks.error();
  std::pair<std::string, std::string> ends;
  for (const trace::RankRecord& r : *ranks) {
    if (r.rank == 0) ends.first = r.host;
    if (r.rank == 1) ends.second = r.host;
  }
  return ends;
}

// Flags a bandwidth probe far below this host's usual rate (summary.h kProbeUnusualFraction):
// the rate of earlier runs of as many ranks whose probe ran between the same hosts (one
// through shared memory is no history for one across a network, nor the other way).
Status check_probe(store::RunStore& store, RunSummary& s) {
  if (!std::isfinite(s.allreduce.p2p_gbs)) return {};
  auto runs = store.list_runs();
  if (!runs.ok()) return runs.error();
  auto ends = probe_hosts(store, s.run.id);
  if (!ends.ok()) return ends.error();
  std::vector<double> earlier;
  for (const trace::RunRecord& r : *runs) {
    if (r.id >= s.run.id || r.host != s.run.host || r.world_size != s.world_size) continue;
    auto theirs = probe_hosts(store, r.id);
    if (!theirs.ok()) return theirs.error();
    if (*theirs != *ends) continue;
    auto probe = store.load_metrics(r.id, "p2p_gbs");
    if (!probe.ok()) return probe.error();
    if (!probe->empty() && std::isfinite(probe->back().value)) earlier.push_back(probe->back().value);
    if (earlier.size() >= 20) break;  // the newest 20 are history enough
  }
  if (static_cast<int>(earlier.size()) < kProbeHistory) return {};
  std::sort(earlier.begin(), earlier.end());
  const double median = earlier[earlier.size() / 2];
  if (s.allreduce.p2p_gbs >= kProbeUnusualFraction * median) return {};
  char text[256];
  std::snprintf(text, sizeof text,
                "the bandwidth probe measured %.2f GB/s, below a quarter of this host's usual %.2f GB/s (median of "
                "%zu earlier runs): the machine was probably busy at start; compare communication figures with care",
                s.allreduce.p2p_gbs, median, earlier.size());
  s.warnings.push_back(text);
  return {};
}

// Every rank's device_memory_* metrics (the last of each name), as RankMemory rows.
Expected<std::vector<RankMemory>> memory_of_run(store::RunStore& store, std::int64_t run_id) {
  std::map<int, RankMemory> by_rank;
  const std::pair<const char*, std::int64_t RankMemory::*> parts[] = {
      {"device_memory_bytes", &RankMemory::total},
      {"device_memory_parameters_bytes", &RankMemory::parameters},
      {"device_memory_gradients_bytes", &RankMemory::gradients},
      {"device_memory_optimizer_bytes", &RankMemory::optimizer},
      {"device_memory_workspace_bytes", &RankMemory::workspace},
      {"device_memory_activations_bytes", &RankMemory::activations}};
  for (const auto& [name, field] : parts) {
    auto metrics = store.load_metrics(run_id, name);
    if (!metrics.ok()) return metrics.error();
    for (const trace::MetricRecord& m : *metrics) {
      if (field != &RankMemory::total && !by_rank.count(m.rank)) continue;  // parts without a total
      RankMemory& row = by_rank[m.rank];
      row.rank = m.rank;
      row.*field = std::int64_t(m.value);
    }
  }
  std::vector<RankMemory> rows;
  for (const auto& [rank, row] : by_rank) rows.push_back(row);
  return rows;
}

// The figures read from the run's metrics: loss (steps, the last, where it diverged),
// test accuracy, parameter norm, and the all-reduce's against the probed bandwidth.
Status add_metric_figures(store::RunStore& store, std::int64_t run_id, const RankScan& scan, RunSummary& s) {
  auto loss = store.load_metrics(run_id, "loss");
  if (!loss.ok()) return loss.error();
  auto accuracy = store.load_metrics(run_id, "test_accuracy");
  if (!accuracy.ok()) return accuracy.error();
  auto p2p = store.load_metrics(run_id, "p2p_gbs");
  if (!p2p.ok()) return p2p.error();
  auto norm = store.load_metrics(run_id, "param_norm");
  if (!norm.ok()) return norm.error();
  s.param_norm = last_value(*norm);
  std::set<std::int64_t> loss_steps;
  for (const auto& m : *loss) loss_steps.insert(m.step);
  s.steps = steps_recorded(loss_steps, scan);
  if (s.run.resumed_from != 0 && !loss_steps.empty()) s.resumed_at_step = *loss_steps.begin();
  s.final_loss = last_value(*loss);
  // A loss that became NaN or infinite: where, in every view that lists warnings.
  const auto first_bad = std::find_if(loss->begin(), loss->end(), [](const auto& m) { return !std::isfinite(m.value); });
  if (first_bad != loss->end())
    s.warnings.push_back("the loss diverged at step " + std::to_string(first_bad->step) + " (loss " +
                         (std::isnan(first_bad->value) ? "nan" : "inf") + "): every value up to then is kept");
  s.test_accuracy = last_value(*accuracy);
  s.allreduce = allreduce_stats(scan.allreduce, s.ranks, s.world_size, last_value(*p2p));
  return {};
}
}  // namespace

Expected<RunSummary> summarize_run(store::RunStore& store, std::int64_t run_id,
                                   const RankEventsVisitor& visit_rank_events) {
  auto run = store.load_run(run_id);
  if (!run.ok()) return run.error();
  auto ranks = store.load_ranks(run_id);
  if (!ranks.ok()) return ranks.error();
  RunSummary s;
  s.run = std::move(run).value();
  s.world_size = s.run.world_size;
  s.wall_s = s.run.wall_s;

  RankScan scan;
  LOOM_TRY(add_rank_breakdowns(store, run_id, *ranks, s, scan, visit_rank_events));
  attach_devices(s, *ranks);
  set_throughput(s, scan.windows, *ranks);

  LOOM_TRY(add_metric_figures(store, run_id, scan, s));
  LOOM_TRY(check_probe(store, s));
  s.clock = clock_rows(*ranks);
  auto scaling = find_scaling(store, s);
  if (!scaling.ok()) return scaling.error();
  s.scaling = *scaling;
  auto pipeline = pipeline_of_run(store, s.run, scan.step_work);
  if (!pipeline.ok()) return pipeline.error();
  s.pipeline = std::move(pipeline).value();
  if (s.pipeline && !s.pipeline->warning.empty()) s.warnings.push_back(s.pipeline->warning);
  auto staleness = staleness_of_run(store, s.run, scan.wait_ns);
  if (!staleness.ok()) return staleness.error();
  s.staleness = std::move(staleness).value();
  auto divergence = divergence_of_run(store, run_id);
  if (!divergence.ok()) return divergence.error();
  s.divergence = *divergence;
  auto serving = serving_of_run(store, s.run);
  if (!serving.ok()) return serving.error();
  s.serving = std::move(serving).value();
  set_serving_throughput(s);
  auto memory = memory_of_run(store, run_id);
  if (!memory.ok()) return memory.error();
  s.memory = std::move(memory).value();
  return s;
}

std::vector<std::string> layer_names_by_id(const std::string& plan_json) {
  if (kineto::is_imported_plan(plan_json)) return kineto::imported_layer_names(plan_json);
  PlanResult plan = parse_plan(plan_json);
  if (!plan.ok()) return {};
  std::vector<PlanError> ignored;
  std::vector<std::string> names;
  for (const LayerInfo& l : infer_model(*plan.plan, &ignored).layers) {
    if (!l.id.valid()) continue;
    if (names.size() <= std::size_t(l.id.value)) names.resize(std::size_t(l.id.value) + 1);
    names[std::size_t(l.id.value)] = l.name;
  }
  return names;
}

}  // namespace loom::analysis
