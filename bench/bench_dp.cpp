// Data-parallel training throughput of Loom under mpirun: one replica per rank, gradients
// summed by GradientSync's bucketed non-blocking all-reduce. The plan's data_parallel and
// device list are overridden to the MPI world size, so any single-process plan can be run
// at any N. Warmup steps run untimed, then the timed window is taken from the trainer's
// on_step hook (steps W .. W+S); the final evaluation falls after the window.
// Rank 0 prints one JSON line: global samples/s, step time and, when traced, how much of
// the gradient all-reduce was hidden behind compute:
//   comm    = union of AllReduce spans (bucket issued -> completion seen)
//   exposed = the part of comm not overlapped by Forward/Backward/Loss/Optimizer spans
//   hidden_fraction = 1 - exposed / comm       (target >= 0.5 when the model allows)
// A span ends when completion is *seen* (polled between layers), so comm can include
// compute after the transfer finished, which flatters hidden_fraction. A cross-check that
// does not depend on span ends is printed too:
//   comm_alone = the same buckets all-reduced after training with nothing to overlap
//   hidden_vs_alone = 1 - wait / comm_alone    (wait = time blocked after backward)
// --notrace passes a null recorder, so traced and untraced runs differ only in recording.
//   mpirun -n N bench_dp PLAN [--steps S] [--warmup W] [--threads T] [--bucket-mb B] [--notrace]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/comm/mpi.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/rank_setup.h"
#include "loom/engine/data_parallel_trainer.h"
#include "loom/trace/recorder.h"

using namespace loom;

namespace {

struct Options {
  std::string plan_path;
  std::int64_t steps = 100;
  std::int64_t warmup = 10;
  int threads = 0;
  double bucket_mb = 0;  // 0: the plan's
  bool trace = true;
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string("0"); };
    if (a == "--steps") o.steps = std::stoll(next());
    else if (a == "--warmup") o.warmup = std::stoll(next());
    else if (a == "--threads") o.threads = std::stoi(next());
    else if (a == "--bucket-mb") o.bucket_mb = std::stod(next());
    else if (a == "--notrace") o.trace = false;
    else if (!a.empty() && a[0] != '-' && o.plan_path.empty()) o.plan_path = a;
    else return false;
  }
  return !o.plan_path.empty() && o.steps > 0 && o.warmup >= 0;
}

int fail(int rank, const std::string& message) {
  std::fprintf(stderr, "bench_dp rank %d: %s\n", rank, message.c_str());
  return 1;
}

// Same environment variables loom-rank reads: BLAS threads are divided among local ranks.
int ranks_on_this_host(int world) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  }
  return world;
}

// The plan as N synchronous replicas on N cpu devices; errors from validate_plan (e.g. a
// batch not divisible by N) are returned as text.
std::string plan_for_world(Plan& plan, int world, const Options& o) {
  if (plan.parallel.stages != 1 || plan.parallel.sync.mode != SyncMode::AllReduce) {
    return "bench_dp measures synchronous data parallelism: the plan must have 1 stage and sync mode allreduce";
  }
  plan.parallel.data_parallel = world;
  plan.parallel.devices.assign(std::size_t(world), DeviceSpec{});
  plan.parallel.backend = CommBackend::Mpi;
  if (o.bucket_mb > 0) plan.parallel.bucket_mb = o.bucket_mb;
  if (o.threads > 0) plan.training.threads = o.threads;
  plan.training.steps = o.warmup + o.steps;
  plan.training.eval_every = plan.training.steps + 1;  // only the final evaluation, after the window
  std::string text;
  for (const PlanError& e : validate_plan(plan)) text += (text.empty() ? "" : "; ") + e.path + ": " + e.reason;
  return text;
}

using Interval = std::pair<std::int64_t, std::int64_t>;

std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (!out.empty() && i.first <= out.back().second) out.back().second = std::max(out.back().second, i.second);
    else out.push_back(i);
  }
  return out;
}

std::int64_t length(const std::vector<Interval>& v) {
  std::int64_t total = 0;
  for (const Interval& i : v) total += i.second - i.first;
  return total;
}

// Total length of the intersection of two merged (sorted, disjoint) interval lists.
std::int64_t overlap(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::int64_t total = 0;
  for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    total += std::max<std::int64_t>(0, std::min(a[i].second, b[j].second) - std::max(a[i].first, b[j].first));
    if (a[i].second < b[j].second) ++i;
    else ++j;
  }
  return total;
}

struct Overlap {
  double comm_ms = 0;     // per timed step
  double exposed_ms = 0;
  double wait_ms = 0;     // the trainer's Wait span: blocked in finish_step after backward
};

bool is_compute(trace::EventKind k) {
  using trace::EventKind;
  return k == EventKind::Forward || k == EventKind::Backward || k == EventKind::Loss || k == EventKind::Optimizer;
}

