// The predictor (see predictor.h): one steady step per rank from calibrated costs.
#include "loom/predict/predictor.h"

#include <algorithm>
#include <cmath>

#include "loom/analysis/pipeline_replay.h"
#include "async_predictor.h"
#include "rank_memory.h"
#include "step_parts.h"

namespace loom::predict {

using trace::EventKind;
using trace::Stream;

namespace {

// Refuses what the predictor does not cover yet.
Status check_covered(const Plan& plan, const Calibration& calibration, const MachineShape& machine) {
  if (plan.serve) return make_error(ErrorCode::Unavailable, "a serving plan has no training step", "predict_serving predicts it");
  const bool roofline = machine.cluster && !machine.cluster->device.calibrated;
  const auto& devices = plan.parallel.devices;
  const auto gpus = std::count_if(devices.begin(), devices.end(), [](const DeviceSpec& d) { return d.kind == DeviceKind::Gpu; });
  if (gpus > 0 && gpus < std::ssize(devices))
    return make_error(ErrorCode::Unavailable, "a plan with both cpu and gpu ranks is not predicted",
                      "every rank's costs come from one device's calibration");
  if (gpus > 0 && !roofline && calibration.gpu.empty())
    return make_error(ErrorCode::NotFound, "no gpu run in the calibration",
                      "run a plan on this machine's GPU first (its costs calibrate gpu ranks), or predict on a "
                      "cluster file's roofline device");
  const int ranks = world_size(plan);
  if (machine.cluster && ranks > machine.cluster->devices())
    return make_error(ErrorCode::InvalidArgument,
                      "the plan has " + std::to_string(ranks) + " ranks; the cluster '" + machine.cluster->name + "' has " +
                          std::to_string(machine.cluster->devices()) + " devices");
  return {};
}

// The calibration's device tag for the plan's ranks: this machine's GPU for gpu ranks
// (one GPU model a machine), else cpu with the BLAS threads each rank gets.
std::string rank_device(const Plan& plan, const Calibration& calibration, const Prediction& out) {
  const auto& devices = plan.parallel.devices;
  if (!devices.empty() && devices.front().kind == DeviceKind::Gpu)
    return device_tag(devices.front(), out.threads_per_rank, calibration.gpu);
  return device_tag(DeviceSpec{}, out.threads_per_rank, {}, out.stretch);
}

// Every replica's stages and their ops in schedule order (stragglers differ by rank).
struct Replayed {
  std::vector<std::vector<StageWork>> work;                        // [replica][stage]
  std::vector<std::vector<std::vector<analysis::TimedOp>>> timed;  // [replica][stage][op]
};

Expected<Replayed> replay_replicas(const Plan& plan, const ModelInfo& model, StepCosts& costs) {
  const Layout l = layout_of(plan);
  Replayed out;
  out.work.resize(std::size_t(l.replicas));
  for (int r = 0; r < l.replicas; ++r) {
    std::vector<analysis::StageOpTimes> ops;
    auto& stages = out.work[std::size_t(r)];
    for (int s = 0; s < l.stages; ++s) {
      StageWork w = stage_work(plan, model, s, s * l.replicas + r, costs);
      if (s > 0) {  // the gradient of the same tensor
        w.to_previous_ms = stages[std::size_t(s - 1)].to_next_ms;
        w.to_previous_wire_ms = stages[std::size_t(s - 1)].to_next_wire_ms;
      }
      ops.push_back({w.data_ms + sum(w.forward_ms) + w.loss_ms, sum(w.backward_ms), 0, w.to_next_ms, w.to_previous_ms,
                     w.to_next_wire_ms, w.to_previous_wire_ms, w.ahead_ms, w.after_send_ms});
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
double sync_buckets(const Plan& plan, int s, const Replayed& replayed, StepCosts& costs, Prediction& out) {
  const Layout l = layout_of(plan);
  const StageWork& w0 = replayed.work[0][std::size_t(s)];
  std::vector<int> group;
  for (int r = 0; r < l.replicas; ++r) group.push_back(s * l.replicas + r);
  double comm_free = 0;
  for (const Bucket& bucket : w0.buckets) {
    double ready = 0;
    for (int r = 0; r < l.replicas; ++r) {
      const auto& last_backward = replayed.timed[std::size_t(r)][std::size_t(s)].back();
      ready = std::max(ready, layer_done_times(last_backward, replayed.work[std::size_t(r)][std::size_t(s)])[bucket.last_layer]);
    }
    const double start = std::max(ready, comm_free);
    comm_free = start + costs.allreduce(group, double(bucket.bytes));
    for (int r = 0; r < l.replicas; ++r)
      out.spans.push_back({s * l.replicas + r, EventKind::AllReduce, Stream::Comm, -1, -1, start, comm_free, bucket.bytes});
  }
  return comm_free;
}

// One rank's step: its ops with idle gaps and sends, then a straggler's delay, the wait for
// its stage's gradients and for the step's meeting, the residual and the optimizer.
void lay_out_rank(const Layout& l, int s, int r, const Replayed& replayed, double synced, double meeting_ms, double residual_ms,
                  Prediction& out) {
  const int rank = s * l.replicas + r;
  const StageWork& w = replayed.work[std::size_t(r)][std::size_t(s)];
  double at = 0, compute = 0;
  for (const analysis::TimedOp& t : replayed.timed[std::size_t(r)][std::size_t(s)]) {
    if (t.start > at) out.spans.push_back({rank, EventKind::Idle, Stream::Compute, -1, -1, at, t.start, 0});
    add_op_spans(t, w, rank, l.chunks, out.spans);
    const double transfer = t.op.forward ? w.to_next_ms : w.to_previous_ms;
    const bool sends = t.op.forward ? s + 1 < l.stages : s > 0;
    const double sent = t.op.forward ? t.end : t.end - w.after_send_ms;
    if (sends && transfer > 0)  // until it arrives, its wait for the link included
      out.spans.push_back({rank, EventKind::Send, Stream::Comm, -1, l.chunks > 1 ? t.op.microbatch : -1, sent, t.delivered,
                           w.output_bytes});
    compute += t.end - t.start;
    at = t.end;
  }
  const double injected = compute * (w.slowdown - 1) + w.delay_ms;
  if (injected > 0) out.spans.push_back({rank, EventKind::InjectedDelay, Stream::Compute, -1, -1, at, at += injected, 0});
  if (synced > at) out.spans.push_back({rank, EventKind::Wait, Stream::Compute, -1, -1, at, synced, 0}), at = synced;
  if (meeting_ms > 0) out.spans.push_back({rank, EventKind::Wait, Stream::Compute, -1, -1, at, at + meeting_ms, 0}), at += meeting_ms;
  at += residual_ms;  // a gap: no span
  out.spans.push_back({rank, EventKind::Optimizer, Stream::Compute, -1, -1, at, at + w.optimizer_ms, 0});
  out.step_ms = std::max(out.step_ms, at + w.optimizer_ms);
}

// Micro-batches whose activations a stage holds at once: forwards run less backwards done.
int most_in_flight(const std::vector<analysis::TimedOp>& ops) {
  int now = 0, most = 0;
  for (const analysis::TimedOp& t : ops) most = std::max(most, now += t.op.forward ? 1 : -1);
  return most;
}

// Tensors of state the optimizer keeps per parameter tensor: momentum one, Adam two.
int optimizer_states(const Plan& plan) {
  const OptimizerKind optimizer = plan.training.optimizer.kind;
  return optimizer == OptimizerKind::Adam ? 2 : optimizer == OptimizerKind::Momentum ? 1 : 0;
}

// What each rank holds at its peak (see RankMemory): its stage's floats (rank_memory.h)
// for the micro-batches its schedule holds at once.
Expected<std::vector<RankMemory>> memory_per_rank(const Plan& plan, const ModelInfo& model, const Replayed& replayed) {
  const Layout l = layout_of(plan);
  const int states = optimizer_states(plan);
  const auto samples = std::int64_t(l.samples);
  std::vector<RankMemory> out(std::size_t(l.replicas * l.stages));
  for (int s = 0; s < l.stages; ++s)
    for (int r = 0; r < l.replicas; ++r) {
      const int rank = s * l.replicas + r;
      const StageWork& w = replayed.work[std::size_t(r)][std::size_t(s)];
      RankMemory& m = out[std::size_t(rank)];
      const std::int64_t params = stage_param_floats(model, s);
      m.parameters = m.gradients = params * 4;
      m.optimizer_state = states * params * 4;
      const auto& devices = plan.parallel.devices;
      const DeviceKind device = std::size_t(rank) < devices.size() ? devices[std::size_t(rank)].kind : DeviceKind::Cpu;
      auto f = stage_floats(plan, model, s, samples, device);
      if (!f.ok()) return f.error();
      m.in_flight = most_in_flight(replayed.timed[std::size_t(r)][std::size_t(s)]);
      m.activations = std::int64_t((f->per_slot * m.in_flight + f->once) * double(samples) * 4);
      // Over MPI the engine packs buckets in host vectors beside the rank's tensors; over
      // NCCL they are device buffers, part of what a device must hold.
      std::int64_t buckets = 0;
      if (plan.parallel.backend == CommBackend::Nccl)
        for (const Bucket& b : w.buckets) buckets += b.bytes;
      m.workspace = std::int64_t(f->workspace * 4) + buckets;
    }
  return out;
}

Status missing_costs(const StepCosts& costs, int threads) {
  if (costs.missing().empty()) return {};
  std::string list;
  for (const std::string& k : costs.missing()) list += (list.empty() ? "" : "; ") + k;
  return make_error(ErrorCode::NotFound, "no calibration for: " + list,
                    "`loom-cli calibrate PLAN` runs the plan briefly in the layouts prediction needs; or run a plan "
                    "with these layers, threads per rank (" + std::to_string(threads) +
                        ") and replicas on this machine, then predict again; `loom-cli calibration` lists what is "
                        "calibrated");
}

// The parameter-server modes: each worker holds the whole model and its gradients but no
// optimizer state (the servers step); each server its shard and that shard's state.
void parameter_server_memory(const Plan& plan, const ModelInfo& model, std::vector<RankMemory>& memory) {
  for (RankMemory& m : memory) m.optimizer_state = 0;
  const int states = optimizer_states(plan);
  for (int i = 0; i < std::max(1, plan.parallel.sync.servers); ++i) {
    RankMemory m;
    m.parameters = model.total_param_bytes / std::max(1, plan.parallel.sync.servers);
    m.optimizer_state = states * m.parameters;
    memory.push_back(m);
  }
}

// The step's meeting of every rank (TrainingLoop::reduce_stats) where it crosses a
// cluster's links: a latency-bound all-reduce that replicas, arriving together, all wait
// for (between two simulated hosts 2 ms apart, a Wait of 4 ms and more a step). In a
// pipeline the stages arrive at different times and a later stage, released last, next
// waits for an activation anyway, so there it is left out.
double step_meeting(const Plan& plan, StepCosts& costs) {
  const Layout l = layout_of(plan);
  if (l.stages > 1) return 0;
  std::vector<int> world;
  for (int r = 0; r < l.replicas; ++r) world.push_back(r);
  return costs.step_meeting(world);
}

// Synchronous training: every replica's stages replayed, buckets synced, ranks laid out.
void predict_synchronous(const Plan& plan, const Replayed& replayed, StepCosts& costs, double residual_ms, Prediction& out) {
  const Layout l = layout_of(plan);
  const double meeting_ms = step_meeting(plan, costs);
  for (int s = 0; s < l.stages; ++s) {
    const double synced = sync_buckets(plan, s, replayed, costs, out);
    for (int r = 0; r < l.replicas; ++r) lay_out_rank(l, s, r, replayed, synced, meeting_ms, residual_ms, out);
  }
  out.cycle_ms = out.step_ms;
  out.samples_per_s = out.step_ms > 0 ? double(plan.training.batch) / out.step_ms * 1000.0 : 0.0;
}

// The cluster to predict on where it is not the one given as it stands: the given one with
// its "calibrated" link between hosts filled from the links this machine's runs measured;
// without one, the plan's own hosts where its ranks span several and their link was
// measured (host_links.h). nullopt: the given machine as it is.
Expected<std::optional<Cluster>> learnt_cluster(const Plan& plan, const Calibration& calibration, const MachineShape& machine,
                                                std::vector<std::string>& notes) {
  std::string note;
  std::optional<Cluster> out;
  if (machine.cluster && machine.cluster->between_hosts.calibrated) {
    out = *machine.cluster;
    LOOM_TRY(fill_calibrated_link(*out, calibration.links, &note));
  } else if (!machine.cluster) {
    out = cluster_of_plan_hosts(plan, calibration.links, calibration.host, &note);
  }
  if (!note.empty()) notes.push_back(note);
  return out;
}

// Whose cores a parameter-server simulation shares: one machine's where the cluster's
// hosts are its namespaces; each host this machine's where no cluster file was given
// (the plan's own hosts, or this machine); none on a cluster file's separate hosts.
Crowding crowding_of(const MachineShape& given, const MachineShape& machine, const Calibration& calibration) {
  const int shared = machine.cluster ? machine.cluster->shared_cores : 0;
  if (shared > 0) return {shared, true, calibration.contended_share};
  return {given.cluster ? 0 : machine.cores, false, calibration.contended_share};
}

}  // namespace

Expected<Prediction> predict_step(const Plan& plan, const Calibration& calibration, const MachineShape& given) {
  const ModelInfo model = infer_model(plan, nullptr);
  Prediction out;
  auto learnt = learnt_cluster(plan, calibration, given, out.notes);
  if (!learnt.ok()) return learnt.error();
  MachineShape machine = given;
  if (*learnt) machine.cluster = &**learnt;
  LOOM_TRY(check_covered(plan, calibration, machine));
  const Layout l = layout_of(plan);
  set_threads(plan, machine, out);
  const std::string device = rank_device(plan, calibration, out);
  out.device = device;
  StepCosts costs(plan, calibration, machine.cluster, device, out.stretch, out.notes, machine.device_speed, out.threads_per_rank);
  const double residual_ms = costs.residual(2.0 * l.chunks);
  auto replayed = replay_replicas(plan, model, costs);
  if (!replayed.ok()) return replayed.error();
  auto memory = memory_per_rank(plan, model, *replayed);
  if (!memory.ok()) return memory.error();
  out.memory = std::move(*memory);
  if (parameter_server_mode(plan)) {
    LOOM_TRY(predict_parameter_servers(plan, model, costs, residual_ms, crowding_of(given, machine, calibration), out));
    parameter_server_memory(plan, model, out.memory);
  } else if (plan.parallel.sync.mode == SyncMode::LocalSgd && l.replicas > 1) {
    predict_local_sgd(plan, model, costs, residual_ms, out);
  } else {
    predict_synchronous(plan, *replayed, costs, residual_ms, out);
  }
  LOOM_TRY(missing_costs(costs, out.threads_per_rank));  // after every lookup, the all-reduces' too
  std::sort(out.spans.begin(), out.spans.end(), [](const PredictedSpan& a, const PredictedSpan& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.start_ms < b.start_ms;
  });
  return out;
}

}  // namespace loom::predict
