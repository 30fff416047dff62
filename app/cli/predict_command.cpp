// `loom-cli predict PLAN [--db PATH] [--json]`: one steady step of the plan as the
// calibration from this machine's stored runs predicts it (loom/predict), before it runs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "predict_common.h"
#include "loom/analysis/analysis.h"
#include "loom/analysis/stats.h"
#include "loom/predict/against_run.h"
#include "loom/predict/host_links.h"
#include "loom/predict/layouts.h"
#include "loom/predict/serving_prediction.h"
#include "loom/predict/predictor.h"
#include "loom/predict/stored_prediction.h"
#include "loom/trace/machine.h"

namespace loom::cli {

namespace {

using predict::Prediction;
using predict::PredictedSpan;
using trace::EventKind;

// Per rank: the time it computes, waits for gradients, idles in the pipeline, is delayed.
struct RankShares {
  double compute = 0, wait = 0, idle = 0, injected = 0, communication = 0, end = 0;
};

std::map<int, RankShares> shares_of(const Prediction& p) {
  std::map<int, RankShares> by_rank;
  for (const PredictedSpan& s : p.spans) {
    RankShares& r = by_rank[s.rank];
    const double ms = (s.end_ms - s.start_ms) / std::max(1, p.cycle_steps);  // per step
    if (s.kind == EventKind::Wait) r.wait += ms;
    else if (s.kind == EventKind::Idle) r.idle += ms;
    else if (s.kind == EventKind::InjectedDelay) r.injected += ms;
    else if (trace::is_communication(s.kind)) r.communication += ms;
    else r.compute += ms;
    if (s.stream == trace::Stream::Compute) r.end = std::max(r.end, s.end_ms);
  }
  return by_rank;
}

std::string where_text(const Plan& plan, const predict::Calibration& cal, const predict::MachineShape& machine,
                       const Prediction& p) {
  char text[512];
  // A plan on hosts whose links runs learnt is predicted on them (the note says how).
  const auto learnt = machine.cluster ? std::nullopt : predict::cluster_of_plan_hosts(plan, cal.links, cal.host, nullptr);
  if (learnt)
    std::snprintf(text, sizeof text, "hosts %s: %d x %d rank%s like this machine's, %d BLAS thread%s per rank",
                  learnt->name.c_str(), learnt->hosts, learnt->devices_per_host, learnt->devices_per_host == 1 ? "" : "s",
                  p.threads_per_rank, p.threads_per_rank == 1 ? "" : "s");
  else if (!machine.cluster && p.device.starts_with("gpu "))
    std::snprintf(text, sizeof text, "this machine's GPU, %s", p.device.substr(4).c_str());
  else if (!machine.cluster)
    std::snprintf(text, sizeof text, "this machine: %d cores, %d BLAS thread%s per rank", machine.cores, p.threads_per_rank,
                  p.threads_per_rank == 1 ? "" : "s");
  else
    std::snprintf(text, sizeof text, "cluster '%s': %d host%s x %d %s", machine.cluster->name.c_str(), machine.cluster->hosts,
                  machine.cluster->hosts == 1 ? "" : "s", machine.cluster->devices_per_host,
                  machine.cluster->device.calibrated ? "ranks like this machine's" : machine.cluster->device.name.c_str());
  return text;
}

void print_memory(const Prediction& p) {
  std::printf("\n  rank   memory at peak: parameters   gradients   optimizer   activations   workspace       total\n");
  const std::size_t shown = std::min<std::size_t>(p.memory.size(), 16);
  for (std::size_t rank = 0; rank < shown; ++rank) {
    const predict::RankMemory& m = p.memory[rank];
    std::printf("  %4zu   %26s %11s %11s %13s %11s %11s\n", rank, format_bytes(m.parameters).c_str(), format_bytes(m.gradients).c_str(),
                format_bytes(m.optimizer_state).c_str(), format_bytes(m.activations).c_str(), format_bytes(m.workspace).c_str(),
                format_bytes(m.total()).c_str());
  }
  if (shown < p.memory.size()) std::printf("  ... %zu more ranks (--json lists every one)\n", p.memory.size() - shown);
}

// The simulated updates' staleness, overall and per worker, and how many had each value.
void print_staleness(const Prediction& p) {
  const analysis::StalenessStats& st = p.staleness;
  if (!st.present) return;
  const char* unit = st.bound >= 0 ? "clocks" : "updates";
  std::printf("  staleness:   mean %.2f, p50 %.0f, p95 %.0f, max %lld %s", st.mean, st.p50, st.p95, static_cast<long long>(st.max), unit);
  if (st.bound >= 0) std::printf(" (bound %d)", st.bound);
  std::printf("\n               ");
  for (std::size_t v = 0; v < p.staleness_counts.size(); ++v)
    std::printf("%s%zu: %lld", v ? ", " : "", v, static_cast<long long>(p.staleness_counts[v]));
  std::printf(" updates\n");
  for (const analysis::WorkerStaleness& w : st.workers)
    std::printf("    worker %d: mean %.2f, p95 %.0f, max %lld, waited %.3f s\n", w.rank, w.mean, w.p95, static_cast<long long>(w.max), w.wait_s);
}

// What this machine measured for the plan's own configuration, where it was run (not for
// a cluster): its runs' steps, sorted. Empty where none.
std::vector<double> measured_steps(const Plan& plan, const Prediction& p, const predict::Calibration& cal,
                                   const predict::MachineShape& machine) {
  if (machine.cluster) return {};
  const auto it = cal.steps_by_configuration.find(predict::configuration_of(plan, p.threads_per_rank));
  if (it == cal.steps_by_configuration.end()) return {};
  std::vector<double> steps = it->second;
  std::sort(steps.begin(), steps.end());
  return steps;
}

// The machine's own spread beside the prediction: a prediction cannot be closer to the
// next run than the runs are to each other.
void print_measured(const std::vector<double>& steps) {
  if (steps.empty()) return;
  const std::size_t n = steps.size();
  if (n == 1) {
    std::printf("  measured:    this configuration's one run: %.3f ms a step\n", steps[0]);
    return;
  }
  std::printf("  measured:    this configuration's %zu runs: %.3f to %.3f ms a step (median %.3f)\n", n, steps.front(),
              steps.back(), analysis::median(steps));
}

void print_text(const Plan& plan, const Prediction& p, const predict::Calibration& cal, const predict::MachineShape& machine) {
  std::printf("prediction for '%s' on %s\n", plan.name.c_str(), where_text(plan, cal, machine, p).c_str());
  std::printf("  step time:   %.3f ms (one steady step", p.step_ms);
  if (p.cycle_steps > 1) std::printf("; a period of %d steps takes %.3f ms", p.cycle_steps, p.cycle_ms);
  std::printf(")\n  throughput:  %.0f samples/s (global batch %lld)\n", p.samples_per_s, static_cast<long long>(plan.training.batch));
  print_staleness(p);
  std::printf("  calibrated:  from %s (%zu costs)\n", predict::runs_text(cal.runs).c_str(), cal.costs.size());
  print_measured(measured_steps(plan, p, cal, machine));
  std::printf("\n  rank   compute ms   waiting for gradients   pipeline idle   injected   comm (overlapping)\n");
  int shown = 0;
  const auto shares = shares_of(p);
  for (const auto& [rank, r] : shares) {
    if (++shown > 16) break;
    std::printf("  %4d   %10.3f   %21.3f   %13.3f   %8.3f   %18.3f\n", rank, r.compute, r.wait, r.idle, r.injected, r.communication);
  }
  if (shares.size() > 16) std::printf("  ... %zu more ranks\n", shares.size() - 16);
  print_memory(p);
  for (const std::string& note : predict::grouped_notes(p.notes)) std::printf("  note: %s\n", note.c_str());
}

nlohmann::json to_json(const Plan& plan, const Prediction& p, const predict::Calibration& cal) {
  const std::vector<std::string> names = analysis::layer_names_by_id(plan_to_json(plan));
  nlohmann::json spans = nlohmann::json::array();
  for (const PredictedSpan& s : p.spans) {
    nlohmann::json j = {{"rank", s.rank},         {"kind", trace::event_kind_name(s.kind)},
                        {"stream", trace::stream_name(s.stream)}, {"start_ms", s.start_ms},
                        {"end_ms", s.end_ms}};
    if (s.layer >= 0) j["layer"] = std::size_t(s.layer) < names.size() ? names[std::size_t(s.layer)] : std::to_string(s.layer);
    if (s.microbatch >= 0) j["microbatch"] = s.microbatch;
    if (s.bytes > 0) j["bytes"] = s.bytes;
    if (p.cycle_steps > 1) j["step"] = s.step;
    spans.push_back(std::move(j));
  }
  nlohmann::json memory = nlohmann::json::array();
  for (const predict::RankMemory& m : p.memory)
    memory.push_back({{"parameters", m.parameters}, {"gradients", m.gradients}, {"optimizer_state", m.optimizer_state},
                      {"activations", m.activations}, {"workspace", m.workspace}, {"total", m.total()}});
  nlohmann::json out = {{"plan", plan.name},           {"step_ms", p.step_ms},        {"samples_per_s", p.samples_per_s}, {"memory", memory},
                        {"device", p.device}, {"threads_per_rank", p.threads_per_rank}, {"compute_stretch", p.stretch}, {"notes", p.notes},
                        {"calibration", {{"host", cal.host}, {"runs", cal.runs}, {"costs", cal.costs.size()}}},
                        {"cycle_steps", p.cycle_steps}, {"cycle_ms", p.cycle_ms}, {"spans", spans}};
  if (p.staleness.present) {
    nlohmann::json workers = nlohmann::json::array();
    for (const analysis::WorkerStaleness& w : p.staleness.workers)
      workers.push_back({{"rank", w.rank}, {"updates", w.updates}, {"mean", w.mean}, {"p50", w.p50}, {"p95", w.p95}, {"max", w.max}, {"wait_s", w.wait_s}});
    out["staleness"] = {{"mode", p.staleness.mode}, {"mean", p.staleness.mean}, {"p50", p.staleness.p50}, {"p95", p.staleness.p95},
                        {"max", p.staleness.max}, {"counts", p.staleness_counts}, {"workers", workers}};
    if (p.staleness.bound >= 0) out["staleness"]["bound"] = p.staleness.bound;
  }
  return out;
}

// The links between hosts runs across them measured (host_links.h).
void print_links(const std::vector<predict::HostLink>& links) {
  if (links.empty()) return;
  std::printf("\n  link between hosts (from each run's set-up)                     latency      bandwidth   from\n");
  for (const predict::HostLink& h : links) {
    std::printf("  %-60s %8.0f us %9.4g GB/s   %s\n", (h.first + " <-> " + h.second).c_str(), h.link.latency_us,
                h.link.bandwidth_gbs, predict::runs_text(h.runs).c_str());
    if (h.shared_cores > 0)
      std::printf("    one machine's two namespaces (their ranks ran on one kernel): their ranks share its %d core%s\n",
                  h.shared_cores, h.shared_cores == 1 ? "" : "s");
  }
}

void print_costs(const predict::Calibration& cal) {
  std::printf("calibration of host '%s' from %s: the median ms measured at each size\n", cal.host.c_str(),
              predict::runs_text(cal.runs).c_str());
  std::printf("  %-60s %8s  %s\n", "cost (units: samples, parameters or bytes)", "spans", "units: ms");
  for (const auto& [key, c] : cal.costs) {
    std::printf("  %-60s %8lld  %s\n", key.c_str(), static_cast<long long>(c.observations), predict::points_text(c).c_str());
  }
  if (!cal.by_configuration.empty())
    std::printf("  and %zu configuration%s measured: each is predicted from its own runs' costs first\n",
                cal.by_configuration.size(), cal.by_configuration.size() == 1 ? "" : "s");
  print_links(cal.links);
  if (cal.contended_share)
    std::printf("\n  crowded parameter server's share of the free cores: %.2f, fitted to the staleness of %s\n",
                *cal.contended_share, predict::runs_text(cal.share_runs).c_str());
}

nlohmann::json costs_json(const predict::Calibration& cal) {
  nlohmann::json costs = nlohmann::json::object();
  for (const auto& [key, c] : cal.costs)
    costs[key] = {{"points", c.points}, {"spans", c.observations}};
  nlohmann::json configurations = nlohmann::json::array();
  for (const auto& [configuration, own] : cal.by_configuration) configurations.push_back(configuration);
  nlohmann::json links = nlohmann::json::array();
  for (const predict::HostLink& h : cal.links)
    links.push_back({{"hosts", {h.first, h.second}}, {"latency_us", h.link.latency_us}, {"bandwidth_gbs", h.link.bandwidth_gbs},
                     {"runs", h.runs}, {"shared_cores", h.shared_cores}});
  nlohmann::json out = {{"host", cal.host}, {"runs", cal.runs}, {"costs", costs}, {"configurations", configurations}, {"links", links}};
  if (cal.contended_share) out["contended_share"] = {{"share", *cal.contended_share}, {"runs", cal.share_runs}};
  return out;
}

double error_percent(double predicted, double measured) {
  return measured > 0 ? 100.0 * (predicted / measured - 1.0) : std::nan("");
}

void print_against(std::int64_t run_id, const predict::AgainstRun& a) {
  std::printf("\nagainst run %lld (%lld steady steps): step predicted %.3f ms, measured %.3f ms (%+.1f%%)\n",
              static_cast<long long>(run_id), static_cast<long long>(a.steady_steps), a.predicted_step_ms, a.measured_step_ms,
              error_percent(a.predicted_step_ms, a.measured_step_ms));
  std::printf("  rank  %-16s %12s %12s %8s   (ms per step; measured: median over steady steps)\n", "kind", "predicted",
              "measured", "error");
  for (const predict::KindAgainstRun& k : a.kinds) {
    const double e = error_percent(k.predicted_ms, k.measured_ms);
    char error[16] = "-";
    if (std::isfinite(e)) std::snprintf(error, sizeof error, "%+.0f%%", e);
    std::printf("  %4d  %-16s %12.3f %12.3f %8s\n", k.rank, std::string(trace::event_kind_name(k.kind)).c_str(), k.predicted_ms,
                k.measured_ms, error);
  }
}

void print_memory_against(const predict::AgainstRun& a) {
  std::printf("\n  rank  memory at peak: %12s %12s %8s   of it weights, gradients, optimizer state / the rest\n", "predicted",
              "measured", "error");
  for (const predict::MemoryAgainstRun& m : a.memory) {
    if (m.measured_total < 0) {
      std::printf("  %4d  %28s %12s %8s   (the run recorded no memory)\n", m.rank, format_bytes(m.predicted_total).c_str(), "-", "-");
      continue;
    }
    std::printf("  %4d  %28s %12s %+7.1f%%   %s / %s predicted, %s / %s measured\n", m.rank, format_bytes(m.predicted_total).c_str(),
                format_bytes(m.measured_total).c_str(), error_percent(double(m.predicted_total), double(m.measured_total)),
                format_bytes(m.predicted_weights).c_str(), format_bytes(m.predicted_rest).c_str(),
                format_bytes(m.measured_weights).c_str(), format_bytes(m.measured_rest).c_str());
  }
}

nlohmann::json against_json(std::int64_t run_id, const predict::AgainstRun& a) {
  nlohmann::json kinds = nlohmann::json::array();
  for (const predict::KindAgainstRun& k : a.kinds)
    kinds.push_back({{"rank", k.rank}, {"kind", trace::event_kind_name(k.kind)}, {"predicted_ms", k.predicted_ms},
                     {"measured_ms", k.measured_ms}});
  nlohmann::json memory = nlohmann::json::array();
  for (const predict::MemoryAgainstRun& m : a.memory)
    memory.push_back({{"rank", m.rank}, {"predicted_bytes", m.predicted_total}, {"measured_bytes", m.measured_total},
                      {"predicted_weights_bytes", m.predicted_weights}, {"measured_weights_bytes", m.measured_weights},
                      {"predicted_rest_bytes", m.predicted_rest}, {"measured_rest_bytes", m.measured_rest}});
  return {{"run", run_id}, {"steady_steps", a.steady_steps}, {"predicted_step_ms", a.predicted_step_ms},
          {"measured_step_ms", a.measured_step_ms}, {"kinds", kinds}, {"memory", memory}};
}

}  // namespace

std::optional<Calibrated> open_calibrated(const Args& args) {
  auto store = open_store(args);
  if (!store.ok()) {
    print_error(store.error());
    return std::nullopt;
  }
  auto calibration = predict::calibrate(*store, machine::host_name());
  if (!calibration.ok()) {
    print_error(calibration.error());
    return std::nullopt;
  }
  return Calibrated{std::move(*store), std::move(*calibration)};
}

bool read_cluster(const Args& args, std::optional<predict::Cluster>& cluster) {
  if (!args.cluster) return true;
  auto c = predict::load_cluster(*args.cluster);
  if (!c.ok()) {
    print_error(c.error());
    return false;
  }
  cluster = std::move(*c);
  return true;
}

int prediction_failed(const Error& error) {
  print_error(error);
  return error.code == ErrorCode::NotFound || error.code == ErrorCode::Io || error.code == ErrorCode::Internal ? kFailed
                                                                                                             : kInvalidInput;
}

namespace {

// The plan with `replicas` data-parallel replicas, its stages and global batch kept.
bool relay(Plan& plan, int replicas) {
  const ParallelSpec& p = plan.parallel;
  auto laid = predict::with_layout(plan, {replicas, std::max(1, p.stages), std::max(1, p.microbatches), p.schedule, p.bucket_mb});
  if (!laid.ok()) {
    print_error(laid.error());
    return false;
  }
  plan = std::move(*laid);
  return true;
}

nlohmann::json percentiles_json(const analysis::Percentiles& p) {
  return {{"p50", p.p50}, {"p95", p.p95}, {"p99", p.p99}, {"max", p.max}, {"mean", p.mean}};
}

// A serving plan: the simulated server and, with --against, the run's measured figures.
int print_serving(const Plan& plan, const predict::ServingPrediction& p, const std::optional<analysis::ServingStats>& measured,
                  const Args& args) {
  if (args.json) {
    nlohmann::json j = {{"plan", plan.name}, {"latency_ms", percentiles_json(p.latency_ms)},
                        {"queue_wait_ms", percentiles_json(p.queue_wait_ms)}, {"requests", p.requests},
                        {"batches", p.batches}, {"mean_batch", p.mean_batch}, {"batch_compute_ms", p.batch_compute_ms},
                        {"busy_fraction", p.busy_fraction}, {"throughput_per_s", p.throughput_per_s}, {"notes", p.notes}};
    if (measured)
      j["against"] = {{"latency_ms", percentiles_json(measured->latency_ms)}, {"mean_batch", measured->mean_batch},
                      {"busy_fraction", measured->busy_fraction}, {"batch_compute_ms", measured->batch_compute_ms}};
    std::printf("%s\n", j.dump().c_str());
    return kOk;
  }
  const ServeSpec& s = *plan.serve;
  std::printf("serving prediction for '%s': %lld requests at %.0f/s (%s), max batch %lld, timeout %.1f ms, server %d BLAS thread%s\n",
              plan.name.c_str(), static_cast<long long>(p.requests), s.rate, std::string(arrivals_name(s.arrivals)).c_str(),
              static_cast<long long>(s.max_batch), s.timeout_ms, p.threads, p.threads == 1 ? "" : "s");
  std::printf("  %-22s %10s %10s %10s\n", "", "p50", "p95", "p99");
  std::printf("  %-22s %10.2f %10.2f %10.2f   ms\n", "latency, predicted", p.latency_ms.p50, p.latency_ms.p95, p.latency_ms.p99);
  if (measured)
    std::printf("  %-22s %10.2f %10.2f %10.2f   ms  (%+.0f%%, %+.0f%%, %+.0f%%)\n", "latency, measured", measured->latency_ms.p50,
                measured->latency_ms.p95, measured->latency_ms.p99, error_percent(p.latency_ms.p50, measured->latency_ms.p50),
                error_percent(p.latency_ms.p95, measured->latency_ms.p95), error_percent(p.latency_ms.p99, measured->latency_ms.p99));
  std::printf("  mean batch %.2f, %.3f ms a batch, server busy %.0f%%, %.0f requests/s\n", p.mean_batch, p.batch_compute_ms,
              100 * p.busy_fraction, p.throughput_per_s);
  if (measured)
    std::printf("  measured: mean batch %.2f, %.3f ms a batch, server busy %.0f%%\n", measured->mean_batch,
                measured->batch_compute_ms, 100 * measured->busy_fraction);
  for (const std::string& note : predict::grouped_notes(p.notes)) std::printf("  note: %s\n", note.c_str());
  return kOk;
}

int predict_serving_plan(const Plan& plan, Calibrated& opened, const predict::MachineShape& machine, const Args& args) {
  auto p = predict::predict_serving(plan, opened.calibration, machine);
  if (!p.ok()) return prediction_failed(p.error());
  std::optional<analysis::ServingStats> measured;
  if (args.against) {
    Args id_args;
    id_args.positional = {*args.against};
    const auto id = parse_run_id(id_args);
    auto run = id ? opened.store.load_run(*id) : Expected<trace::RunRecord>(make_error(ErrorCode::InvalidArgument, "--against needs a run id"));
    if (!run.ok()) return prediction_failed(run.error());
    auto metrics = opened.store.load_metrics(*id);
    PlanResult run_plan = parse_plan(run->plan_json);
    if (!metrics.ok() || !run_plan.ok() || !(measured = analysis::serving_stats(*run_plan.plan, *metrics)))
      return prediction_failed(make_error(ErrorCode::InvalidArgument, "run " + *args.against + " is not a serving run"));
  }
  return print_serving(plan, *p, measured, args);
}

int print_scaling(const Plan& plan, const predict::Calibration& calibration, const predict::MachineShape& machine, const Args& args) {
  auto curve = predict::scaling_curve(plan, calibration, machine, args.scale);
  if (!curve.ok()) return prediction_failed(curve.error());
  if (args.json) {
    nlohmann::json points = nlohmann::json::array();
    for (const predict::ScalePoint& p : *curve)
      points.push_back({{"devices", p.devices}, {"step_ms", p.step_ms}, {"samples_per_s", p.samples_per_s}, {"efficiency", p.efficiency}});
    std::printf("%s\n", nlohmann::json{{"plan", plan.name}, {"scaling", points}}.dump().c_str());
    return kOk;
  }
  std::printf("scaling of '%s' (each replica keeps a batch of %lld; predicted)\n", plan.name.c_str(),
              static_cast<long long>(plan.training.batch / std::max(1, plan.parallel.data_parallel)));
  std::printf("  %8s %12s %14s %11s\n", "devices", "step ms", "samples/s", "efficiency");
  for (const predict::ScalePoint& p : *curve)
    std::printf("  %8d %12.3f %14.0f %10.0f%%\n", p.devices, p.step_ms, p.samples_per_s, 100 * p.efficiency);
  return kOk;
}

}  // namespace

// Tags every run the calibration was taken from, keeping each run's other tags.
int reset_calibration(store::RunStore& store, const predict::Calibration& calibration, bool json) {
  if (Status tagged = predict::stop_calibrating(store, calibration.runs); !tagged.ok()) {
    print_error(tagged.error());
    return kFailed;
  }
  if (json) {
    std::printf("%s\n", nlohmann::json({{"reset", calibration.runs}}).dump().c_str());
  } else {
    std::printf("%zu run%s no longer calibrate (tagged \"%s\"; they stay in the store; `loom-cli tag RUN --clear` "
                "brings one back)\n",
                calibration.runs.size(), calibration.runs.size() == 1 ? "" : "s", predict::kNotCalibratingTag);
  }
  return kOk;
}

int cmd_calibration(const Args& args) {
  auto opened = open_calibrated(args);
  if (!opened) return kFailed;
  const predict::Calibration* calibration = &opened->calibration;
  if (args.reset) return reset_calibration(opened->store, *calibration, args.json);
  if (args.json) {
    std::printf("%s\n", costs_json(*calibration).dump().c_str());
  } else {
    print_costs(*calibration);
  }
  return kOk;
}

int cmd_predict(const Args& args) {
  auto plan = read_plan_argument(args, true);
  if (!plan) return kInvalidInput;
  std::optional<predict::Cluster> cluster;
  if (!read_cluster(args, cluster)) return kInvalidInput;
  if (args.replicas > 0 && !relay(*plan, args.replicas)) return kInvalidInput;
  auto opened = open_calibrated(args);
  if (!opened) return kFailed;
  store::RunStore* store = &opened->store;
  const predict::Calibration* calibration = &opened->calibration;
  const predict::MachineShape machine{machine::cores_available(), cluster ? &*cluster : nullptr};
  if (plan->serve) return predict_serving_plan(*plan, *opened, machine, args);
  if (args.scale > 0) return print_scaling(*plan, *calibration, machine, args);
  auto prediction = predict::predict_step(*plan, *calibration, machine);
  if (!prediction.ok()) return prediction_failed(prediction.error());
  std::optional<predict::AgainstRun> against;
  std::int64_t against_id = 0;
  if (args.against) {
    Args id_args;
    id_args.positional = {*args.against};
    const auto id = parse_run_id(id_args);
    if (!id) {
      std::fprintf(stderr, "loom-cli: --against needs a run id (a positive number; see `loom-cli runs`)\n");
      return kInvalidInput;
    }
    auto a = predict::against_run(*prediction, *store, *id);
    if (!a.ok()) {
      print_error(a.error());
      return a.error().code == ErrorCode::Internal || a.error().code == ErrorCode::Io ? kFailed : kInvalidInput;
    }
    against = std::move(*a);
    against_id = *id;
  }
  std::int64_t stored = 0;
  if (args.store_prediction) {
    auto id = predict::store_prediction(*store, *plan, *prediction, *calibration);
    if (!id.ok()) {
      print_error(id.error());
      return kFailed;
    }
    stored = *id;
  }
  if (args.json) {
    nlohmann::json j = to_json(*plan, *prediction, *calibration);
    if (const auto steps = measured_steps(*plan, *prediction, *calibration, machine); !steps.empty()) j["measured_steps_ms"] = steps;
    if (against) j["against"] = against_json(against_id, *against);
    if (stored) j["id"] = stored;
    std::printf("%s\n", j.dump().c_str());
  } else {
    print_text(*plan, *prediction, *calibration, machine);
    if (against) print_against(against_id, *against), print_memory_against(*against);
    if (stored)
      std::printf("\nstored as run %lld, kind predicted (`loom-cli compare %lld RUN_ID` puts it beside a measured run)\n",
                  static_cast<long long>(stored), static_cast<long long>(stored));
  }
  return kOk;
}

}  // namespace loom::cli