// This rank's events of the timed steps only (warmup and evaluation left out).
Overlap analyse(trace::Recorder& recorder, std::int64_t first_step, std::int64_t steps) {
  std::vector<trace::Event> events;
  recorder.drain(events);
  std::vector<Interval> comm, compute;
  std::int64_t wait_ns = 0;
  for (const trace::Event& e : events) {
    if (e.step < first_step || e.step >= first_step + steps) continue;
    if (e.kind == trace::EventKind::AllReduce) comm.emplace_back(e.start_ns, e.end_ns);
    else if (is_compute(e.kind)) compute.emplace_back(e.start_ns, e.end_ns);
    else if (e.kind == trace::EventKind::Wait) wait_ns += e.end_ns - e.start_ns;
  }
  comm = merged(std::move(comm));
  compute = merged(std::move(compute));
  const double per_step_ms = 1e-6 / double(steps);
  return {double(length(comm)) * per_step_ms, double(length(comm) - overlap(comm, compute)) * per_step_ms,
          double(wait_ns) * per_step_ms};
}

// Median time of one step's gradient all-reduce with no compute to hide behind: the same
// bucket layout, every bucket started at once and waited for. Collective: every rank calls it.
double comm_alone_ms(comm::Communicator& comm, engine::Trainer& trainer, double bucket_mb) {
  engine::GradientSync sync(comm, trainer.model().params(), bucket_mb, nullptr);
  std::vector<double> ms;
  for (int i = 0; i < 23; ++i) {
    if (!comm.barrier().ok()) return 0;
    const std::int64_t t0 = trace::now_ns();
    sync.begin_step(0);
    if (!sync.finish_step().ok()) return 0;
    if (i >= 3) ms.push_back(double(trace::now_ns() - t0) * 1e-6);  // the first few warm up
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::int64_t gradient_bytes(engine::Trainer& trainer) {
  std::int64_t bytes = 0;
  for (const engine::Param* p : trainer.model().params()) bytes += std::int64_t(p->grad.size() * sizeof(float));
  return bytes;
}

nlohmann::json report(const Plan& plan, const Options& o, int world, int threads, double seconds) {
  const double samples = double(o.steps * plan.training.batch);
  return {{"engine", "loom"},
          {"plan", plan.name},
          {"world_size", world},
          {"threads", threads},
          {"batch", plan.training.batch},
          {"batch_per_rank", plan.training.batch / world},
          {"bucket_mb", plan.parallel.bucket_mb},
          {"steps", o.steps},
          {"warmup", o.warmup},
          {"samples_per_s", samples / seconds},
          {"step_ms", seconds / double(o.steps) * 1e3},
          {"trace", o.trace}};
}

int train(comm::Communicator& comm, Plan plan, const Options& o) {
  const int rank = comm.rank();
  if (std::string bad = plan_for_world(plan, comm.size(), o); !bad.empty()) return fail(rank, bad);
  auto data = data::load_dataset(plan.data);
  if (!data.ok()) return fail(rank, data.error().describe());
  const int threads = engine::apply_thread_count(plan, ranks_on_this_host(comm.size()));
  std::vector<PlanError> errors;
  const ModelInfo info = infer_model(plan, &errors);
  trace::Recorder recorder;
  engine::Trainer trainer(plan, info, *data, o.trace ? &recorder : nullptr, &comm);
  double t0 = 0, t1 = 0;
  engine::TrainerHooks hooks;
  hooks.on_step = [&](const engine::StepProgress& p) {
    if (p.step == o.warmup) t0 = p.elapsed_s;
    if (p.step == o.warmup + o.steps) t1 = p.elapsed_s;
  };
  const engine::TrainResult result = trainer.run(hooks);
  if (!result.error.empty()) return fail(rank, result.error);
  const double alone_ms = comm.size() > 1 ? comm_alone_ms(comm, trainer, plan.parallel.bucket_mb) : 0.0;
  if (rank != 0) return 0;
  nlohmann::json out = report(plan, o, comm.size(), threads, t1 - t0);
  out["grad_bytes"] = gradient_bytes(trainer);
  if (o.trace && comm.size() > 1) {
    const Overlap ov = analyse(recorder, o.warmup, o.steps);
    out["comm_ms"] = ov.comm_ms;
    out["exposed_ms"] = ov.exposed_ms;
    out["wait_ms"] = ov.wait_ms;
    out["hidden_fraction"] = ov.comm_ms > 0 ? 1.0 - ov.exposed_ms / ov.comm_ms : 0.0;
    out["comm_alone_ms"] = alone_ms;
    out["hidden_vs_alone"] = alone_ms > 0 ? std::clamp(1.0 - ov.wait_ms / alone_ms, 0.0, 1.0) : 0.0;
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: mpirun -n N bench_dp PLAN [--steps S] [--warmup W] [--threads T] [--bucket-mb B] [--notrace]\n");
    return 2;
  }
  PlanResult loaded = load_plan_file(o.plan_path);
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s: %s: %s\n", o.plan_path.c_str(), e.path.c_str(), e.reason.c_str());
    return 2;
  }
  auto comm = comm::init_mpi(&argc, &argv);
  if (!comm.ok()) {
    std::fprintf(stderr, "bench_dp: %s\n", comm.error().describe().c_str());
    comm::finalize_mpi();
    return 1;
  }
  const int code = train(**comm, *loaded.plan, o);
  // A rank that fails must not leave its peers blocked in a collective.
  if (code != 0 && (*comm)->size() > 1) comm::abort_mpi(code);
  comm->reset();
  comm::finalize_mpi();
  return code;
}
