// Calibration from stored runs (see calibration.h).
#include "loom/predict/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "loom/analysis/analysis.h"
#include "loom/analysis/import_kineto.h"
#include "loom/analysis/stats.h"

namespace loom::predict {

using trace::Event;
using trace::EventKind;

std::string sharing_suffix(double stretch) {
  if (stretch <= 1.0 + 1e-9) return {};
  char text[32];
  std::snprintf(text, sizeof text, " shared x%.2f", stretch);
  return text;
}

std::string unshared(const std::string& key) {
  const std::size_t at = key.find(" shared x");
  return at == std::string::npos ? key : key.substr(0, at);
}

double sharing_of(const std::string& key) {
  const std::size_t at = key.find(" shared x");
  return at == std::string::npos ? 1.0 : std::atof(key.c_str() + at + 9);
}

std::string device_tag(const DeviceSpec& device, int threads, const std::string& gpu_name, double stretch) {
  if (device.kind == DeviceKind::Gpu) return "gpu " + (gpu_name.empty() ? std::string("unknown") : gpu_name);
  return "cpu " + std::to_string(threads) + "t" + sharing_suffix(stretch);
}

std::map<std::string, double> stretch_by_host(const std::vector<trace::RankRecord>& ranks) {
  std::map<std::string, int> threads, cores;
  for (const trace::RankRecord& r : ranks) {
    threads[r.host] += r.device_info.kind == "cpu" ? std::max(1, r.device_info.blas_threads) : 0;
    cores[r.host] = std::max(cores[r.host], r.device_info.logical_cores);
  }
  std::map<std::string, double> stretch;
  for (const auto& [host, n] : threads) stretch[host] = std::max(1.0, double(n) / double(std::max(1, cores[host])));
  return stretch;
}

namespace {

// Kind and shapes; a convolution also its kernel (two with the same shapes but kernels 3
// and 5 cost 3.7 and 9 ms), which its weights give: out x in x k x k.
std::string signature(const LayerInfo& layer) {
  std::string text = std::string(layer_kind_name(layer.kind)) + " " + format_shape(layer.input) + "->" + format_shape(layer.output);
  if (layer.kind == LayerKind::Conv2d && !layer.input.empty() && !layer.output.empty()) {
    const double taps = double(layer.params - layer.bias_params) / double(layer.input.front() * layer.output.front());
    text += " k" + std::to_string(std::lround(std::sqrt(std::max(taps, 0.0))));
  }
  return text;
}

// The samples one forward or backward of one chunk processes: the global batch split over
// replicas, accumulation micro-steps and pipeline micro-batches.
double samples_per_chunk(const Plan& plan) {
  const ParallelSpec& p = plan.parallel;
  return double(plan.training.batch) / double(std::max(1, p.data_parallel) * std::max(1, p.grad_accumulation) *
                                              std::max(1, p.microbatches));
}

// Which runs calibrate: finished training runs of a Loom plan whose every rank
// said what it ran on; never a stored prediction (its spans are the predictor's own).
// Nor a run whose ranks ran on other machines than the one that started it (hostfile,
// Slurm, the simulated hosts): it measured those machines and the link between them, not
// this one. Two simulated hosts 1 Gb/s and 2 ms apart taught this machine's 802 KB
// all-reduce 13.9 ms, where on it alone it takes about 0.08, and the runs' residual the
// link's waits.
bool can_calibrate(const trace::RunRecord& run, const std::optional<Plan>& plan, const std::vector<trace::RankRecord>& ranks) {
  if (run.status != trace::RunStatus::Completed || run.predicted() || !plan || plan->serve) return false;
  if (ranks.empty()) return false;
  const std::string& here = run.host.empty() ? ranks.front().host : run.host;
  return std::all_of(ranks.begin(), ranks.end(), [&](const trace::RankRecord& r) {
    return r.device_info.recorded() && std::size_t(r.rank) < plan->parallel.devices.size() && r.host == here;
  });
}

// Spans of one run collected under their key and size before taking their typical time.
// A synchronous plan's compute span: its mean, scaled by its rank's median step over its
// mean step. A pipeline's bubble and a rank's breakdown count compute as a share of the
// window (sums of spans over sums of steps), and the predictor lays out the median step,
// so the cost that keeps each share at the median step is that scaled mean. The plain
// median dropped the spans a rank spent partly off its core: on hybrid 2x2 (four ranks
// on two cores) it put the bubble 4 to 8 points above the measured one; the plain mean,
// on a tiny plan whose few slow spans also made slow steps, put the step 11-14% above
// its median. Messages, collectives, a server's work and the asynchronous modes keep the
// median (a message's long spans are waits for a peer, which the predictor lays out).
struct Collector {
  std::map<std::pair<std::string, double>, std::vector<double>> spans;
  std::set<std::string> compute;  // keys observed by their scaled mean
  std::map<std::string, double> work;
  // (key, step, bucket index) -> (bytes, shortest span over the ranks)
  std::map<std::tuple<std::string, std::int32_t, int>, std::pair<std::int64_t, double>> buckets;
  void add(const std::string& key, double units, const Event& e, double scale = 1.0) {
    if (units > 0 && e.end_ns > e.start_ns) spans[{key, units}].push_back(scale * double(e.end_ns - e.start_ns) / 1e6);
  }
  // `scale`: the rank's median step over its mean step.
  void add_compute(const std::string& key, double units, const Event& e, double scale) {
    compute.insert(key);
    add(key, units, e, scale);
  }
  double typical(const std::string& key, const std::vector<double>& times) const {
    return compute.count(key) ? analysis::mean(times, 0.0) : analysis::median(times, 0.0);
  }
};

// A collective lasts from the first rank's arrival to the end: on every rank but the last
// to arrive its span includes waiting for the others. So a bucket's cost is its shortest
// span over the ranks (keyed by step and the bucket's place in the step). Where ranks
// outnumber cores (`crowded`) that wait is part of every collective (a rank waits for
// the others to get a core), so there it is the longest. A bucket that started before the
// previous one on its rank had finished waited in the communication thread's queue and is
// left out.
void add_allreduces(const std::vector<Event>& events, const std::string& key, bool crowded, Collector& c) {
  std::int64_t previous_end = 0;
  std::map<std::int32_t, int> index_in_step;
  for (const Event& e : events) {
    if (e.kind != EventKind::AllReduce || e.bytes <= 0) continue;
    const int index = index_in_step[e.step]++;
    const bool queued = e.start_ns < previous_end;
    previous_end = std::max(previous_end, e.end_ns);
    if (queued) continue;
    auto [it, fresh] = c.buckets.try_emplace({key, e.step, index}, e.bytes, double(e.end_ns - e.start_ns) / 1e6);
    const double ms = double(e.end_ns - e.start_ns) / 1e6;
    if (!fresh) it->second.second = crowded ? std::max(it->second.second, ms) : std::min(it->second.second, ms);
  }
}

// A parameter server's steady updates (one optimizer step on its shard per gradient),
// replies (a point-to-point message of its shard) and receives of pushed gradients; the
// first worker step is warm-up. A reply is a rendezvous: it lasts until its worker takes
// it, so most include waiting for a worker that was computing or off its core (on this
// project's VM, 2 workers and a server on 2 cores: 940 KB replies took 44 us at the least,
// 904 us at the median). The simulation waits for the workers itself, so a reply's cost is
// its shortest at each size: the transfer alone.
void add_server(const Plan& plan, const ModelInfo& model, const std::string& device, double stretch,
                const std::vector<Event>& events, Collector& c) {
  const double shard_params = double(model.total_params) / double(std::max(1, plan.parallel.sync.servers));
  std::map<std::int64_t, const Event*> shortest_reply;  // by bytes
  for (const Event& e : events) {
    if (e.step < 1) continue;
    if (e.kind == EventKind::Optimizer) c.add(optimizer_key(plan, device), shard_params, e);
    if (e.kind == EventKind::Recv && e.bytes > 0) c.add(push_receive_key(plan.parallel.backend, stretch), double(e.bytes), e);
    if (e.kind != EventKind::Send || e.bytes <= 0) continue;
    const Event*& shortest = shortest_reply[e.bytes];
    if (!shortest || e.end_ns - e.start_ns < shortest->end_ns - shortest->start_ns) shortest = &e;
  }
  for (const auto& [bytes, e] : shortest_reply) c.add(p2p_key(plan.parallel.backend, stretch), double(bytes), *e);
}

// A rank's median Step span over its mean one (1 without steps).
double median_over_mean_step(const std::vector<Event>& steady) {
  std::vector<double> steps;
  for (const Event& e : steady)
    if (e.kind == EventKind::Step && e.end_ns > e.start_ns) steps.push_back(double(e.end_ns - e.start_ns));
  const double mean = analysis::mean(steps, 0.0);
  return mean > 0 ? analysis::median(steps, 0.0) / mean : 1.0;
}

void add_rank(const Plan& plan, const ModelInfo& model, int rank, const std::string& device, double stretch,
              const std::vector<Event>& events, Collector& c) {
  if (rank_role(plan, rank).kind == RankKind::Server) return add_server(plan, model, device, stretch, events, c);
  std::int32_t first_step = INT32_MAX;
  for (const Event& e : events)
    if (e.kind == EventKind::Step) first_step = std::min(first_step, e.step);
  const double chunk = samples_per_chunk(plan);
  const int stage = std::max(0, rank_role(plan, rank).stage);
  const double stage_params = std::size_t(stage) < model.stage_params.size() ? double(model.stage_params[std::size_t(stage)]) : 0;
  std::vector<Event> steady;
  for (const Event& e : events)
    if (e.step > first_step) steady.push_back(e);  // kWarmupSteps = 1
  std::sort(steady.begin(), steady.end(), [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
  // The asynchronous modes' steps differ by design (a worker held at its bound, local
  // SGD's meeting every few steps), not by noise: their compute keeps the median.
  const bool asynchronous = parameter_server_mode(plan) ||
                            (plan.parallel.sync.mode == SyncMode::LocalSgd && plan.parallel.data_parallel > 1);
  const double scale = median_over_mean_step(steady);
  const auto compute = [&](const std::string& key, double units, const Event& e) {
    if (asynchronous)
      c.add(key, units, e);
    else
      c.add_compute(key, units, e, scale);
  };
  for (const Event& e : steady) {
    const bool layer = e.layer >= 0 && std::size_t(e.layer) < model.layers.size() && model.layers[std::size_t(e.layer)].id.valid();
    if (layer && (e.kind == EventKind::Forward || e.kind == EventKind::Backward)) {
      const LayerInfo& info = model.layers[std::size_t(e.layer)];
      const std::string key = e.kind == EventKind::Forward ? forward_key(info, device) : backward_key(info, device);
      c.work[key] = layer_work(info);
      compute(key, chunk, e);
    }
    if (e.kind == EventKind::Loss) compute(loss_key(plan, device), chunk, e);
    if (e.kind == EventKind::DataLoad && e.stream == trace::Stream::Compute) compute(data_key(plan), chunk, e);
    if (e.kind == EventKind::Optimizer) {
      const bool outer = e.message == trace::kOuterOptimizerStep;
      compute(outer ? outer_step_key(device) : optimizer_key(plan, device), stage_params, e);
    }
    if (e.kind == EventKind::Send && e.bytes > 0) c.add(p2p_key(plan.parallel.backend, stretch), double(e.bytes), e);
  }
  if (plan.parallel.data_parallel > 1)
    add_allreduces(steady, allreduce_key(plan.parallel.data_parallel, plan.parallel.backend, stretch), stretch > 1, c);
}

// Per steady step, the slowest rank's Step span; their median.
double median_step_ms(const std::vector<std::vector<Event>>& by_rank, std::int64_t* steps) {
  std::map<std::int32_t, double> slowest;
  std::int32_t first = INT32_MAX;
  for (const auto& events : by_rank)
    for (const Event& e : events)
      if (e.kind == EventKind::Step) first = std::min(first, e.step);
  for (const auto& events : by_rank)
    for (const Event& e : events)
      if (e.kind == EventKind::Step && e.step > first) slowest[e.step] = std::max(slowest[e.step], double(e.end_ns - e.start_ns) / 1e6);
  std::vector<double> v;
  for (const auto& [step, ms] : slowest) v.push_back(ms);
  *steps = std::int64_t(v.size());
  return analysis::median(v, 0.0);
}

// Layers by LayerId (the number events carry).
ModelInfo model_by_id(const Plan& plan) {
  ModelInfo model = infer_model(plan, nullptr);
  std::vector<LayerInfo> by_id;
  for (const LayerInfo& l : model.layers) {
    if (!l.id.valid()) continue;
    if (by_id.size() <= std::size_t(l.id.value)) by_id.resize(std::size_t(l.id.value) + 1);
    by_id[std::size_t(l.id.value)] = l;
  }
  model.layers = std::move(by_id);
  return model;
}

}  // namespace

double layer_work(const LayerInfo& layer) {
  double elements = 1;
  for (std::int64_t d : layer.output) elements *= double(d);
  return std::max(double(layer.forward_flops), elements);
}

std::string forward_key(const LayerInfo& layer, const std::string& device) { return "forward " + signature(layer) + " @" + device; }
std::string backward_key(const LayerInfo& layer, const std::string& device) { return "backward " + signature(layer) + " @" + device; }
std::string loss_key(const Plan& plan, const std::string& device) {
  return "loss softmax_cross_entropy " + std::to_string(dataset_classes(plan)) + " classes @" + device;
}
std::string optimizer_key(const Plan& plan, const std::string& device) {
  return "optimizer " + std::string(optimizer_name(plan.training.optimizer.kind)) + " @" + device;
}
std::string outer_step_key(const std::string& device) { return "local SGD outer step @" + device; }
std::string data_key(const Plan& plan) {
  return "data " + std::string(data_source_name(plan.data.source)) + " " + format_shape(plan.model.input);
}
std::string allreduce_key(int replicas, CommBackend backend, double stretch) {
  return "all-reduce " + std::to_string(replicas) + " ranks " + (backend == CommBackend::Nccl ? "nccl" : "mpi") + sharing_suffix(stretch);
}
std::string p2p_key(CommBackend backend, double stretch) {
  return std::string("send ") + (backend == CommBackend::Nccl ? "nccl" : "mpi") + sharing_suffix(stretch);
}
std::string push_receive_key(CommBackend backend, double stretch) {
  return std::string("receive push ") + (backend == CommBackend::Nccl ? "nccl" : "mpi") + sharing_suffix(stretch);
}
std::string residual_key(bool pipeline, const std::string& device) {
  return std::string("residual per step, ") + (pipeline ? "pipeline" : "one stage") + " @" + device;
}
bool parameter_server_mode(const Plan& plan) {
  return plan.parallel.sync.mode == SyncMode::ParameterServer || plan.parallel.sync.mode == SyncMode::Ssp;
}
std::string residual_key(const Plan& plan, const std::string& device) {
  if (parameter_server_mode(plan)) return "residual per step, parameter server @" + device;
  if (plan.parallel.sync.mode == SyncMode::LocalSgd && plan.parallel.data_parallel > 1) return "residual per step, local SGD @" + device;
  return residual_key(plan.parallel.stages > 1, device);
}

namespace {

// Text folded (FNV-1a) into 8 hex digits, so that a key naming a model stays one line.
std::string folded(const std::string& text) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : text) hash = (hash ^ std::uint8_t(c)) * 0x100000001b3ull;
  char out[32];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash));
  return std::string(out).substr(0, 8);
}

