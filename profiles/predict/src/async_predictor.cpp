// The asynchronous modes' predictors (see async_predictor.h).
#include "async_predictor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>

#include "async_simulation.h"
#include "rank_memory.h"
#include "loom/analysis/stats.h"
#include "step_parts.h"

namespace loom::predict {

using trace::EventKind;
using trace::Stream;

namespace {

// Bytes of each parameter tensor of the model, as the engine's model holds them.
std::vector<std::int64_t> tensor_bytes(const ModelInfo& model) {
  std::vector<std::int64_t> out;
  for (const LayerInfo& layer : model.layers)
    for (std::int64_t bytes : predict::tensor_bytes(layer)) out.push_back(bytes);
  return out;
}

// Each server's share, as the engine shards: largest tensor first, each to the least
// loaded server (ties: the lower index).
std::vector<std::int64_t> shard_bytes(const ModelInfo& model, int servers) {
  std::vector<std::int64_t> sizes = tensor_bytes(model);
  std::stable_sort(sizes.begin(), sizes.end(), std::greater<>());
  std::vector<std::int64_t> load(std::size_t(std::max(servers, 1)), 0);
  for (std::int64_t bytes : sizes) *std::min_element(load.begin(), load.end()) += bytes;
  return load;
}

// A worker's compute in the engine's order: the batch, the forward, the loss, the backward.
AsyncWorkerWork worker_work(const StageWork& w, double residual_ms) {
  AsyncWorkerWork out;
  auto add = [&](EventKind kind, double ms, int layer) {
    if (ms > 0) out.compute.push_back({0, kind, Stream::Compute, layer, -1, 0, ms, 0, 0});
  };
  add(EventKind::DataLoad, w.data_ms, -1);
  for (std::size_t i = 0; i < w.layers.size(); ++i) add(EventKind::Forward, w.forward_ms[i], w.layers[i]->id.value);
  add(EventKind::Loss, w.loss_ms, -1);
  for (std::size_t i = w.layers.size(); i-- > 0;) add(EventKind::Backward, w.backward_ms[i], w.layers[i]->id.value);
  double compute = 0;
  for (const PredictedSpan& s : out.compute) compute += s.end_ms;
  out.injected_ms = compute * (w.slowdown - 1) + w.delay_ms;
  out.residual_ms = residual_ms;
  return out;
}

// Steps left out at either end of the simulation: the first ones start together and the
// last ones no longer wait for workers that have finished.
std::int64_t edge_steps(std::int64_t steps) { return std::max<std::int64_t>(1, steps / 5); }

struct SteadyWindow {
  int slowest = 0;         // the worker with the longest median step
  double step_ms = 0;      // its median steady step
  double from_ms = 0, to_ms = 0;  // its steady steps, first start to last end
  double window_ms = 0;    // start of its steady step nearest the median (the laid-out step)
};

SteadyWindow steady_window(const AsyncTimeline& t, int workers, std::int64_t steps) {
  const std::int64_t edge = edge_steps(steps);
  std::vector<std::vector<const SimulatedStep*>> by_worker(static_cast<std::size_t>(workers));
  for (const SimulatedStep& s : t.steps)
    if (s.step >= edge && s.step < steps - edge) by_worker[std::size_t(s.worker)].push_back(&s);
  SteadyWindow out;
  for (int w = 0; w < workers; ++w) {
    std::vector<double> ms;
    for (const SimulatedStep* s : by_worker[std::size_t(w)]) ms.push_back(s->end_ms - s->start_ms);
    const double median = analysis::median(ms, 0.0);
    if (median > out.step_ms) out.step_ms = median, out.slowest = w;
  }
  const auto& own = by_worker[std::size_t(out.slowest)];
  if (own.empty()) return out;
  out.from_ms = own.front()->start_ms;
  out.to_ms = own.back()->end_ms;
  // The laid-out step: of the middle half, the one whose length is nearest the median.
  const auto off_median = [&](const SimulatedStep* s) { return std::abs(s->end_ms - s->start_ms - out.step_ms); };
  const SimulatedStep* nearest = own[own.size() / 2];
  for (std::size_t i = own.size() / 4; i < own.size() - own.size() / 4; ++i)
    if (off_median(own[i]) < off_median(nearest)) nearest = own[i];
  out.window_ms = nearest->start_ms;
  return out;
}

// Every span's part inside [from, from + length), moved to start at 0.
std::vector<PredictedSpan> spans_in_window(const std::vector<PredictedSpan>& spans, double from, double length) {
  std::vector<PredictedSpan> out;
  for (PredictedSpan s : spans) {
    const double start = std::max(s.start_ms, from), end = std::min(s.end_ms, from + length);
    if (end <= start) continue;
    s.start_ms = start - from, s.end_ms = end - from, s.step = 0;
    out.push_back(s);
  }
  return out;
}

// Samples per second over the slowest worker's steady steps: every step any worker ends
// in that time, at its share of the batch.
double steady_throughput(const AsyncTimeline& t, const SteadyWindow& w, double samples_per_step) {
  if (w.to_ms <= w.from_ms) return 0;
  double samples = 0;
  for (const SimulatedStep& s : t.steps)
    if (s.end_ms > w.from_ms && s.end_ms <= w.to_ms) samples += samples_per_step;
  return samples / (w.to_ms - w.from_ms) * 1000.0;
}

void set_staleness(const Plan& plan, const AsyncTimeline& t, int workers, Prediction& out) {
  std::vector<std::vector<trace::Event>> events(static_cast<std::size_t>(workers));
  for (const PredictedSpan& s : t.spans) {
    if (s.kind != EventKind::Wait || s.rank >= workers) continue;
    trace::Event e;
    e.kind = EventKind::Wait, e.stream = s.stream, e.step = s.step;
    e.start_ns = std::llround(s.start_ms * 1e6), e.end_ns = std::llround(s.end_ms * 1e6);
    events[std::size_t(s.rank)].push_back(e);
  }
  out.staleness = analysis::staleness_stats(t.updates, events, plan);
  for (const trace::UpdateRecord& u : t.updates) {
    if (std::size_t(u.staleness) >= out.staleness_counts.size()) out.staleness_counts.resize(std::size_t(u.staleness) + 1, 0);
    ++out.staleness_counts[std::size_t(u.staleness)];
  }
}

// The plan's hosts, each with `cores` cores, where ranks outnumber them on one; hosts of
// one machine (`one_machine`) as one host.
void set_cores(const Plan& plan, int cores, bool one_machine, int threads_per_rank, double contended_share, AsyncSetup& setup) {
  const int crowd = one_machine ? int(plan.parallel.devices.size()) : most_ranks_on_a_host(plan);
  if (crowd <= cores) return;
  std::map<std::string, int> index;
  for (const DeviceSpec& d : plan.parallel.devices)
    setup.host_of.push_back(one_machine ? 0 : index.emplace(d.host, int(index.size())).first->second);
  setup.host_cores.assign(one_machine ? 1 : index.size(), double(cores));
  setup.worker_threads = std::min(threads_per_rank, cores);
  setup.contended_share = contended_share;
}

}  // namespace

std::int64_t simulated_steps(const Plan& plan) {
  const int workers = std::max(1, plan.parallel.data_parallel);
  const std::int64_t planned = plan.training.steps > 0 ? plan.training.steps : 200;
  return std::max<std::int64_t>(std::min<std::int64_t>(planned, 20), std::min<std::int64_t>(planned, 20000 / workers));
}

Status predict_parameter_servers(const Plan& plan, const ModelInfo& model, StepCosts& costs, double residual_ms,
                                 const Crowding& crowding, Prediction& out) {
  const int workers = std::max(1, plan.parallel.data_parallel), servers = std::max(1, plan.parallel.sync.servers);
  AsyncSetup setup;
  setup.ssp = plan.parallel.sync.mode == SyncMode::Ssp;
  setup.bound = plan.parallel.sync.bound;
  setup.steps = simulated_steps(plan);
  for (int w = 0; w < workers; ++w) setup.workers.push_back(worker_work(stage_work(plan, model, 0, w, costs), residual_ms));
  setup.shard_bytes = shard_bytes(model, servers);
  for (std::int64_t bytes : setup.shard_bytes) setup.apply_ms.push_back(costs.optimizer(double(bytes) / 4.0));
  setup.message_ms = [&](int from, int to, double bytes) { return costs.send(from, to, bytes); };
  setup.push_ms = [&](int from, int to, double bytes) { return costs.push_receive(from, to, bytes); };
  const double contended_share = crowding.fitted_share.value_or(kDefaultContendedShare);
  if (crowding.cores_per_host > 0)
    set_cores(plan, crowding.cores_per_host, crowding.one_machine, out.threads_per_rank, contended_share, setup);
  if (!setup.host_of.empty()) {
    char share[16];
    std::snprintf(share, sizeof share, "%.2f", contended_share);
    out.notes.push_back(std::string("ranks outnumber the cores: a server's task that finds too few free goes at ") + share +
                        " x the free cores / the ranks waiting (" +
                        (crowding.fitted_share ? "fitted to the staleness of this machine's crowded parameter-server runs"
                                               : "the default: no crowded parameter-server run stored") +
                        ")");
  }
  const AsyncTimeline timeline = simulate_parameter_servers(setup);
  if (std::int64_t(timeline.steps.size()) != setup.steps * workers)
    return make_error(ErrorCode::Internal, "the parameter-server simulation stopped before every worker finished");
  const SteadyWindow window = steady_window(timeline, workers, setup.steps);
  out.step_ms = out.cycle_ms = window.step_ms;
  out.samples_per_s = steady_throughput(timeline, window, double(plan.training.batch) / double(workers));
  out.spans = spans_in_window(timeline.spans, window.window_ms, window.step_ms);
  set_staleness(plan, timeline, workers, out);
  out.updates = timeline.updates;
  out.notes.push_back("simulated " + std::to_string(setup.steps) + " steps per worker; the spans are one step of worker " +
                      std::to_string(window.slowest) + " (the slowest) and what every rank did meanwhile");
  return {};
}

// One period per replica: `period` local steps (its compute, a straggler's delay, the
// residual, the optimizer), then the meeting as the engine's trainer holds it: a wait for
// the slowest replica (its step's figures summed then, a few bytes), the parameters
// averaged one tensor at a time, and the divergence summed.
void predict_local_sgd(const Plan& plan, const ModelInfo& model, StepCosts& costs, double residual_ms, Prediction& out) {
  const int replicas = std::max(1, plan.parallel.data_parallel), period = std::max(1, plan.parallel.sync.period);
  std::vector<int> group(static_cast<std::size_t>(replicas));
  std::iota(group.begin(), group.end(), 0);
  std::vector<std::vector<double>> starts(static_cast<std::size_t>(replicas));
  std::vector<double> arrive(static_cast<std::size_t>(replicas));
  for (int r = 0; r < replicas; ++r) {
    const StageWork w = stage_work(plan, model, 0, r, costs);
    const AsyncWorkerWork work = worker_work(w, residual_ms);
    double at = 0;
    for (int k = 0; k < period; ++k) {
      starts[std::size_t(r)].push_back(at);
      for (const PredictedSpan& c : work.compute) {
        out.spans.push_back({r, c.kind, Stream::Compute, c.layer, -1, at, at + c.end_ms, 0, k});
        at += c.end_ms;
      }
      if (work.injected_ms > 0) {
        out.spans.push_back({r, EventKind::InjectedDelay, Stream::Compute, -1, -1, at, at + work.injected_ms, 0, k});
        at += work.injected_ms;
      }
      at += residual_ms;  // a gap: no span
      out.spans.push_back({r, EventKind::Optimizer, Stream::Compute, -1, -1, at, at + w.optimizer_ms, 0, k});
      at += w.optimizer_ms;
    }
    arrive[std::size_t(r)] = at;
  }
  const double meet = *std::max_element(arrive.begin(), arrive.end());
  const double met = meet + costs.allreduce(group, 24.0);
  // The engine sums the whole parameter arena in one all-reduce, then takes the mean and
  // each replica's distance from it (the outer step).
  const double arena_floats = double(stage_param_floats(model, 0));
  const double summed = met + costs.allreduce(group, 4.0 * arena_floats);
  const double averaged = summed + costs.outer_step(arena_floats);
  for (int r = 0; r < replicas; ++r) {
    out.spans.push_back({r, EventKind::Wait, Stream::Compute, -1, -1, arrive[std::size_t(r)], met, 0, period - 1});
    out.spans.push_back({r, EventKind::AllReduce, Stream::Compute, -1, -1, met, summed, std::int64_t(4.0 * arena_floats), period - 1});
    out.spans.push_back({r, EventKind::Optimizer, Stream::Compute, -1, -1, summed, averaged, 0, period - 1});
  }
  out.cycle_steps = period;
  out.cycle_ms = averaged;
  std::vector<double> slowest(std::size_t(period), 0.0);
  for (int r = 0; r < replicas; ++r)
    for (int k = 0; k < period; ++k) {
      const double end = k + 1 < period ? starts[std::size_t(r)][std::size_t(k + 1)] : averaged;
      slowest[std::size_t(k)] = std::max(slowest[std::size_t(k)], end - starts[std::size_t(r)][std::size_t(k)]);
    }
  out.step_ms = analysis::median(slowest, 0.0);
  out.samples_per_s = averaged > 0 ? double(plan.training.batch) * period / averaged * 1000.0 : 0.0;
  out.staleness.mode = std::string(sync_mode_name(SyncMode::LocalSgd));
  out.notes.push_back("local SGD: one period of " + std::to_string(period) + " steps laid out; replicas meet in its last");
}

}  // namespace loom::predict
