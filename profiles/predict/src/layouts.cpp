// Layouts of one plan (see layouts.h): re-laying a plan, the search over layouts, and the
// scaling curve.
#include "loom/predict/layouts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <optional>

#include "loom/predict/host_links.h"

namespace loom::predict {

std::string LayoutChoice::describe() const {
  char text[160];
  std::snprintf(text, sizeof text, "%d replica%s x %d stage%s", replicas, replicas == 1 ? "" : "s", stages, stages == 1 ? "" : "s");
  std::string out = text;
  if (stages > 1)
    out += ", " + std::string(schedule_name(schedule)) + ", " + std::to_string(microbatches) + " micro-batch" +
           (microbatches == 1 ? "" : "es");
  if (sync && (sync->mode == SyncMode::ParameterServer || sync->mode == SyncMode::Ssp)) {
    std::snprintf(text, sizeof text, "%d worker%s + %d server%s, ", replicas, replicas == 1 ? "" : "s", sync->servers,
                  sync->servers == 1 ? "" : "s");
    return text + (sync->mode == SyncMode::Ssp ? "ssp bound " + std::to_string(sync->bound) : std::string("parameter server"));
  }
  if (sync && sync->mode == SyncMode::LocalSgd)
    return std::to_string(replicas) + " replicas, local SGD every " + std::to_string(sync->period) + " steps";
  if (replicas > 1) {
    std::snprintf(text, sizeof text, ", %g MB buckets", bucket_mb);
    out += text;
  }
  if (accumulation > 1) out += ", accumulating " + std::to_string(accumulation) + " micro-steps";
  return out;
}

namespace {

// Forward work per sample of each top-level layer, its branches' layers included.
std::vector<double> top_level_work(const Plan& plan) {
  const ModelInfo model = infer_model(plan, nullptr);
  std::vector<double> work(plan.model.layers.size(), 0.0);
  for (const LayerInfo& layer : model.layers) {
    const std::string prefix = "/model/layers/";
    const std::size_t end = layer.json_path.find('/', prefix.size());
    const std::size_t index = std::stoul(layer.json_path.substr(prefix.size(), end - prefix.size()));
    if (index < work.size()) work[index] += layer_work(layer);
  }
  return work;
}

// Consecutive groups of `work` into `parts` groups, none empty, with the largest group's
// sum as small as it can be (the classic linear partition, by dynamic programming).
std::vector<int> balanced_cut(const std::vector<double>& work, int parts) {
  const int n = int(work.size());
  std::vector<double> prefix(std::size_t(n + 1), 0.0);
  for (int i = 0; i < n; ++i) prefix[std::size_t(i + 1)] = prefix[std::size_t(i)] + work[std::size_t(i)];
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: the largest group when the first i layers form k groups; from[k][i]: where the last starts.
  std::vector<std::vector<double>> best(std::size_t(parts + 1), std::vector<double>(std::size_t(n + 1), inf));
  std::vector<std::vector<int>> from(std::size_t(parts + 1), std::vector<int>(std::size_t(n + 1), 0));
  best[0][0] = 0;
  for (int k = 1; k <= parts; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) {
        const double largest = std::max(best[std::size_t(k - 1)][std::size_t(j)], prefix[std::size_t(i)] - prefix[std::size_t(j)]);
        if (largest < best[std::size_t(k)][std::size_t(i)]) best[std::size_t(k)][std::size_t(i)] = largest, from[std::size_t(k)][std::size_t(i)] = j;
      }
  std::vector<int> stage(std::size_t(n), 0);
  for (int k = parts, i = n; k > 0; i = from[std::size_t(k)][std::size_t(i)], --k)
    for (int j = from[std::size_t(k)][std::size_t(i)]; j < i; ++j) stage[std::size_t(j)] = k - 1;
  return stage;
}

void place_on_stage(LayerSpec& layer, int stage) {
  layer.stage = stage;
  for (BranchSpec& branch : layer.branches) {
    branch.stage = -1;
    for (LayerSpec& inner : branch.layers) place_on_stage(inner, stage);
  }
}

Status check_split(const Plan& plan, const LayoutChoice& c) {
  const int accumulation = c.accumulation > 0 ? c.accumulation : std::max(1, plan.parallel.grad_accumulation);
  const std::int64_t split = std::int64_t(c.replicas) * accumulation;
  if (c.replicas < 1 || c.stages < 1 || c.microbatches < 1 || plan.training.batch % split != 0 ||
      (plan.training.batch / split) % c.microbatches != 0)
    return make_error(ErrorCode::InvalidArgument, "batch " + std::to_string(plan.training.batch) + " does not split into " +
                                                      c.describe());
  if (c.stages > int(plan.model.layers.size()))
    return make_error(ErrorCode::InvalidArgument, std::to_string(c.stages) + " stages for " +
                                                      std::to_string(plan.model.layers.size()) + " top-level layers");
  return {};
}

// A plan whose ranks sit on several hosts like a cluster keeps its layouts there: ranks
// fill its hosts in order, as many to a host as the plan had (more where they would not
// fit), as a cluster of those hosts numbers them (Cluster::host_of), so a saved or
// predicted layout runs where the search predicted it.
void keep_on_plan_hosts(const Plan& plan, std::vector<DeviceSpec>& devices) {
  const PlanHosts on = hosts_of_plan(plan);
  if (on.hosts.size() < 2 || !on.like_a_cluster()) return;
  const int hosts = int(on.hosts.size());
  const int per_host = std::max(on.per_host.front(), (int(devices.size()) + hosts - 1) / hosts);
  for (std::size_t i = 0; i < devices.size(); ++i) devices[i].host = on.hosts[i / std::size_t(per_host)];
}

}  // namespace

Expected<Plan> with_layout(const Plan& plan, const LayoutChoice& c) {
  LOOM_TRY(check_split(plan, c));
  Plan out = plan;
  ParallelSpec& p = out.parallel;
  if (c.stages != plan.parallel.stages) {
    const std::vector<int> stage = balanced_cut(top_level_work(plan), c.stages);
    for (std::size_t i = 0; i < out.model.layers.size(); ++i) place_on_stage(out.model.layers[i], stage[i]);
  }
  if (c.sync) p.sync = *c.sync;
  p.data_parallel = c.replicas, p.stages = c.stages, p.microbatches = c.microbatches;
  p.schedule = c.schedule, p.bucket_mb = c.bucket_mb;
  if (c.accumulation > 0) p.grad_accumulation = c.accumulation;
  const DeviceSpec like = plan.parallel.devices.empty() ? DeviceSpec{} : plan.parallel.devices.front();
  p.devices.assign(std::size_t(world_size(out)), like);  // the asynchronous modes' servers too
  keep_on_plan_hosts(plan, p.devices);
  std::erase_if(p.stragglers, [&](const StragglerSpec& s) { return s.rank >= c.replicas * c.stages; });
  return out;
}

// ---- search ------------------------------------------------------------------------

namespace {

// Replicas worth trying: powers of two, and every device.
std::vector<int> replica_counts(int devices) {
  std::vector<int> counts;
  for (int d = 1; d <= devices; d *= 2) counts.push_back(d);
  if (counts.back() != devices) counts.push_back(devices);
  return counts;
}

// The asynchronous layouts of `devices` devices (one stage, the plan's bucket size).
void add_asynchronous(const Plan& plan, const SearchSpace& space, int devices, std::vector<LayoutChoice>& out) {
  const double bucket = plan.parallel.bucket_mb;
  for (int servers : space.servers) {
    if (devices - servers < 2) continue;  // at least two workers: one would not be asynchronous
    out.push_back({devices - servers, 1, 1, Schedule::OneFOneB, bucket, SyncSpec{SyncMode::ParameterServer, 0, 1, servers, false}});
    for (int bound : space.bounds)
      out.push_back({devices - servers, 1, 1, Schedule::OneFOneB, bucket, SyncSpec{SyncMode::Ssp, bound, 1, servers, false}});
  }
  if (devices >= 2)
    for (int period : space.periods)
      out.push_back({devices, 1, 1, Schedule::OneFOneB, bucket, SyncSpec{SyncMode::LocalSgd, 0, period, 1, false}});
  if (plan.parallel.sync.mode != SyncMode::AllReduce)  // and synchronous training, which the plan's mode leaves out
    out.push_back({devices, 1, 1, Schedule::OneFOneB, bucket, SyncSpec{}});
}

// The synchronous layouts with `replicas` replicas.
void add_synchronous(const Plan& plan, const SearchSpace& space, int replicas, std::vector<LayoutChoice>& out) {
  // The asynchronous modes run one stage: their plans keep it.
  const int max_stages = plan.parallel.sync.mode == SyncMode::AllReduce ? int(plan.model.layers.size()) : 1;
  std::vector<int> accumulations{0};  // the plan's
  if (space.memory_per_device > 0) accumulations.insert(accumulations.end(), space.accumulation.begin(), space.accumulation.end());
  for (int s = 1; s <= std::min(max_stages, space.devices / replicas); ++s)
    for (int m : s == 1 ? std::vector<int>{1} : space.microbatches)
      for (Schedule schedule : s == 1 || m == 1 ? std::vector<Schedule>{Schedule::OneFOneB}  // one micro-batch: schedules agree
                                                : std::vector<Schedule>{Schedule::GPipe, Schedule::OneFOneB})
        for (int accumulation : s == 1 ? accumulations : std::vector<int>{0})
          for (double bucket : replicas == 1 ? std::vector<double>{plan.parallel.bucket_mb} : space.bucket_mb) {
            if (accumulation == std::max(1, plan.parallel.grad_accumulation)) continue;  // the plan's, tried as 0
            out.push_back({replicas, s, m, schedule, bucket, std::nullopt, accumulation});
          }
}

std::vector<LayoutChoice> choices(const Plan& plan, const SearchSpace& space) {
  std::vector<LayoutChoice> all, out;
  for (int d : replica_counts(space.devices)) {
    add_synchronous(plan, space, d, all);
    if (space.asynchronous) add_asynchronous(plan, space, d, all);
  }
  for (const LayoutChoice& c : all)
    if (check_split(plan, c).ok()) out.push_back(c);
  return out;
}

std::int64_t peak_memory(const Prediction& p) {
  std::int64_t most = 0;
  for (const RankMemory& m : p.memory) most = std::max(most, m.total());
  return most;
}

// Bucket sizes that cut the gradients alike give the same step: keep the smallest such
// size of each layout (candidates come smallest bucket first).
void drop_equal_buckets(std::vector<Candidate>& candidates) {
  std::vector<Candidate> kept;
  for (Candidate& c : candidates) {
    const bool same = !kept.empty() && kept.back().left_out.empty() && c.left_out.empty() &&
                      kept.back().choice.replicas == c.choice.replicas && kept.back().choice.stages == c.choice.stages &&
                      kept.back().choice.microbatches == c.choice.microbatches && kept.back().choice.schedule == c.choice.schedule &&
                      kept.back().choice.sync == c.choice.sync && kept.back().choice.accumulation == c.choice.accumulation &&
                      kept.back().prediction.spans.size() == c.prediction.spans.size() &&
                      kept.back().prediction.step_ms == c.prediction.step_ms;
    if (!same) kept.push_back(std::move(c));
  }
  candidates = std::move(kept);
}

}  // namespace

Expected<std::vector<Candidate>> search_layouts(const Plan& plan, const Calibration& calibration, const MachineShape& given,
                                                const SearchSpace& space) {
  // Without a cluster, a plan whose ranks sit on hosts whose link was learnt is searched on
  // those hosts (host_links.h) as they are: a layout with more ranks than the plan has is
  // left out, not crowded onto them (with_layout would).
  MachineShape machine = given;
  const std::optional<Cluster> hosts =
      given.cluster ? std::nullopt : cluster_of_plan_hosts(plan, calibration.links, calibration.host, nullptr);
  if (hosts) machine.cluster = &*hosts;
  std::vector<Candidate> out;
  std::optional<Error> first_missing;
  for (const LayoutChoice& c : choices(plan, space)) {
    auto laid = with_layout(plan, c);
    if (!laid.ok()) continue;
    Candidate candidate{c, {}, 0, {}};
    auto prediction = predict_step(*laid, calibration, machine);
    if (!prediction.ok()) {
      if (prediction.error().code == ErrorCode::Unavailable) return prediction.error();
      if (!first_missing) first_missing = prediction.error();
      candidate.left_out = prediction.error().message;
    } else {
      candidate.prediction = std::move(*prediction);
      candidate.peak_memory = peak_memory(candidate.prediction);
      if (space.memory_per_device > 0 && candidate.peak_memory > space.memory_per_device)
        candidate.left_out = "needs " + format_bytes(candidate.peak_memory) + " on its fullest rank";
    }
    out.push_back(std::move(candidate));
  }
  drop_equal_buckets(out);
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.left_out.empty() != b.left_out.empty()) return a.left_out.empty();
    return a.prediction.samples_per_s > b.prediction.samples_per_s;
  });
  if ((out.empty() || !out.front().left_out.empty()) && first_missing) return *first_missing;
  return out;
}