std::string layer_signatures(const ModelInfo& model) {
  std::string text;
  for (const LayerInfo& l : model.layers) text += signature(l) + " stage " + std::to_string(l.stage) + ";";
  return text;
}

}  // namespace

std::string points_text(const LinearCost& cost) {
  std::string out;
  for (const auto& [units, ms] : cost.points) {
    char point[64];
    std::snprintf(point, sizeof point, "%.0f: %.4g", units, ms);
    out += (out.empty() ? "" : ", ") + std::string(point);
  }
  if (cost.probe_slope > 0) {
    char slope[96];
    std::snprintf(slope, sizeof slope, " (other sizes: + bytes / %.3g GB/s, the probe)", 1.0 / (cost.probe_slope * 1e6));
    out += slope;
  }
  return out;
}

Status stop_calibrating(store::RunStore& store, const std::vector<std::int64_t>& runs) {
  for (std::int64_t id : runs) {
    auto tags = store.load_tags(id);
    if (!tags.ok()) return tags.error();
    tags->push_back(kNotCalibratingTag);
    if (Status tagged = store.set_tags(id, *tags); !tagged.ok()) return tagged;
  }
  return {};
}

std::string runs_text(const std::vector<std::int64_t>& ids) {
  std::vector<std::int64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  if (sorted.empty()) return "no runs";
  std::string out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t last = i;
    while (last + 1 < sorted.size() && sorted[last + 1] == sorted[last] + 1) ++last;
    out += (out.empty() ? "" : ", ") + std::to_string(sorted[i]);
    if (last > i) out += (last == i + 1 ? ", " : "-") + std::to_string(sorted[last]);
    i = last + 1;
  }
  return (sorted.size() == 1 ? "run " : "runs ") + out;
}

