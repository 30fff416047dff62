#include "loom/analysis/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <future>
#include <tuple>
#include <map>
#include <set>
#include <unordered_map>

#include "loom/analysis/critical_path.h"
#include "loom/analysis/import_kineto.h"
#include "loom/analysis/stats.h"
#include "loom/core/plan.h"
#include "loom/trace/clock_align.h"

namespace loom::analysis {

using trace::Event;
using trace::EventKind;

namespace {

constexpr double kNsPerMs = 1e6;

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

std::set<std::int32_t> steady_steps(const std::vector<Event>& events, const StepRange& range) {
  return steady_step_numbers(events, range.from, range.to);
}

std::optional<Plan> plan_of(const trace::RunRecord& run) {
  PlanResult parsed = parse_plan(run.plan_json);
  if (!parsed.ok()) return std::nullopt;
  return std::move(parsed.plan);
}

std::string count_of(int n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }

std::string mode_of(const std::optional<Plan>& plan, const trace::RunRecord& run) {
  if (!plan && kineto::is_imported_plan(run.plan_json))
    return "imported PyTorch trace, " + count_of(run.world_size, "rank", "ranks");
  if (!plan) return "plan unreadable";
  const ParallelSpec& p = plan->parallel;
  if (p.stages > 1) {
    std::string mode = std::string(schedule_name(p.schedule)) + " pipeline, " + count_of(p.stages, "stage", "stages") +
                       " x " + count_of(p.microbatches, "micro-batch", "micro-batches");
    if (p.data_parallel > 1) mode += ", " + count_of(p.data_parallel, "replica", "replicas");
    return mode;
  }
  switch (p.sync.mode) {
    case SyncMode::AllReduce:
      return p.data_parallel == 1 ? "one process" : "all-reduce, " + count_of(p.data_parallel, "replica", "replicas");
    case SyncMode::ParameterServer:
      return "parameter server, " + count_of(p.data_parallel, "worker", "workers") + ", " + count_of(p.sync.servers, "server", "servers");
    case SyncMode::Ssp:
      return "ssp bound " + std::to_string(p.sync.bound) + ", " + count_of(p.data_parallel, "worker", "workers") + ", " +
             count_of(p.sync.servers, "server", "servers");
    case SyncMode::LocalSgd:
      return "local SGD every " + count_of(p.sync.period, "step", "steps") + ", " + count_of(p.data_parallel, "replica", "replicas");
  }
  return "";
}

}  // namespace

// A prediction says so first: it is the predictor's step, not a measurement.
std::string run_mode(const trace::RunRecord& run) {
  return (run.predicted() ? "predicted: " : "") + mode_of(plan_of(run), run);
}

namespace {

std::string role_of(const std::optional<Plan>& plan, int rank) {
  if (!plan) return "rank " + std::to_string(rank);
  const RankRole role = rank_role(*plan, rank);
  if (role.kind == RankKind::Server) return "server";
  if (role.kind == RankKind::Worker) return plan->parallel.stages > 1 ? "stage " + std::to_string(role.stage) : "worker";
  return "rank " + std::to_string(rank);
}

// A phase and where it sorts within its role: the order a step runs in (data, forward
// by layer, loss, backward from the last layer, all-reduce buckets, messages, waits,
// optimizer), then the whole step.
struct Phase {
  int order = 0;
  std::string name;  // empty: no phase counts this event (setup, evaluation)
  auto operator<=>(const Phase&) const = default;
};

int kind_order(EventKind kind) {
  switch (kind) {
    case EventKind::DataLoad: return 0;
    case EventKind::Loss: return 30000;
    case EventKind::Send: return 70000;
    case EventKind::Recv: return 70001;
    case EventKind::Push: return 70002;
    case EventKind::Pull: return 70003;
    case EventKind::Broadcast: return 70004;
    case EventKind::Barrier: return 70005;
    case EventKind::Wait: return 80000;
    case EventKind::Idle: return 80001;
    case EventKind::InjectedDelay: return 80002;
    case EventKind::Optimizer: return 90000;
    case EventKind::Step: return 99999;
    default: return 95000;
  }
}

// The whole forward and the whole backward pass of a step: a source that times passes,
// not layers (a PyTorch trace), and the sum over layers of one that times layers, under
// one key, so that runs of both kinds meet on one row of the phase diff (before the
// per-layer forward rows, after the per-layer backward ones).
const Phase kWholeForward{9999, "forward"}, kWholeBackward{50001, "backward"};

Phase phase_of(const Event& e, const std::vector<std::string>& layers) {
  if (e.layer < 0 && e.kind == EventKind::Forward) return kWholeForward;
  if (e.layer < 0 && e.kind == EventKind::Backward) return kWholeBackward;
  auto with_layer = [&](const char* what, int order) {
    if (e.layer < 0) return Phase{order, what};
    const bool named = std::size_t(e.layer) < layers.size() && !layers[std::size_t(e.layer)].empty();
    return Phase{order, std::string(what) + " " + (named ? layers[std::size_t(e.layer)] : "layer " + std::to_string(e.layer))};
  };
  const int layer = std::clamp(e.layer, 0, 9999);
  switch (e.kind) {
    case EventKind::Forward: return with_layer("forward", 10000 + layer);
    case EventKind::Backward: return with_layer("backward", 50000 - layer);
    case EventKind::Setup:
    case EventKind::Evaluate:
    case EventKind::AllReduce: return {};  // all-reduce: per bucket, see add_bucket_phases
    case EventKind::Idle: return {kind_order(e.kind), "idle (bubble)"};
    case EventKind::Step: return {kind_order(e.kind), "whole step"};
    default: return {kind_order(e.kind), std::string(trace::event_kind_name(e.kind))};
  }
}

using PhaseKey = std::pair<std::string, Phase>;  // role, phase
using PhaseSamples = std::map<PhaseKey, std::vector<double>>;

// Buckets are numbered in the order a rank started them within a step.
void add_bucket_phases(const std::vector<Event>& events, const std::set<std::int32_t>& steps,
                       std::map<std::pair<Phase, std::int32_t>, double>& per_step) {
  std::map<std::int32_t, std::vector<const Event*>> by_step;
  for (const Event& e : events) {
    if (e.kind == EventKind::AllReduce && steps.count(e.step)) by_step[e.step].push_back(&e);
  }
  for (auto& [step, buckets] : by_step) {
    std::sort(buckets.begin(), buckets.end(), [](const Event* a, const Event* b) { return a->start_ns < b->start_ns; });
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      const Phase bucket{60000 + int(std::min<std::size_t>(i, 9999)), "all-reduce bucket " + std::to_string(i)};
      per_step[{bucket, step}] += double(buckets[i]->end_ns - buckets[i]->start_ns);
    }
  }
}

// Membership of a set of steps by index: a tree lookup per event is too slow for millions.
class StepFilter {
 public:
  explicit StepFilter(const std::set<std::int32_t>& steps) {
    if (steps.empty()) return;
    first_ = *steps.begin();
    in_.assign(std::size_t(*steps.rbegin() - first_) + 1, false);
    for (std::int32_t s : steps) in_[std::size_t(s - first_)] = true;
  }
  bool contains(std::int32_t step) const {
    return step >= first_ && std::size_t(step - first_) < in_.size() && in_[std::size_t(step - first_)];
  }

