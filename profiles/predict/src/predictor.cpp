// The predictor (see predictor.h): one steady step per rank from calibrated costs.
#include "loom/predict/predictor.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "loom/analysis/pipeline_replay.h"

namespace loom::predict {

using trace::EventKind;
using trace::Stream;

namespace {

// Costs by key, recording what the calibration lacks instead of failing at the first. A
// key measured under this plan's crowding is used as it is; otherwise the same cost
// measured unshared, stretched by how crowded the plan's host will be.
class Lookup {
 public:
  Lookup(const Calibration& cal, double stretch, std::vector<std::string>& notes) : cal_(cal), stretch_(stretch), notes_(notes) {}

  double compute(const std::string& key, double units) { return cost(key, units, stretch_); }
  double transfer(const std::string& key, double units) { return cost(key, units, 1.0); }
  // 0 and a note when not calibrated: the step is then what the spans add up to.
  double optional(const std::string& key, double units) {
    if (find(key).first) return compute(key, units);
    note(key + ": not calibrated, counted as 0");
    return 0;
  }

  // A layer's pass; when this size was never measured, a layer of the same kind, device and
  // direction scaled by work.
  double layer(const std::string& key, const LayerInfo& layer, double samples) {
    if (find(key).first) return compute(key, samples);
    for (const std::string& k : {key, unshared(key)}) {
      const LinearCost* nearest = nearest_of_kind(k, layer_work(layer));
      if (!nearest) continue;
      note(key + ": not measured, scaled by work from a " + std::string(layer_kind_name(layer.kind)) + " layer of another size");
      const double stretch = k == key ? 1.0 : stretch_;
      return stretch * nearest->at(samples) * layer_work(layer) / nearest->work;
    }
    return compute(key, samples);  // records it as missing
  }

  // A bucket's all-reduce over `replicas` ranks. Not measured at that count, the nearest
  // count measured (same backend and crowding) scaled as a ring all-reduce scales: each
  // rank sends and receives 2 (R - 1) / R of the bucket.
  double allreduce(int replicas, CommBackend backend, double stretch, double bytes) {
    const std::string key = allreduce_key(replicas, backend, stretch);
    if (find(key).first) return transfer(key, bytes);
    auto ring = [](int r) { return 2.0 * (r - 1) / r; };
    for (int delta = 1; delta < 4096; ++delta)
      for (int other : {replicas - delta, replicas + delta}) {
        if (other < 2 || !find(allreduce_key(other, backend, stretch)).first) continue;
        note(key + ": not measured, scaled from " + std::to_string(other) + " ranks as a ring all-reduce scales");
        return transfer(allreduce_key(other, backend, stretch), bytes) * ring(replicas) / ring(other);
      }
    return transfer(key, bytes);  // records it as missing
  }

  const std::set<std::string>& missing() const { return missing_; }

 private:
  // The cost and whether it is the key's own (false: the unshared one).
  std::pair<const LinearCost*, bool> find(const std::string& key) const {
    if (auto it = cal_.costs.find(key); it != cal_.costs.end()) return {&it->second, true};
    if (auto it = cal_.costs.find(unshared(key)); it != cal_.costs.end()) return {&it->second, false};
    return {nullptr, false};
  }
  double cost(const std::string& key, double units, double stretch) {
    const auto [c, own] = find(key);
    if (!c) {
      missing_.insert(key);
      return 0;
    }
    if (!own) note(key + ": measured only unshared" + (stretch > 1 ? ", stretched" : ""));
    return std::max(0.0, c->at(units)) * (own ? 1.0 : stretch);
  }
  void note(const std::string& text) {
    if (noted_.insert(text).second) notes_.push_back(text);
  }
  // Same direction and kind ("forward linear "), same device (" @cpu 2t"), nearest work.
  const LinearCost* nearest_of_kind(const std::string& key, double work) const {
    const std::size_t kind_end = key.find(' ', key.find(' ') + 1);
    const std::string prefix = key.substr(0, kind_end + 1), device = key.substr(key.rfind(" @"));
    const LinearCost* best = nullptr;
    double best_distance = 0;
    for (const auto& [k, c] : cal_.costs) {
      if (!k.starts_with(prefix) || !k.ends_with(device) || c.work <= 0 || work <= 0) continue;
      const double distance = std::abs(std::log(c.work / work));
      if (!best || distance < best_distance) best = &c, best_distance = distance;
    }
    return best;
  }