std::string configuration_of(const Plan& plan, int threads_per_rank) {
  Plan decides;  // what sets the step's length: not the name, length, seed or learning rate
  decides.parallel = plan.parallel;
  decides.training.batch = plan.training.batch;
  decides.training.threads = plan.training.threads;
  const bool cpu = plan.parallel.devices.empty() || plan.parallel.devices.front().kind == DeviceKind::Cpu;
  if (decides.training.threads == 0 && cpu) decides.training.threads = threads_per_rank;
  decides.training.optimizer.kind = plan.training.optimizer.kind;
  decides.training.tf32 = plan.training.tf32;
  decides.data.source = plan.data.source;
  decides.data.synthetic = plan.data.synthetic;
  decides.data.features = plan.data.features;
  decides.data.classes = plan.data.classes;
  // Settings that change nothing a run does are left out, so a plan that differs from a
  // measured one only in them takes its runs: a bucket at least as large as the whole
  // gradient (one bucket either way, gradient_sync.cpp), the schedule of one stage.
  const ModelInfo model = infer_model(plan, nullptr);
  if (std::int64_t(plan.parallel.bucket_mb * 1024.0 * 1024.0) >= model.total_param_bytes) decides.parallel.bucket_mb = 0;
  if (plan.parallel.stages <= 1) decides.parallel.schedule = Schedule::GPipe;
  return folded(plan_to_json(decides, -1) + layer_signatures(model));
}

