// StepCosts (see step_costs.h): calibrated costs by key, a roofline for a cluster's
// device, alpha-beta for its links.
#include "step_costs.h"

#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <cmath>

namespace loom::predict {

namespace {

double elements(const Shape& shape) {
  double n = 1;
  for (std::int64_t d : shape) n *= double(d);
  return n;
}

// Bytes an optimizer step moves per parameter: read weight and gradient, write the weight,
// and read and write each state tensor (momentum: one, Adam: two).
double optimizer_bytes_per_param(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::Sgd: return 12;
    case OptimizerKind::Momentum: return 20;
    case OptimizerKind::Adam: return 28;
  }
  return 12;
}

}  // namespace

StepCosts::StepCosts(const Plan& plan, const Calibration& calibration, const Cluster* cluster, std::string device, double stretch,
                     std::vector<std::string>& notes, double speed, int threads_per_rank)
    : plan_(plan), cal_(calibration), cluster_(cluster), device_(std::move(device)), stretch_(stretch), speed_(speed), notes_(notes) {
  if (roofline())
    note("device: roofline of " + cluster_->device.name + " at " + std::to_string(int(cluster_->device.efficiency * 100)) +
         "% of its peaks; no residual");
  else if (auto it = cal_.by_configuration.find(configuration_of(plan_, threads_per_rank)); it != cal_.by_configuration.end()) {
    own_ = &it->second;
    note("costs: this configuration's own runs first (it was measured), then every run's");
  }
}

// ---- compute ---------------------------------------------------------------------------

double StepCosts::roofline_ms(double flops, double bytes, int kernels) const {
  const ClusterDevice& d = cluster_->device;
  const double compute = flops / (d.peak_tflops * d.efficiency * 1e9);  // FLOP per ms
  const double memory = bytes / (d.memory_bandwidth_gbs * d.efficiency * 1e6);  // bytes per ms
  return std::max(compute, memory) + kernels * d.launch_us / 1e3;
}

double StepCosts::forward_at_speed(const LayerInfo& l, double samples) {
  if (!roofline()) return layer(forward_key(l, device_), l, samples);
  const double bytes = double(l.param_bytes) + (elements(l.input) + elements(l.output)) * samples * 4;
  return roofline_ms(double(l.forward_flops) * samples, bytes, 1);
}

// The input's gradient and the weights' each cost a forward's FLOPs; a layer without
// weights computes only the first.
double StepCosts::backward_at_speed(const LayerInfo& l, double samples) {
  if (!roofline()) return layer(backward_key(l, device_), l, samples);
  const int products = l.params > 0 ? 2 : 1;
  const double bytes = 2.0 * double(l.param_bytes) + (elements(l.input) + 2 * elements(l.output)) * samples * 4;
  return roofline_ms(products * double(l.forward_flops) * samples, bytes, products);
}

// A roofline device copies the batch from its host.
double StepCosts::data_at_speed(double samples) {
  if (!roofline()) return cost(data_key(plan_), samples, stretch_);
  const double bytes = elements(plan_.model.input) * samples * 4;
  return bytes / (cluster_->device.host_link_gbs * 1e6) + cluster_->device.launch_us / 1e3;
}

// Softmax and cross-entropy read the logits and write probabilities and their gradient.
double StepCosts::loss_at_speed(double samples) {
  if (!roofline()) return cost(loss_key(plan_, device_), samples, stretch_);
  return roofline_ms(0, 3.0 * dataset_classes(plan_) * samples * 4, 2);
}

double StepCosts::optimizer_at_speed(double params) {
  if (!roofline()) return cost(optimizer_key(plan_, device_), params, stretch_);
  return roofline_ms(0, params * optimizer_bytes_per_param(plan_.training.optimizer.kind), 1);
}

// The outer step reads each replica's copy and the sum and writes the mean: 12 bytes a
// parameter. Never measured here: a pass of the optimizer over the same parameters.
double StepCosts::outer_step_at_speed(double params) {
  if (roofline()) return roofline_ms(0, params * 12.0, 1);
  const std::string key = outer_step_key(device_);
  if (find(key).cost) return cost(key, params, stretch_);
  note(key + ": not calibrated, taken as an optimizer step over the same parameters");
  return optimizer_at_speed(params);
}