// ---- why one layout loses ------------------------------------------------------------

namespace {

struct Shares {
  double compute = 0, idle = 0, wait = 0, injected = 0, messages = 0, gap = 0;
};

// The rank that ends the step last, and where its time went (messages: its sends, which
// overlap its compute but stand for what crosses between stages).
Shares shares_of_last_rank(const Prediction& p) {
  std::map<int, double> ends;
  for (const PredictedSpan& s : p.spans)
    if (s.stream == trace::Stream::Compute) ends[s.rank] = std::max(ends[s.rank], s.end_ms);
  int last = 0;
  for (const auto& [rank, end] : ends)
    if (end > ends[last]) last = rank;
  Shares out;
  // Covered by the rank's compute-stream spans and a worker's pushes (nothing else runs
  // then); the rest of its step is the residual's gap. Per step of a cycle (local SGD).
  double covered = 0;
  const double steps = std::max(1, p.cycle_steps);
  for (const PredictedSpan& s : p.spans) {
    if (s.rank != last) continue;
    const double ms = (s.end_ms - s.start_ms) / steps;
    if (s.stream == trace::Stream::Compute || s.kind == trace::EventKind::Push) covered += ms;
    if (s.kind == trace::EventKind::Idle) out.idle += ms;
    else if (s.kind == trace::EventKind::Wait) out.wait += ms;
    else if (s.kind == trace::EventKind::InjectedDelay) out.injected += ms;
    else if (s.kind == trace::EventKind::AllReduce) out.wait += s.stream == trace::Stream::Compute ? ms : 0.0;  // local SGD's meeting
    else if (trace::is_communication(s.kind)) out.messages += ms;
    else out.compute += ms;
  }
  out.gap = ends[last] / steps - covered;
  return out;
}

}  // namespace