std::string serve_batch_key(const Plan& plan, const std::string& device) {
  const ModelInfo model = infer_model(plan, nullptr);
  std::string signatures;
  for (const LayerInfo& l : model.layers) signatures += signature(l) + ";";
  return "serve batch, model " + folded(signatures) + " (" + std::to_string(model.layers.size()) + " layers) @" + device;
}

std::string serve_overhead_key(const std::string& device) { return "serve overhead per request @" + device; }

Expected<std::optional<ObservedRun>> observe_run(store::RunStore& store, std::int64_t run_id) {
  auto run = store.load_run(run_id);
  if (!run.ok()) return run.error();
  if (kineto::is_imported_plan(run->plan_json)) return std::optional<ObservedRun>();
  PlanResult parsed = parse_plan(run->plan_json);
  std::optional<Plan> plan;
  if (parsed.ok()) plan = std::move(*parsed.plan);
  auto ranks = store.load_ranks(run_id);
  if (!ranks.ok()) return ranks.error();
  if (!can_calibrate(*run, plan, *ranks)) return std::optional<ObservedRun>();
  ObservedRun out;
  out.id = run_id;
  out.plan = *plan;
  const ModelInfo model = model_by_id(*plan);
  const std::map<std::string, double> stretch = stretch_by_host(*ranks);
  Collector c;
  std::vector<std::vector<Event>> by_rank;
  for (const trace::RankRecord& r : *ranks) {
    auto events = store.load_events(run_id, r.rank);
    if (!events.ok()) return events.error();
    const DeviceSpec& spec = plan->parallel.devices[std::size_t(r.rank)];
    const double s = stretch.at(r.host);
    const std::string device = device_tag(spec, r.device_info.blas_threads, r.device_info.name, s);
    if (r.rank == 0) {
      out.device = device, out.cores = std::max(1, r.device_info.logical_cores);
      out.configuration = configuration_of(*plan, r.device_info.blas_threads);
    }
    add_rank(*plan, model, r.rank, device, s, *events, c);
    by_rank.push_back(std::move(*events));
  }
  out.step_ms = median_step_ms(by_rank, &out.steps);
  if (parameter_server_mode(*plan)) {
    auto updates = store.load_updates(run_id);
    if (!updates.ok()) return updates.error();
    const analysis::StalenessStats stats = analysis::staleness_stats(*updates, by_rank, *plan);
    if (stats.present) out.staleness = stats.mean;
  }
  auto probe = store.load_metrics(run_id, "p2p_gbs");
  if (!probe.ok()) return probe.error();
  if (!probe->empty() && probe->back().value > 0) out.probe_gbs = probe->back().value;
  for (const auto& [where, cost] : c.buckets) c.spans[{std::get<0>(where), double(cost.first)}].push_back(cost.second);
  for (auto& [key, times] : c.spans)
    out.observations.push_back({key.first, c.work.count(key.first) ? c.work[key.first] : 0.0, key.second,
                                c.typical(key.first, times), std::int64_t(times.size())});
  return std::optional<ObservedRun>(std::move(out));
}