 private:
  std::int32_t first_ = 0;
  std::vector<bool> in_;
};

// One integer for (kind, layer, step): kind in the top byte, layer + 1 in the next 24 bits
// (layer ids are small), the step in the low 32.
std::uint64_t kind_layer_step(const Event& e) {
  const auto layer = std::uint64_t(std::uint32_t(e.layer + 1) & 0xffffffu);
  return (std::uint64_t(e.kind) << 56) | (layer << 32) | std::uint64_t(std::uint32_t(e.step));
}

// Every steady step of one rank adds one sample per phase it spent time in. Events are
// summed under integer keys first: naming a phase allocates, and a run has millions.
void add_rank_phases(const std::vector<Event>& events, const std::string& role, const std::vector<std::string>& layers,
                     const StepRange& range, PhaseSamples& out) {
  const std::set<std::int32_t> steps = steady_steps(events, range);
  const StepFilter steady(steps);
  // (kind, layer, step) -> ns, hashed: a tree lookup per event was a tenth of compare.
  std::unordered_map<std::uint64_t, double> by_kind;
  for (const Event& e : events) {
    if (e.kind == EventKind::AllReduce || !steady.contains(e.step)) continue;
    by_kind[kind_layer_step(e)] += double(e.end_ns - e.start_ns);
  }
  std::map<std::pair<Phase, std::int32_t>, double> per_step;  // (phase, step) -> ns
  for (const auto& [key, ns] : by_kind) {
    Event e;
    e.kind = EventKind(key >> 56);
    e.layer = std::int32_t(std::uint32_t(key >> 32) & 0xffffffu) - 1;
    const Phase phase = phase_of(e, layers);
    const std::int32_t step = std::int32_t(std::uint32_t(key));
    if (!phase.name.empty()) per_step[{phase, step}] += ns;
    // A layer's pass also counts toward its step's whole pass (the row a PyTorch trace has).
    if (e.layer >= 0 && e.kind == EventKind::Forward) per_step[{kWholeForward, step}] += ns;
    if (e.layer >= 0 && e.kind == EventKind::Backward) per_step[{kWholeBackward, step}] += ns;
  }
  add_bucket_phases(events, steps, per_step);
  for (const auto& [key, ns] : per_step) out[{role, key.first}].push_back(ns / kNsPerMs);
}

// What one run contributes: its summary, its phase samples and its step times.
struct RunFigures {
  RunSummary summary;
  std::optional<Plan> plan;
  PhaseSamples phases;
  StepTimes steps;
  TimeToAccuracy to_target;
  PathAnalysis paths;  // over the same steady steps of rank 0, in the range
};

// The critical path and waits over rank 0's steady steps in the range, on rank 0's clock.
PathAnalysis paths_in_range(const RunFigures& f, const std::vector<trace::RankRecord>& records,
                            std::vector<std::vector<Event>> events, const StepRange& range) {
  if (events.empty()) return {};
  for (const trace::RankRecord& r : records)
    if (r.rank >= 0 && std::size_t(r.rank) < events.size()) clock::align_events(r, events[std::size_t(r.rank)]);
  const std::vector<int> groups = f.plan ? sync_groups(*f.plan, int(events.size())) : std::vector<int>(events.size(), -1);
  return analyze_paths(events, groups, steady_steps(events[0], range));
}

// What compare needs from one rank's events, taken while summarize_run has them.
struct RankCollector {
  const std::optional<Plan>& plan;
  const std::vector<std::string>& layers;
  const StepRange& range;
  PhaseSamples& phases;
  std::vector<std::vector<Event>> step_spans;
  std::int64_t first_step_ns = 0;
  bool imported = false;  // an imported trace's ranks are data-parallel workers: pooled with a Loom run's
  std::vector<std::vector<Event>> events_by_rank;  // for the critical path, which crosses ranks