std::string why_slower(const Prediction& best, const Prediction& other) {
  const Shares a = shares_of_last_rank(best), b = shares_of_last_rank(other);
  std::vector<std::pair<double, std::string>> parts = {{b.compute - a.compute, "compute on the slowest rank"},
                                                        {b.idle - a.idle, "pipeline idle"},
                                                        {b.wait - a.wait, "waiting for gradients"},
                                                        {b.injected - a.injected, "straggler delay"},
                                                        {b.messages - a.messages, "messages (between stages, to and from servers)"},
                                                        {b.gap - a.gap, "time no span covers (measured runs' residual)"}};
  // What it adds first, largest first, then what it saves.
  std::sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) {
    return (x.first > 0) != (y.first > 0) ? x.first > 0 : std::abs(x.first) > std::abs(y.first);
  });
  std::string text;
  for (const auto& [ms, what] : parts) {
    if (std::abs(ms) < 0.0005 * best.step_ms || ms == 0) continue;
    char item[96];
    std::snprintf(item, sizeof item, "%s%+.3g ms %s", text.empty() ? "" : ", ", ms, what.c_str());
    text += item;
  }
  return text.empty() ? "within rounding of the first" : text;
}

std::string step_breakdown(const Prediction& p) {
  const Shares s = shares_of_last_rank(p);
  const std::pair<double, const char*> parts[] = {{s.compute, "compute"},         {s.idle, "pipeline idle"},
                                                  {s.wait, "waiting for gradients"}, {s.injected, "straggler delay"},
                                                  {s.messages, "messages"},         {s.gap, "residual"}};
  std::string text;
  for (const auto& [ms, what] : parts) {
    if (ms < 0.0005 * p.step_ms) continue;
    char item[80];
    std::snprintf(item, sizeof item, "%s%.3g ms %s", text.empty() ? "" : ", ", ms, what);
    text += item;
  }
  return text;
}

