// The shared pieces of a predicted step (see step_parts.h).
#include "step_parts.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace loom::predict {

using trace::EventKind;
using trace::Stream;

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

std::vector<std::int64_t> tensor_bytes(const LayerInfo& layer) {
  if (layer.params <= 0) return {};
  if (layer.bias_params <= 0) return {layer.params * 4};
  return {(layer.params - layer.bias_params) * 4, layer.bias_params * 4};
}

// Buckets as GradientSync forms them: tensor by tensor from the last parameter back, a new
// bucket when the next tensor would overflow a filled one. A bucket is complete when the
// backward of the earliest layer it holds a tensor of has run.
std::vector<Bucket> buckets_of(const std::vector<const LayerInfo*>& layers, double bucket_mb) {
  const auto limit = std::int64_t(bucket_mb * 1024.0 * 1024.0);
  std::vector<Bucket> buckets;
  std::int64_t filled = 0;
  for (std::size_t i = layers.size(); i-- > 0;) {
    const std::vector<std::int64_t> tensors = tensor_bytes(*layers[i]);
    for (auto t = tensors.rbegin(); t != tensors.rend(); ++t) {
      if (buckets.empty() || (filled > 0 && filled + *t > limit)) buckets.push_back({}), filled = 0;
      buckets.back().bytes += *t;
      buckets.back().last_layer = i;
      filled += *t;
    }
  }
  return buckets;
}

std::int64_t elements(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}


Layout layout_of(const Plan& plan) {
  const ParallelSpec& p = plan.parallel;
  Layout l;
  l.replicas = std::max(1, p.data_parallel);
  l.stages = std::max(1, p.stages);
  l.chunks = std::max(1, p.microbatches) * std::max(1, p.grad_accumulation);
  l.samples = double(plan.training.batch) / double(l.replicas * l.chunks);
  return l;
}

namespace {

// Rows [first, end) of a parallel block (the block and every layer nested in it).
std::size_t block_end(const ModelInfo& model, std::size_t first) {
  std::size_t end = first + 1;
  while (end < model.layers.size() && model.layers[end].depth > model.layers[first].depth) ++end;
  return end;
}

// Where a parallel block whose branches run on different stages concatenates their
// outputs (the engine's Concat unit, stage_graph.h): the stage of the layer after the
// block, or the last branch's when the block ends the model. -1: one stage runs it all,
// inside the block's own span.
int concat_stage(const ModelInfo& model, std::size_t row) {
  const std::size_t end = block_end(model, row);
  std::set<int> stages;
  for (std::size_t i = row + 1; i < end; ++i) stages.insert(model.layers[i].stage);
  if (stages.size() < 2) return -1;
  return end < model.layers.size() ? model.layers[end].stage : model.layers[end - 1].stage;
}

// The stage that makes the input of the top-level layer at `row`: the previous top-level
// layer's (a split block's: where it concatenates); -1 for the batch itself.
int input_stage(const ModelInfo& model, std::size_t row) {
  for (std::size_t i = row; i-- > 0;) {
    const LayerInfo& prev = model.layers[i];
    if (prev.depth != 0) continue;
    if (prev.kind == LayerKind::Parallel && concat_stage(model, i) >= 0) return concat_stage(model, i);
    return prev.stage;
  }
  return -1;
}

// Whether `layer` is in a branch of a split top-level block placed on `stage` whose input
// is the batch or made on `stage`: it needs nothing from another stage.
bool fed_on_stage(const ModelInfo& model, const LayerInfo& layer, int stage) {
  if (layer.depth == 0 || layer.stage != stage) return false;
  std::size_t row = std::size_t(&layer - model.layers.data());
  while (row > 0 && model.layers[row].depth > 0) --row;  // the top-level block holding it
  if (concat_stage(model, row) < 0) return false;
  const int from = input_stage(model, row);
  return from < 0 || from == stage;
}

}  // namespace