// Without a residual for this kind of plan (pipeline or not) on this device, the other
// kind's at the same ops per step: counting it as 0 would favour whatever was never
// measured (a layout search would pick it).
double StepCosts::residual(double ops) {
  if (roofline()) return 0;
  const std::string key = residual_key(plan_, device_);
  if (const Found f = find(key); f.cost) {
    return cost(key, ops, stretch_);
  }
  // Not calibrated for this kind of plan: the nearest kind that is (a pipeline and one
  // stage stand in for each other; the asynchronous modes take one stage's).
  const bool pipeline = plan_.parallel.stages > 1;
  for (const std::string& other : {residual_key(pipeline, device_), residual_key(!pipeline, device_)}) {
    if (other == key || !find(other).cost) continue;
    note(key + ": not calibrated, taken from " + other);
    return cost(other, ops, stretch_);
  }
  note(key + ": not calibrated, counted as 0");
  return 0;
}

// A layer's pass; when this size was never measured, the measured layer of the same kind,
// device and direction nearest in work, scaled by work to the power the two nearest
// measured sizes show: a larger GEMM does more work per millisecond, so time grows slower
// than work (the CNN's convolutions from the branches' smaller ones: +73% scaled in
// proportion, +4% this way). With one size measured, in proportion.
double StepCosts::layer(const std::string& key, const LayerInfo& l, double samples) {
  if (find(key).cost) return cost(key, samples, stretch_);
  const double work = layer_work(l);
  for (const std::string& k : {key, unshared(key)}) {
    const std::vector<Sized> near = nearest_of_kind(k, work, samples);
    if (near.empty()) continue;
    const double exponent = near.size() < 2 ? 1.0 : work_exponent(near[0], near[1]);
    char power[16];
    std::snprintf(power, sizeof power, "%.2f", exponent);
    note(key + ": not measured, scaled from a " + std::string(layer_kind_name(l.kind)) + " layer of another size as work^" +
         power);
    const double stretch = k == key ? 1.0 : stretch_;
    return stretch * near[0].ms * std::pow(work / near[0].work, exponent);
  }
  return cost(key, samples, stretch_);  // records it as missing
}

// How time grows with work between two measured sizes, bounded: never faster than work,
// and not so flat that noise between two close sizes makes a large layer nearly free.
double StepCosts::work_exponent(const Sized& a, const Sized& b) {
  if (a.ms <= 0 || b.ms <= 0) return 1.0;
  return std::clamp(std::log(b.ms / a.ms) / std::log(b.work / a.work), 0.25, 1.0);
}

// ---- communication ---------------------------------------------------------------------

double StepCosts::allreduce(const std::vector<int>& ranks, double bytes) {
  if (cluster_ && !cluster_->ring_link(ranks).measured) {
    std::string algorithm;
    const double ms = linked_allreduce_ms(ranks, bytes, &algorithm);
    note("all-reduce over " + std::to_string(ranks.size()) + " ranks: " + algorithm +
         (mpi() ? ", as Loom's MPI communicator runs it at this size" : ", the fastest for these links"));
    return ms;
  }
  return allreduce_calibrated(int(ranks.size()), bytes);
}

// Over a cluster's written-down links: MPI ranks run Loom's own choice of algorithm,
// NCCL ranks the fastest (its tuner's aim).
double StepCosts::linked_allreduce_ms(const std::vector<int>& ranks, double bytes, std::string* algorithm) const {
  return mpi() ? mpi_allreduce_ms(*cluster_, ranks, bytes, algorithm) : allreduce_ms(*cluster_, ranks, bytes, algorithm);
}

double StepCosts::step_meeting(const std::vector<int>& ranks) {
  if (!cluster_ || ranks.size() < 2) return 0;
  if (!cluster_->spans_hosts(ranks) || cluster_->ring_link(ranks).measured) return 0;
  return linked_allreduce_ms(ranks, 3.0 * sizeof(float), nullptr);
}

double StepCosts::send(int from, int to, double bytes) {
  if (cluster_) {
    const Link& link = cluster_->link(from, to);
    if (!link.measured) return link.ms(bytes);
  }
  return cost(p2p_key(plan_.parallel.backend, stretch_), bytes, 1.0);
}

double StepCosts::send_wire(int from, int to, double bytes) const {
  if (!cluster_) return 0;
  const Link& link = cluster_->link(from, to);
  return link.measured ? 0 : bytes / (link.bandwidth_gbs * 1e6);
}