  void operator()(int rank, std::vector<Event>&& events) {
    add_rank_phases(events, imported ? "worker" : role_of(plan, rank), layers, range, phases);
    std::vector<Event> steps;
    std::copy_if(events.begin(), events.end(), std::back_inserter(steps),
                 [](const Event& e) { return e.kind == EventKind::Step; });
    if (rank == 0 && !steps.empty()) {
      first_step_ns = std::min_element(steps.begin(), steps.end(), [](const Event& a, const Event& b) {
                        return a.start_ns < b.start_ns;
                      })->start_ns;
    }
    step_spans.push_back(std::move(steps));
    if (rank >= 0) {
      if (events_by_rank.size() <= std::size_t(rank)) events_by_rank.resize(std::size_t(rank) + 1);
      events_by_rank[std::size_t(rank)] = std::move(events);
    }
  }
};

Expected<RunFigures> figures_of_run(store::RunStore& store, std::int64_t run_id, const CompareOptions& options) {
  auto run = store.load_run(run_id);
  if (!run.ok()) return run.error();
  RunFigures f;
  f.plan = plan_of(*run);
  const std::vector<std::string> layers = layer_names_by_id(run->plan_json);
  RankCollector collect{f.plan, layers, options.steps, f.phases, {}, 0,
                        !f.plan && kineto::is_imported_plan(run->plan_json), {}};
  auto summary = summarize_run(store, run_id, std::ref(collect));
  if (!summary.ok()) return summary.error();
  f.summary = std::move(summary).value();
  f.steps = step_times(collect.step_spans, options.steps);
  auto records = store.load_ranks(run_id);
  if (!records.ok()) return records.error();
  f.paths = paths_in_range(f, *records, std::move(collect.events_by_rank), options.steps);
  if (std::isfinite(options.target_accuracy)) {
    auto accuracy = store.load_metrics(run_id, "test_accuracy");
    if (!accuracy.ok()) return accuracy.error();
    f.to_target = time_to_accuracy(*accuracy, collect.first_step_ns, options.target_accuracy);
  }
  return f;
}

// Mean over worker ranks (those with steady steps) of a category's ms per steady step.
double per_step_ms(const RunSummary& s, double RankBreakdown::*seconds) {
  double sum = 0;
  int n = 0;
  for (const RankBreakdown& r : s.ranks) {
    if (r.steady_steps <= 0) continue;
    sum += r.*seconds * 1e3 / double(r.steady_steps);
    ++n;
  }
  return n ? sum / n : kNaN;
}

double mean_over_stages(const RunSummary& s, double StageStats::*field) {
  if (!s.pipeline || s.pipeline->stages < 2) return kNaN;
  double sum = 0;
  int n = 0;
  for (const StageStats& st : s.pipeline->stages_stats) {
    if (!std::isfinite(st.*field)) continue;
    sum += st.*field * 100.0;
    ++n;
  }
  return n ? sum / n : kNaN;
}

double staleness_or_nan(const RunSummary& s, double v) { return s.staleness.present ? v : kNaN; }

// Per step on the critical path: its whole length (part -1) or one part, in ms.
double path_ms(const PathAnalysis& a, int part) {
  if (a.path.steps == 0) return kNaN;
  const std::int64_t ns = part < 0 ? a.path.length_ns : a.path.part_ns[part];
  return double(ns) / kNsPerMs / a.path.steps;
}

// The pipeline's fill and drain on the critical path, ms per step: the path's work beyond
// what its busiest rank computes itself. A pipeline of s stages and m equal micro-batches
// of t ms gives a path of (m + s - 1) t of work and a busiest stage of m t, so (s - 1) t:
// the bubble of pipeline theory. 0 for a run without stages (nothing to fill), NaN
// without a path.
double path_bubble_ms(const RunFigures& f) {
  const double work = path_ms(f.paths, int(PathPart::Work));
  if (!std::isfinite(work)) return kNaN;
  if (!f.summary.pipeline || f.summary.pipeline->stages < 2) return 0.0;
  double busiest = kNaN;
  for (const RankBreakdown& r : f.summary.ranks) {
    if (r.steady_steps <= 0) continue;
    const double own = (r.compute_s + r.optimizer_s + r.data_s) * 1e3 / double(r.steady_steps);
    busiest = std::isfinite(busiest) ? std::max(busiest, own) : own;
  }
  return std::isfinite(busiest) ? std::max(0.0, work - busiest) : kNaN;
}

// Time every rank lost waiting for a late sender or a late arrival, summed, per step.
double late_wait_ms(const PathAnalysis& a) {
  if (a.path.steps == 0) return kNaN;
  std::int64_t ns = 0;
  for (const WaitCause& w : a.waits) ns += w.ns;
  return double(ns) / kNsPerMs / a.path.steps;
}

// What a source does not record is unknown (NaN: "-", never starred), not 0. A PyTorch
// profiler trace measures no descheduling, and data loading only where it has DataLoader
// spans.
bool imported_trace(const RunFigures& f) { return !f.plan && kineto::is_imported_plan(f.summary.run.plan_json); }

double descheduled_ms(const RunFigures& f) {
  return imported_trace(f) ? kNaN : per_step_ms(f.summary, &RankBreakdown::descheduled_s);
}

double path_descheduled_ms(const RunFigures& f) {
  return imported_trace(f) ? kNaN : path_ms(f.paths, int(PathPart::Descheduled));
}

double data_ms(const RunFigures& f) {
  const bool any = std::any_of(f.summary.ranks.begin(), f.summary.ranks.end(),
                               [](const RankBreakdown& r) { return r.data_s > 0; });
  return imported_trace(f) && !any ? kNaN : per_step_ms(f.summary, &RankBreakdown::data_s);
}

struct MetricSpec {
  const char* key;
  const char* label;
  const char* unit;
  Better better;
  std::function<double(const RunFigures&)> value;
};

std::vector<MetricSpec> metric_specs(const CompareOptions& options) {
  using F = const RunFigures&;
  std::vector<MetricSpec> specs = {
      {"step_time_median_ms", "step time, median", "ms", Better::Lower, [](F f) { return f.steps.median_ms; }},
      {"step_time_p95_ms", "step time, p95", "ms", Better::Lower, [](F f) { return f.steps.p95_ms; }},
      {"samples_per_s", "throughput", "samples/s", Better::Higher, [](F f) { return f.summary.samples_per_s; }},
      {"compute_ms", "compute per step", "ms", Better::Lower,
       [](F f) { return per_step_ms(f.summary, &RankBreakdown::compute_s); }},
      {"comm_ms", "communication per step", "ms", Better::Lower,
       [](F f) { return per_step_ms(f.summary, &RankBreakdown::comm_s); }},
      {"exposed_comm_ms", "exposed communication per step", "ms", Better::Lower,
       [](F f) { return per_step_ms(f.summary, &RankBreakdown::exposed_comm_s); }},
      {"optimizer_ms", "optimizer per step", "ms", Better::Lower,
       [](F f) { return per_step_ms(f.summary, &RankBreakdown::optimizer_s); }},
      {"data_ms", "data loading per step", "ms", Better::Lower, data_ms},
      {"idle_ms", "idle per step", "ms", Better::Lower,
       [](F f) { return per_step_ms(f.summary, &RankBreakdown::idle_s); }},
      {"descheduled_ms", "descheduled per step", "ms", Better::Lower, descheduled_ms},
      {"path_ms", "critical path per step", "ms", Better::Lower,
       [](F f) { return path_ms(f.paths, -1); }},
      {"path_work_ms", "  of it work", "ms", Better::Lower,
       [](F f) { return path_ms(f.paths, int(PathPart::Work)); }},
      {"path_bubble_ms", "    of the work, pipeline fill and drain", "ms", Better::Lower, path_bubble_ms},
      {"path_comm_ms", "  of it communication", "ms", Better::Lower,
       [](F f) { return path_ms(f.paths, int(PathPart::Communication)); }},
      {"path_waiting_ms", "  of it waiting", "ms", Better::Lower,
       [](F f) { return path_ms(f.paths, int(PathPart::Waiting)); }},
      {"path_descheduled_ms", "  of it descheduled", "ms", Better::Lower, path_descheduled_ms},
      {"path_untraced_ms", "  of it untraced", "ms", Better::Lower,
       [](F f) { return path_ms(f.paths, int(PathPart::Untraced)); }},
      {"late_wait_ms", "waiting for late ranks per step", "ms", Better::Lower,
       [](F f) { return late_wait_ms(f.paths); }},
      {"bubble_pct", "pipeline bubble, mean of stages", "%", Better::Lower,
       [](F f) { return mean_over_stages(f.summary, &StageStats::bubble_fraction); }},
      {"bubble_theory_pct", "bubble theory for these stages", "%", Better::Neither,
       [](F f) { return mean_over_stages(f.summary, &StageStats::bubble_theory); }},
      {"allreduce_busbw_gbs", "all-reduce busbw", "GB/s", Better::Higher,
       [](F f) { return f.summary.allreduce.busbw_gbs; }},
      {"comm_hidden_pct", "communication hidden behind work", "%", Better::Higher,
       [](F f) { return f.summary.allreduce.hidden_fraction * 100.0; }},
      {"staleness_p50", "staleness p50", "updates", Better::Lower,
       [](F f) { return staleness_or_nan(f.summary, f.summary.staleness.p50); }},
      {"staleness_p95", "staleness p95", "updates", Better::Lower,
       [](F f) { return staleness_or_nan(f.summary, f.summary.staleness.p95); }},
      {"staleness_max", "staleness max", "updates", Better::Lower,
       [](F f) { return staleness_or_nan(f.summary, double(f.summary.staleness.max)); }},
      {"final_loss", "final training loss", "", Better::Lower, [](F f) { return f.summary.final_loss; }},
      {"test_accuracy_pct", "final test accuracy", "%", Better::Higher,
       [](F f) { return f.summary.test_accuracy * 100.0; }},
      {"load_balance_pct", "load balance (POP)", "%", Better::Higher,
       [](F f) { return pop_efficiency(f.summary.ranks).load_balance * 100.0; }},
      {"communication_efficiency_pct", "communication efficiency (POP)", "%", Better::Higher,
       [](F f) { return pop_efficiency(f.summary.ranks).communication_efficiency * 100.0; }},
      {"parallel_efficiency_pct", "parallel efficiency (POP)", "%", Better::Higher,
       [](F f) { return pop_efficiency(f.summary.ranks).parallel_efficiency * 100.0; }},
      {"scaling_efficiency_pct", "scaling efficiency vs 1 rank", "%", Better::Higher,
       [](F f) { return f.summary.scaling ? f.summary.scaling->efficiency * 100.0 : kNaN; }},
  };
  if (std::isfinite(options.target_accuracy)) {
    specs.push_back({"time_to_target_s", "time to target accuracy", "s", Better::Lower,
                     [](F f) { return f.to_target.seconds; }});
    specs.push_back({"steps_to_target", "steps to target accuracy", "steps", Better::Lower,
                     [](F f) { return f.to_target.step >= 0 ? double(f.to_target.step) : kNaN; }});
  }
  return specs;
}

int best_of(const std::vector<double>& values, Better better) {
  if (better == Better::Neither) return -1;
  int best = -1, known = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) continue;
    ++known;
    const bool wins = best < 0 || (better == Better::Lower ? values[i] < values[std::size_t(best)]
                                                           : values[i] > values[std::size_t(best)]);
    if (wins) best = int(i);
  }
  if (known < 2) return -1;
  const auto ties = std::count(values.begin(), values.end(), values[std::size_t(best)]);
  return ties > 1 ? -1 : best;
}