// A stage's layers in the order its forward runs them: a split parallel block's
// concatenation after the branch layers before it (it costs as the block's own span).
std::vector<const LayerInfo*> stage_layers(const ModelInfo& model, int stage) {
  std::vector<const LayerInfo*> out;
  std::vector<std::pair<std::size_t, const LayerInfo*>> concats;  // (row its block ends at, block)
  for (std::size_t row = 0; row < model.layers.size(); ++row) {
    for (auto c = concats.begin(); c != concats.end();)
      if (c->first == row) out.push_back(c->second), c = concats.erase(c);
      else ++c;
    const LayerInfo& layer = model.layers[row];
    if (layer.kind == LayerKind::Parallel) {
      if (concat_stage(model, row) == stage) concats.emplace_back(block_end(model, row), &layer);
    } else if (layer.stage == stage) {
      out.push_back(&layer);
    }
  }
  for (const auto& c : concats) out.push_back(c.second);
  return out;
}

StageWork stage_work(const Plan& plan, const ModelInfo& model, int stage, int rank, StepCosts& costs) {
  const Layout l = layout_of(plan);
  StageWork w;
  w.layers = stage_layers(model, stage);
  for (const LayerInfo* layer : w.layers) {
    w.forward_ms.push_back(costs.forward(*layer, l.samples));
    w.backward_ms.push_back(costs.backward(*layer, l.samples));
  }
  // The first stage reads the inputs, the loss stage the labels: both load the batch.
  if (stage == 0 || stage == l.stages - 1) w.data_ms = costs.data(l.samples);
  if (stage == l.stages - 1) w.loss_ms = costs.loss(l.samples);
  const std::int64_t params = std::size_t(stage) < model.stage_params.size() ? model.stage_params[std::size_t(stage)] : 0;
  w.optimizer_ms = costs.optimizer(double(params));
  if (!w.layers.empty() && stage < l.stages - 1) {
    w.output_bytes = std::int64_t(double(elements(w.layers.back()->output)) * l.samples * sizeof(float));
    w.to_next_ms = costs.send(rank, rank + l.replicas, double(w.output_bytes));
    w.to_next_wire_ms = costs.send_wire(rank, rank + l.replicas, double(w.output_bytes));
  }
  if (l.replicas > 1) w.buckets = buckets_of(w.layers, plan.parallel.bucket_mb);
  // PipelineTrainer's forward loads the batch first, then goes unit by unit, receiving
  // only where a unit needs it: a branch fed by the batch runs before the stage receives
  // anything, and its backward after the gradient of the other branches has left.
  if (stage > 0) {
    w.ahead_ms = w.data_ms;
    for (std::size_t i = 0; i < w.layers.size() && fed_on_stage(model, *w.layers[i], stage); ++i) {
      w.ahead_ms += w.forward_ms[i];
      w.after_send_ms += w.backward_ms[i];
    }
  }
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

// BLAS threads per rank as the ranks will set them (a machine's cores over the ranks on
// it), and how far the busiest host's threads outnumber its cores.
// On a cluster, ranks fill its hosts in order; on hosts that share one machine's cores
// (Cluster::shared_cores), every rank is on that machine.
void set_threads(const Plan& plan, const MachineShape& machine, Prediction& out) {
  int crowd = std::max(1, most_ranks_on_a_host(plan)), cores = machine.cores;
  if (machine.cluster) {
    if (!machine.cluster->device.calibrated) return;  // a roofline device: no BLAS threads, nothing shared
    const int ranks = layout_of(plan).replicas * layout_of(plan).stages;
    crowd = std::min(machine.cluster->devices_per_host, ranks);
    if (machine.cluster->shared_cores > 0) crowd = ranks, cores = machine.cluster->shared_cores;
  }
  out.threads_per_rank = plan.training.threads > 0 ? plan.training.threads : std::max(1, cores / crowd);
  out.stretch = std::max(1.0, double(crowd * out.threads_per_rank) / double(std::max(1, cores)));
  if (out.stretch > 1) {
    const std::string x = std::to_string(out.stretch).substr(0, 4) + "x";
    out.notes.push_back("ranks outnumber cores " + x + ": costs measured so crowded (else the nearest crowding measured) " +
                        "as they are, unshared ones stretched " + x);
  }
}

int most_ranks_on_a_host(const Plan& plan) {
  std::map<std::string, int> ranks_on_host;
  int most = 0;
  for (const DeviceSpec& d : plan.parallel.devices) most = std::max(most, ++ranks_on_host[d.host]);
  return most;
}

}  // namespace loom::predict