double StepCosts::push_receive(int from, int to, double bytes) {
  const bool on_links = cluster_ && !cluster_->link(from, to).measured;
  const std::string key = push_receive_key(plan_.parallel.backend, stretch_);
  if (on_links || !find(key).cost) return send(from, to, bytes);
  return cost(key, bytes, 1.0);
}

// Of key's cost measured under other crowdings (x > 1), the one nearest this plan's (log
// distance).
StepCosts::Found StepCosts::nearest_crowding(const std::string& key) const {
  const std::string base = unshared(key);
  Found best;
  double best_distance = 0;
  for (const auto& [k, c] : cal_.costs) {
    if (unshared(k) != base || k == base) continue;
    const double crowding = sharing_of(k);
    const double distance = std::abs(std::log(crowding / stretch_));
    if (crowding > 1 && (!best.cost || distance < best_distance))
      best = {&c, Source::OtherCrowding, k, crowding}, best_distance = distance;
  }
  return best;
}

namespace {

// How Loom's all-reduce over R ranks runs (mpi_communicator.cpp): over MPI, recursive
// doubling for 4, 8, ... ranks (log2 R exchanges of the whole buffer), else a ring
// (2 (R - 1) exchanges of 1/R of it); NCCL's ring otherwise.
bool doubles(int ranks, CommBackend backend) {
  return backend == CommBackend::Mpi && ranks > 2 && (ranks & (ranks - 1)) == 0;
}
// Exchanges, each a hand-off between two ranks.
double exchanges(int ranks, CommBackend backend) {
  return doubles(ranks, backend) ? std::log2(double(ranks)) : 2.0 * (ranks - 1);
}
// The time measured at the size nearest `units` (log distance), not scaled by size.
double nearest_size_ms(const LinearCost& cost, double units) {
  const auto distance = [units](const std::pair<double, double>& p) {
    return std::abs(std::log(std::max(p.first, 1.0) / std::max(units, 1.0)));
  };
  const auto nearest = std::min_element(cost.points.begin(), cost.points.end(),
                                        [&](const auto& a, const auto& b) { return distance(a) < distance(b); });
  return nearest == cost.points.end() ? 0.0 : std::max(0.0, nearest->second);
}

// Bytes each rank sends, per byte of the buffer.
double bytes_sent(int ranks, CommBackend backend) {
  return doubles(ranks, backend) ? std::log2(double(ranks)) : 2.0 * (ranks - 1) / ranks;
}

}  // namespace

// Not measured at this count, the nearest count measured (same backend and crowding)
// scaled by the bytes each rank sends, as Loom's all-reduce runs at each count.
// Where ranks outnumber cores and this count was not measured so crowded, a crowded one
// nearest in count and crowding (crowded_allreduce) before any uncrowded measurement.
double StepCosts::allreduce_calibrated(int replicas, double bytes) {
  const CommBackend backend = plan_.parallel.backend;
  const std::string key = allreduce_key(replicas, backend, stretch_);
  const Found exact = find(key);
  if (exact.cost && exact.source == Source::Exact) return cost(key, bytes, 1.0);
  if (stretch_ > 1)
    if (const auto crowded = crowded_allreduce(replicas, bytes)) return *crowded;
  if (exact.cost) return cost(key, bytes, 1.0);
  for (int delta = 1; delta < 4096; ++delta)
    for (int other : {replicas - delta, replicas + delta}) {
      if (other < 2 || !find(allreduce_key(other, backend, stretch_)).cost) continue;
      note(key + ": not measured, scaled from " + std::to_string(other) + " ranks by the bytes each rank sends");
      return cost(allreduce_key(other, backend, stretch_), bytes, 1.0) * bytes_sent(replicas, backend) /
             bytes_sent(other, backend);
    }
  return cost(key, bytes, 1.0);  // records it as missing
}