std::vector<CompareRow> metric_rows(const std::vector<RunFigures>& runs, const CompareOptions& options) {
  std::vector<CompareRow> rows;
  // Beside a prediction no run is better: the ratios say how far the prediction was.
  const bool prediction = std::any_of(runs.begin(), runs.end(), [](const RunFigures& f) { return f.summary.run.predicted(); });
  for (const MetricSpec& spec : metric_specs(options)) {
    CompareRow row{spec.key, spec.label, spec.unit, spec.better, {}, -1};
    for (const RunFigures& f : runs) row.values.push_back(spec.value(f));
    const bool any = std::any_of(row.values.begin(), row.values.end(), [](double v) { return std::isfinite(v); });
    if (!any) continue;  // applies to none of these runs
    row.best = prediction ? -1 : best_of(row.values, spec.better);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<PhaseRow> phase_rows(const std::vector<RunFigures>& runs) {
  std::set<PhaseKey> keys;
  for (const RunFigures& f : runs)
    for (const auto& [key, samples] : f.phases) keys.insert(key);
  std::vector<PhaseRow> rows;
  for (const PhaseKey& key : keys) {
    PhaseRow row{key.first, key.second.name, {}, {}};
    for (const RunFigures& f : runs) {
      auto it = f.phases.find(key);
      row.median_ms.push_back(it == f.phases.end() ? kNaN : median(it->second));
      row.samples.push_back(it == f.phases.end() ? 0 : std::int64_t(it->second.size()));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

ComparedRun compared_run(const RunFigures& f) {
  return {f.summary.run.id, f.summary.run.name, f.summary.run.status, run_mode(f.summary.run), f.summary.world_size,
          f.summary.steps, f.summary.devices};
}

Status check_run_ids(const std::vector<std::int64_t>& ids) {
  if (ids.size() < std::size_t(kMinCompared) || ids.size() > std::size_t(kMaxCompared)) {
    return make_error(ErrorCode::InvalidArgument,
                      "compare needs 2 to 6 runs, got " + std::to_string(ids.size()),
                      "name the runs by id: loom-cli compare 3 4");
  }
  std::set<std::int64_t> seen;
  for (std::int64_t id : ids) {
    if (!seen.insert(id).second) {
      return make_error(ErrorCode::InvalidArgument, "run " + std::to_string(id) + " is named twice");
    }
  }
  return {};
}

}  // namespace

Expected<StepRange> parse_step_range(const std::string& text) {
  const auto colon = text.find(':');
  auto bad = [&] {
    return make_error(ErrorCode::InvalidArgument, "--steps: '" + text + "' is not a step range",
                      "write FROM:TO (steps FROM to TO-1), FROM: or :TO, e.g. --steps 10:50");
  };
  if (colon == std::string::npos) return bad();
  StepRange r;
  auto number = [](const std::string& s, std::int64_t& out) {
    if (s.empty()) return true;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (*end != '\0' || v < 0) return false;
    out = v;
    return true;
  };
  if (!number(text.substr(0, colon), r.from) || !number(text.substr(colon + 1), r.to) || r.from >= r.to) return bad();
  return r;
}

StepTimes step_times(const std::vector<std::vector<Event>>& step_spans_by_rank, const StepRange& range) {
  std::map<std::int32_t, std::int64_t> longest;  // step -> ns
  for (const auto& spans : step_spans_by_rank) {
    const std::set<std::int32_t> steady = steady_steps(spans, range);
    for (const Event& e : spans) {
      if (e.kind != EventKind::Step || !steady.count(e.step)) continue;
      longest[e.step] = std::max(longest[e.step], e.end_ns - e.start_ns);
    }
  }
  std::vector<double> ms;
  for (const auto& [step, ns] : longest) ms.push_back(double(ns) / kNsPerMs);
  StepTimes t;
  t.steps = std::int64_t(ms.size());
  t.median_ms = median(ms);
  t.p95_ms = percentile(ms, 95);
  return t;
}

Efficiency pop_efficiency(const std::vector<RankBreakdown>& ranks) {
  double sum = 0, max_useful = 0, runtime = 0;
  int n = 0;
  for (const RankBreakdown& r : ranks) {
    if (r.steady_steps <= 0) continue;
    const double useful = r.compute_s + r.optimizer_s + r.data_s;
    sum += useful;
    max_useful = std::max(max_useful, useful);
    runtime = std::max(runtime, r.window_s);
    ++n;
  }
  Efficiency e;
  if (n == 0 || max_useful <= 0 || runtime <= 0) return e;
  e.load_balance = sum / n / max_useful;
  e.communication_efficiency = max_useful / runtime;
  e.parallel_efficiency = sum / n / runtime;
  return e;
}

nlohmann::json efficiency_to_json(const Efficiency& e) {
  return {{"load_balance", number_or_null(e.load_balance)},
          {"communication_efficiency", number_or_null(e.communication_efficiency)},
          {"parallel_efficiency", number_or_null(e.parallel_efficiency)}};
}

TimeToAccuracy time_to_accuracy(const std::vector<trace::MetricRecord>& accuracy, std::int64_t first_step_start_ns,
                                double target) {
  TimeToAccuracy t;
  const trace::MetricRecord* first = nullptr;
  for (const trace::MetricRecord& m : accuracy) {
    if (m.rank != 0 || m.value < target) continue;
    if (!first || m.t_ns < first->t_ns) first = &m;
  }
  if (!first) return t;
  t.seconds = double(first->t_ns - first_step_start_ns) / 1e9;
  t.step = first->step;
  return t;
}

Expected<Comparison> compare_runs(store::RunStore& store, const std::vector<std::int64_t>& run_ids,
                                  const CompareOptions& options) {
  LOOM_TRY(check_run_ids(run_ids));
  // Runs are read in parallel, each on its own connection (SQLite readers do not block one
  // another): reading a million events is most of the time.
  std::vector<std::future<Expected<RunFigures>>> pending;
  for (std::int64_t id : run_ids) {
    pending.push_back(std::async(std::launch::async, [path = store.path(), id, options]() -> Expected<RunFigures> {
      auto own = store::RunStore::open(path);
      if (!own.ok()) return own.error();
      return figures_of_run(*own, id, options);
    }));
  }
  std::vector<RunFigures> runs;
  for (auto& p : pending) {
    auto f = p.get();
    if (!f.ok()) return f.error();
    runs.push_back(std::move(f).value());
  }
  Comparison c;
  c.options = options;
  for (const RunFigures& f : runs) c.runs.push_back(compared_run(f));
  c.metrics = metric_rows(runs, options);
  c.phases = phase_rows(runs);
  return c;
}

namespace {

nlohmann::json numbers(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(number_or_null(x));
  return a;
}

nlohmann::json against_baseline(const std::vector<double>& v, bool ratio) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) {
    const double base = v.empty() ? kNaN : v[0];
    a.push_back(number_or_null(ratio ? (base != 0 ? x / base : kNaN) : x - base));
  }
  return a;
}

const char* better_name(Better b) { return b == Better::Lower ? "lower" : b == Better::Higher ? "higher" : nullptr; }

}  // namespace

nlohmann::json comparison_to_json(const Comparison& c) {
  nlohmann::json j;
  const StepRange& r = c.options.steps;
  j["steps"] = {{"from", r.from},
                {"to", r.to == std::numeric_limits<std::int64_t>::max() ? nlohmann::json() : nlohmann::json(r.to)}};
  j["target_accuracy"] = number_or_null(c.options.target_accuracy);
  j["runs"] = nlohmann::json::array();
  for (const ComparedRun& run : c.runs) {
    j["runs"].push_back({{"id", run.id}, {"name", run.name}, {"status", trace::to_text(run.status)}, {"mode", run.mode},
                         {"world_size", run.world_size}, {"steps", run.steps}, {"device", devices_short(run.devices)},
                         {"devices", devices_json(run.devices)}});
  }
  j["metrics"] = nlohmann::json::array();
  for (const CompareRow& row : c.metrics) {
    const char* better = better_name(row.better);
    j["metrics"].push_back({{"key", row.key}, {"label", row.label}, {"unit", row.unit},
                            {"better", better ? nlohmann::json(better) : nlohmann::json()},
                            {"values", numbers(row.values)}, {"ratio", against_baseline(row.values, true)},
                            {"delta", against_baseline(row.values, false)},
                            {"best", row.best >= 0 ? nlohmann::json(row.best) : nlohmann::json()}});
  }
  j["phases"] = nlohmann::json::array();
  for (const PhaseRow& row : c.phases) {
    j["phases"].push_back({{"role", row.role}, {"phase", row.phase}, {"median_ms", numbers(row.median_ms)},
                           {"delta_ms", against_baseline(row.median_ms, false)}, {"samples", row.samples}});
  }
  return j;
}

std::vector<StepTimeDelta> step_time_split(const Comparison& c) {
  auto row_of = [&](std::string_view key) -> const CompareRow* {
    for (const CompareRow& row : c.metrics)
      if (row.key == key) return &row;
    return nullptr;
  };
  std::vector<StepTimeDelta> out;
  const CompareRow* path = row_of("path_ms");
  if (!path) return out;
  auto value = [&](std::string_view key, std::size_t run) {
    const CompareRow* row = row_of(key);
    return row ? row->values[run] : kNaN;
  };
  // A run with no bubble figure counts none; the path's work less its pipeline fill and
  // drain is the compute the path could not do without.
  auto bubble = [&](std::size_t run) {
    const double b = value("path_bubble_ms", run);
    return std::isfinite(b) ? b : 0.0;
  };
  auto compute = [&](std::size_t run) { return value("path_work_ms", run) - bubble(run); };
  for (std::size_t i = 1; i < path->values.size(); ++i) {
    StepTimeDelta d;
    d.run = int(i);
    d.total_ms = path->values[i] - path->values[0];
    if (!std::isfinite(d.total_ms)) continue;
    auto add = [&](const char* name, double v) {
      if (std::isfinite(v)) d.parts.emplace_back(name, v);
    };
    add("compute", compute(i) - compute(0));
    add("exposed communication", value("path_comm_ms", i) - value("path_comm_ms", 0));
    add("waiting for late ranks", value("path_waiting_ms", i) - value("path_waiting_ms", 0));
    if (row_of("path_bubble_ms") && (bubble(i) != 0.0 || bubble(0) != 0.0)) add("pipeline bubble", bubble(i) - bubble(0));
    add("descheduled", value("path_descheduled_ms", i) - value("path_descheduled_ms", 0));
    add("untraced", value("path_untraced_ms", i) - value("path_untraced_ms", 0));
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace loom::analysis