// ---- scaling -------------------------------------------------------------------------

Expected<std::vector<ScalePoint>> scaling_curve(const Plan& plan, const Calibration& calibration, const MachineShape& given,
                                                int devices) {
  // Without a cluster, a plan whose ranks sit on hosts with a learnt link scales over as
  // many such hosts as it needs, joined by that link (host_links.h).
  MachineShape machine = given;
  std::optional<Cluster> hosts =
      given.cluster ? std::nullopt : cluster_of_plan_hosts(plan, calibration.links, calibration.host, nullptr);
  if (hosts) {
    hosts->hosts = std::max(hosts->hosts, (devices + hosts->devices_per_host - 1) / hosts->devices_per_host);
    machine.cluster = &*hosts;
  }
  const int stages = std::max(1, plan.parallel.stages);
  const std::int64_t per_replica = plan.training.batch / std::max(1, plan.parallel.data_parallel);
  std::vector<int> counts;
  for (int d = 1; d * stages <= devices; d *= 2) counts.push_back(d);
  if (!counts.empty() && counts.back() * stages != devices && devices / stages > counts.back()) counts.push_back(devices / stages);
  std::vector<ScalePoint> out;
  for (int d : counts) {
    Plan scaled = plan;
    scaled.training.batch = per_replica * d;
    auto laid = with_layout(scaled, {d, stages, plan.parallel.microbatches, plan.parallel.schedule, plan.parallel.bucket_mb});
    if (!laid.ok()) return laid.error();
    auto p = predict_step(*laid, calibration, machine);
    if (!p.ok()) return p.error();
    ScalePoint point{d * stages, p->step_ms, p->samples_per_s, 1.0};
    if (!out.empty())
      point.efficiency = point.samples_per_s / (out.front().samples_per_s * double(point.devices) / out.front().devices);
    out.push_back(point);
  }
  return out;
}

}  // namespace loom::predict