// A crowded all-reduce lasts as long as its ranks take turns on the cores: each exchange
// waits for a peer to be scheduled, whatever the bytes (on this project's VM 4 ranks on 2
// cores took 1.4 ms for 138 KB and 0.8 ms for 803 KB, against 0.06 ms uncrowded). So the
// crowded measurement nearest in ranks and crowding (log distance), scaled by the
// exchanges: per exchange, 2 ranks on 2 cores with 2 more took 0.14 ms, 3 on 2 cores 0.34
// and 4 on 2 cores 0.29 (session 28's runs), where per ring step they took 0.28, 0.67 and
// 0.19: Loom's 4 ranks double (2 exchanges), its 3 go round a ring (4). Its time at its
// size nearest this one, not scaled by size (3 ranks measured at 940 KB in proportion put
// 4 ranks' 138 KB bucket at 0.4 ms; it took 3.0). None: no crowded all-reduce measured.
std::optional<double> StepCosts::crowded_allreduce(int replicas, double bytes) {
  const std::string backend = plan_.parallel.backend == CommBackend::Nccl ? " nccl" : " mpi";
  std::string best;
  int best_ranks = 0;
  double best_distance = 0;
  for (const auto& [k, c] : cal_.costs) {
    if (!k.starts_with("all-reduce ") || k.find(backend + " shared") == std::string::npos) continue;
    const int ranks = std::atoi(k.c_str() + 11);
    const double crowding = sharing_of(k);
    if (ranks < 2 || crowding <= 1) continue;
    const double distance = std::abs(std::log(double(replicas) / ranks)) + std::abs(std::log(stretch_ / crowding));
    if (best.empty() || distance < best_distance) best = k, best_ranks = ranks, best_distance = distance;
  }
  if (best.empty()) return std::nullopt;
  note(allreduce_key(replicas, plan_.parallel.backend, stretch_) + ": not measured, taken from " + best +
       " scaled by the exchanges (crowded ranks wait for a core at each)");
  const CommBackend kind = plan_.parallel.backend;
  return nearest_size_ms(cal_.costs.at(best), bytes) * exchanges(replicas, kind) / exchanges(best_ranks, kind);
}


// ---- calibrated keys -------------------------------------------------------------------

// This configuration's own runs first (Calibration::by_configuration), then every run's;
// where this crowding was never measured, the nearest crowding that was, as it is: a
// crowded rank yields its core while it waits, so its compute spans are stretched far
// less than the crowding (4 ranks on 2 cores: linear layers 0.96-1.22x unshared, session
// 35) and the crowding shows in its waits; then the unshared measurement, stretched.
StepCosts::Found StepCosts::find(const std::string& key) const {
  if (own_)
    if (auto it = own_->find(key); it != own_->end()) return {&it->second, Source::Exact, key};
  if (auto it = cal_.costs.find(key); it != cal_.costs.end()) return {&it->second, Source::Exact, key};
  if (stretch_ > 1)
    if (Found nearest = nearest_crowding(key); nearest.cost) return nearest;
  if (auto it = cal_.costs.find(unshared(key)); it != cal_.costs.end()) return {&it->second, Source::Unshared, it->first};
  return {};
}

double StepCosts::cost(const std::string& key, double units, double stretch) {
  const Found f = find(key);
  if (!f.cost) {
    missing_.insert(key);
    return 0;
  }
  if (f.source == Source::OtherCrowding) note(key + ": not measured, taken from " + f.key);
  if (f.source == Source::Unshared) note(key + ": measured only unshared" + (stretch > 1 ? ", stretched" : ""));
  return std::max(0.0, f.cost->at(units)) * (f.source == Source::Unshared ? stretch : 1.0);
}

void StepCosts::note(const std::string& text) {
  if (noted_.insert(text).second) notes_.push_back(text);
}

// Measured layers of key's kind, direction and device, nearest in work first: the nearest
// and the next of another work, as (work, ms at `samples`).
std::vector<StepCosts::Sized> StepCosts::nearest_of_kind(const std::string& key, double work, double samples) const {
  const std::size_t kind_end = key.find(' ', key.find(' ') + 1);
  const std::string prefix = key.substr(0, kind_end + 1), device = key.substr(key.rfind(" @"));
  std::vector<std::pair<double, Sized>> by_distance;
  for (const auto& [k, c] : cal_.costs) {
    if (!k.starts_with(prefix) || !k.ends_with(device) || c.work <= 0 || work <= 0) continue;
    by_distance.push_back({std::abs(std::log(c.work / work)), {c.work, c.at(samples)}});
  }
  std::sort(by_distance.begin(), by_distance.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Sized> out;
  for (const auto& [distance, sized] : by_distance)
    if (out.empty() || (out.size() < 2 && sized.work != out[0].work)) out.push_back(sized);
  return out;
}

}  // namespace loom::predict