  const Calibration& cal_;
  double stretch_;
  std::vector<std::string>& notes_;
  std::set<std::string> missing_, noted_;
};

struct Bucket {
  std::int64_t bytes = 0;
  std::size_t last_layer = 0;  // index in the stage's layers whose backward completes it
};

// One stage of one replica: its layers and what each op costs.
struct StageWork {
  std::vector<const LayerInfo*> layers;  // forward order
  std::vector<double> forward_ms, backward_ms;
  double data_ms = 0, loss_ms = 0, optimizer_ms = 0, delay_ms = 0, slowdown = 1;
  double to_next_ms = 0, to_previous_ms = 0;
  std::int64_t output_bytes = 0;  // what crosses to the next stage per micro-batch
  std::vector<Bucket> buckets;
};

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

// Buckets as GradientSync forms them (last parameter first), whole layers at a time.
std::vector<Bucket> buckets_of(const std::vector<const LayerInfo*>& layers, double bucket_mb) {
  const auto limit = std::int64_t(bucket_mb * 1024.0 * 1024.0);
  std::vector<Bucket> buckets;
  std::int64_t filled = 0;
  for (std::size_t i = layers.size(); i-- > 0;) {
    const std::int64_t bytes = layers[i]->param_bytes;
    if (bytes <= 0) continue;
    if (buckets.empty() || (filled > 0 && filled + bytes > limit)) buckets.push_back({}), filled = 0;
    buckets.back().bytes += bytes;
    buckets.back().last_layer = i;
    filled += bytes;
  }
  return buckets;
}

std::int64_t elements(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

struct Layout {
  int replicas = 1, stages = 1, chunks = 1;  // chunks: micro-batches x accumulation micro-steps
  double samples = 0;                        // per chunk
};

Layout layout_of(const Plan& plan) {
  const ParallelSpec& p = plan.parallel;
  Layout l;
  l.replicas = std::max(1, p.data_parallel);
  l.stages = std::max(1, p.stages);
  l.chunks = std::max(1, p.microbatches) * std::max(1, p.grad_accumulation);
  l.samples = double(plan.training.batch) / double(l.replicas * l.chunks);
  return l;
}

StageWork stage_work(const Plan& plan, const ModelInfo& model, int stage, int rank, const std::string& device, double stretch,
                     Lookup& costs) {
  const Layout l = layout_of(plan);
  StageWork w;
  for (const LayerInfo& layer : model.layers)
    if (layer.stage == stage && layer.kind != LayerKind::Parallel) w.layers.push_back(&layer);
  for (const LayerInfo* layer : w.layers) {
    w.forward_ms.push_back(costs.layer(forward_key(*layer, device), *layer, l.samples));
    w.backward_ms.push_back(costs.layer(backward_key(*layer, device), *layer, l.samples));
  }
  // The first stage reads the inputs, the loss stage the labels: both load the batch.
  if (stage == 0 || stage == l.stages - 1) w.data_ms = costs.compute(data_key(plan), l.samples);
  if (stage == l.stages - 1) w.loss_ms = costs.compute(loss_key(plan, device), l.samples);
  const std::int64_t params = std::size_t(stage) < model.stage_params.size() ? model.stage_params[std::size_t(stage)] : 0;
  w.optimizer_ms = costs.compute(optimizer_key(plan, device), double(params));
  if (!w.layers.empty() && stage < l.stages - 1) {
    w.output_bytes = std::int64_t(double(elements(w.layers.back()->output)) * l.samples * sizeof(float));
    w.to_next_ms = costs.transfer(p2p_key(plan.parallel.backend, stretch), double(w.output_bytes));
  }
  if (l.replicas > 1) w.buckets = buckets_of(w.layers, plan.parallel.bucket_mb);
  for (const StragglerSpec& s : plan.parallel.stragglers) {
    if (s.rank != rank) continue;
    w.slowdown = s.slowdown;
    w.delay_ms = s.delay == DelayDistribution::None ? 0.0 : s.delay_ms;  // the distribution's mean
  }
  return w;
}

// The spans of one timed op on its stage.
void add_op_spans(const analysis::TimedOp& t, const StageWork& w, int rank, int chunks, std::vector<PredictedSpan>& out) {
  const int micro = chunks > 1 ? t.op.microbatch : -1;
  double at = t.start;
  auto span = [&](EventKind kind, double ms, int layer) {
    out.push_back({rank, kind, Stream::Compute, layer, micro, at, at + ms, 0});
    at += ms;
  };
  if (t.op.forward) {
    if (w.data_ms > 0) span(EventKind::DataLoad, w.data_ms, -1);
    for (std::size_t i = 0; i < w.layers.size(); ++i) span(EventKind::Forward, w.forward_ms[i], w.layers[i]->id.value);
    if (w.loss_ms > 0) span(EventKind::Loss, w.loss_ms, -1);
  } else {
    for (std::size_t i = w.layers.size(); i-- > 0;) span(EventKind::Backward, w.backward_ms[i], w.layers[i]->id.value);
  }
}

// When the last backward op finishes each of the stage's layers (index in w.layers).
std::vector<double> layer_done_times(const analysis::TimedOp& last_backward, const StageWork& w) {
  std::vector<double> done(w.layers.size(), last_backward.start);
  double at = last_backward.start;
  for (std::size_t i = w.layers.size(); i-- > 0;) done[i] = at += w.backward_ms[i];
  return done;
}

// Refuses what the predictor does not cover yet.
Status check_covered(const Plan& plan, const ModelInfo& model) {
  if (plan.serve) return make_error(ErrorCode::Unavailable, "serving plans are not predicted yet");
  if (plan.parallel.sync.mode != SyncMode::AllReduce)
    return make_error(ErrorCode::Unavailable, std::string(sync_mode_name(plan.parallel.sync.mode)) + " training is not predicted yet",
                      "only synchronous (all-reduce) training is");
  for (const LayerInfo& layer : model.layers) {
    if (!layer.parent.valid()) continue;
    for (const LayerInfo& parent : model.layers)
      if (parent.id == layer.parent && parent.stage != layer.stage)
        return make_error(ErrorCode::Unavailable, "branches on separate devices are not predicted yet");
  }
  for (const DeviceSpec& d : plan.parallel.devices)
    if (d.kind == DeviceKind::Gpu) return make_error(ErrorCode::Unavailable, "gpu ranks are not predicted yet", "calibration has only cpu runs");
  return {};
}

// BLAS threads per rank as the launcher will set them, and how far the busiest host's
// threads outnumber its cores.
void set_threads(const Plan& plan, const MachineShape& machine, Prediction& out) {
  std::map<std::string, int> ranks_on_host;
  for (const DeviceSpec& d : plan.parallel.devices) ++ranks_on_host[d.host];
  int crowd = 1;
  for (const auto& [host, n] : ranks_on_host) crowd = std::max(crowd, n);
  out.threads_per_rank = plan.training.threads > 0 ? plan.training.threads : std::max(1, machine.cores / crowd);
  out.stretch = std::max(1.0, double(crowd * out.threads_per_rank) / double(std::max(1, machine.cores)));
  if (out.stretch > 1) out.notes.push_back("ranks outnumber cores: compute stretched " + std::to_string(out.stretch).substr(0, 4) + "x");
}

// Every replica's stages and their ops in schedule order (stragglers differ by rank).
struct Replayed {
  std::vector<std::vector<StageWork>> work;                        // [replica][stage]
  std::vector<std::vector<std::vector<analysis::TimedOp>>> timed;  // [replica][stage][op]
};

Expected<Replayed> replay_replicas(const Plan& plan, const ModelInfo& model, const std::string& device, double stretch, Lookup& costs) {
  const Layout l = layout_of(plan);
  Replayed out;
  out.work.resize(std::size_t(l.replicas));
  for (int r = 0; r < l.replicas; ++r) {
    std::vector<analysis::StageOpTimes> ops;
    auto& stages = out.work[std::size_t(r)];
    for (int s = 0; s < l.stages; ++s) {
      StageWork w = stage_work(plan, model, s, s * l.replicas + r, device, stretch, costs);
      if (s > 0) w.to_previous_ms = stages[std::size_t(s - 1)].to_next_ms;  // the gradient of the same tensor
      ops.push_back({w.data_ms + sum(w.forward_ms) + w.loss_ms, sum(w.backward_ms), 0, w.to_next_ms, w.to_previous_ms});
      stages.push_back(std::move(w));
    }
    // One stage alternates forward and backward per accumulation micro-step, as 1F1B does.
    const Schedule schedule = l.stages == 1 ? Schedule::OneFOneB : plan.parallel.schedule;
    out.timed.push_back(analysis::replay_ops(schedule, l.chunks, ops));
    if (out.timed.back().empty()) return make_error(ErrorCode::Internal, "the schedule replay deadlocked");
  }
  return out;
}

// Stage s's buckets: each all-reduce starts when every replica's last backward has its
// layers and the previous bucket is done. Returns when the last one ends (0: none).
double sync_buckets(const Plan& plan, int s, const Replayed& replayed, double stretch, Lookup& costs, Prediction& out) {
  const Layout l = layout_of(plan);
  const StageWork& w0 = replayed.work[0][std::size_t(s)];
  double comm_free = 0;
  for (const Bucket& bucket : w0.buckets) {
    double ready = 0;
    for (int r = 0; r < l.replicas; ++r) {
      const auto& last_backward = replayed.timed[std::size_t(r)][std::size_t(s)].back();
      ready = std::max(ready, layer_done_times(last_backward, replayed.work[std::size_t(r)][std::size_t(s)])[bucket.last_layer]);
    }
    const double start = std::max(ready, comm_free);
    comm_free = start + costs.allreduce(l.replicas, plan.parallel.backend, stretch, double(bucket.bytes));
    for (int r = 0; r < l.replicas; ++r)
      out.spans.push_back({s * l.replicas + r, EventKind::AllReduce, Stream::Comm, -1, -1, start, comm_free, bucket.bytes});
  }
  return comm_free;
}

// One rank's step: its ops with idle gaps and sends, then a straggler's delay, the wait for
// its stage's gradients, the residual and the optimizer.
void lay_out_rank(const Layout& l, int s, int r, const Replayed& replayed, double synced, double residual_ms, Prediction& out) {
  const int rank = s * l.replicas + r;
  const StageWork& w = replayed.work[std::size_t(r)][std::size_t(s)];
  double at = 0, compute = 0;
  for (const analysis::TimedOp& t : replayed.timed[std::size_t(r)][std::size_t(s)]) {
    if (t.start > at) out.spans.push_back({rank, EventKind::Idle, Stream::Compute, -1, -1, at, t.start, 0});
    add_op_spans(t, w, rank, l.chunks, out.spans);
    const double transfer = t.op.forward ? w.to_next_ms : w.to_previous_ms;
    const bool sends = t.op.forward ? s + 1 < l.stages : s > 0;
    if (sends && transfer > 0)
      out.spans.push_back({rank, EventKind::Send, Stream::Comm, -1, l.chunks > 1 ? t.op.microbatch : -1, t.end, t.end + transfer, w.output_bytes});
    compute += t.end - t.start;
    at = t.end;
  }
  const double injected = compute * (w.slowdown - 1) + w.delay_ms;
  if (injected > 0) out.spans.push_back({rank, EventKind::InjectedDelay, Stream::Compute, -1, -1, at, at += injected, 0});
  if (synced > at) out.spans.push_back({rank, EventKind::Wait, Stream::Compute, -1, -1, at, synced, 0}), at = synced;
  at += residual_ms;  // a gap: no span
  out.spans.push_back({rank, EventKind::Optimizer, Stream::Compute, -1, -1, at, at + w.optimizer_ms, 0});
  out.step_ms = std::max(out.step_ms, at + w.optimizer_ms);
}

Status missing_costs(const Lookup& costs, int threads) {
  if (costs.missing().empty()) return {};
  std::string list;
  for (const std::string& k : costs.missing()) list += (list.empty() ? "" : "; ") + k;
  return make_error(ErrorCode::NotFound, "no calibration for: " + list,
                    "run a plan with these layers, threads per rank (" + std::to_string(threads) +
                        ") and replicas on this machine for a few hundred steps, then predict again; "
                        "`loom-cli calibration` lists what is calibrated");
}

}  // namespace

Expected<Prediction> predict_step(const Plan& plan, const Calibration& calibration, const MachineShape& machine) {
  const ModelInfo model = infer_model(plan, nullptr);
  LOOM_TRY(check_covered(plan, model));
  const Layout l = layout_of(plan);
  Prediction out;
  set_threads(plan, machine, out);
  const std::string device = device_tag(DeviceSpec{}, out.threads_per_rank, {}, out.stretch);
  Lookup costs(calibration, out.stretch, out.notes);
  const double residual_ms = costs.optional(residual_key(l.stages > 1, device), 2.0 * l.chunks);
  auto replayed = replay_replicas(plan, model, device, out.stretch, costs);
  if (!replayed.ok()) return replayed.error();
  for (int s = 0; s < l.stages; ++s) {
    const double synced = sync_buckets(plan, s, *replayed, out.stretch, costs, out);
    for (int r = 0; r < l.replicas; ++r) lay_out_rank(l, s, r, *replayed, synced, residual_ms, out);
  }
  LOOM_TRY(missing_costs(costs, out.threads_per_rank));  // after every lookup, the all-reduces' too
  out.samples_per_s = out.step_ms > 0 ? double(plan.training.batch) / out.step_ms * 1000.0 : 0.0;
  std::sort(out.spans.begin(), out.spans.end(), [](const PredictedSpan& a, const PredictedSpan& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.start_ms < b.start_ms;
  });
  return out;
}

}  // namespace loom::predict