double LinearCost::at(double units) const {
  if (points.empty()) return 0;
  const auto proportional = [units](const std::pair<double, double>& p) { return p.first > 0 ? p.second * units / p.first : p.second; };
  // Within the measured sizes: the line between the two that hold units.
  if (points.size() > 1 && units >= points.front().first && units <= points.back().first) {
    std::size_t i = 1;
    while (i + 1 < points.size() && units > points[i].first) ++i;
    const auto [x0, y0] = points[i - 1];
    const auto [x1, y1] = points[i];
    return std::max(0.0, y0 + (y1 - y0) * (units - x0) / (x1 - x0));
  }
  // Beyond them: the line through the nearest size and the next one at least kSlopeSpan
  // times further off. Two close sizes give a slope that is mostly noise (a gradient
  // bucket of 940584 bytes and local SGD's arena of 940800, 0.081 and 0.076 ms, drew a
  // line that put a 131 KB all-reduce at 19 ms; it took 0.011), and a cost does not fall
  // as its size grows: without such a slope, in proportion to the nearest size.
  const bool below = units < points.front().first;
  const std::pair<double, double> near = below ? points.front() : points.back();
  std::optional<std::pair<double, double>> far;
  for (std::size_t k = 1; k < points.size() && !far; ++k) {
    const auto& p = below ? points[k] : points[points.size() - 1 - k];
    if (std::max(p.first, near.first) >= kSlopeSpan * std::min(p.first, near.first)) far = p;
  }
  const double slope = far ? (far->second - near.second) / (far->first - near.first) : -1.0;
  if (slope < 0 && probe_slope > 0) return std::max(0.0, near.second + probe_slope * (units - near.first));
  if (slope < 0) return proportional(near);
  const double line = near.second + slope * (units - near.first);
  // Below the smallest size measured a sample costs at least what it cost there: a
  // smaller GEMM is no more efficient. (The line through 64 and 128 samples gave a
  // 784->256 backward 0.04 ms at 16; it took 0.19, and in proportion 0.11.)
  return below ? std::max(line, proportional(near)) : line;
}

std::map<std::string, LinearCost> fit_costs(const std::vector<Observation>& observations) {
  std::map<std::string, std::map<double, std::vector<double>>> by_key;
  std::map<std::string, LinearCost> costs;
  for (const Observation& o : observations) {
    by_key[o.key][o.units].push_back(o.ms);
    LinearCost& c = costs[o.key];
    c.work = o.work;
    c.observations += o.spans;
  }
  for (auto& [key, sizes] : by_key)
    for (auto& [units, ms] : sizes) costs[key].points.emplace_back(units, analysis::median(ms, 0.0));
  return costs;
}

}  // namespace loom::predict
