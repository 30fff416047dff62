// The rank side of a run (see rank_session.h).
#include "rank_session.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "loom/core/model_info.h"
#ifdef LOOM_WITH_NCCL
#include "loom/comm/nccl.h"
#endif
#include "loom/data/dataset.h"
#include "loom/device/open_device.h"
#include "loom/engine/rank_body.h"
#include "loom/engine/rank_probes.h"
#include "loom/engine/rank_setup.h"
#include "loom/stream/client.h"
#include "loom/stream/launch_env.h"
#include "loom/trace/machine.h"
#include "loom/trace/run_writer.h"
#include "rank_signals.h"

namespace loom::rank {
namespace {

using namespace loom::stream;  // the launch environment's names (launch_env.h)

// A rank flushes its record to the host this often: well inside the 250 ms the live view
// allows from recording to storing.
constexpr std::chrono::milliseconds kStreamPeriod{50};

// Where this rank's record and messages go: the host's stream when there is one, and
// standard error always (mpirun forwards it to the host, which logs it too).
class Reporter {
 public:
  explicit Reporter(int rank) : rank_(rank) {}

  Status connect_if_requested(int world_size, const std::string& device) {
    const char* endpoint = std::getenv(kStreamEnv);
    if (!endpoint || !*endpoint) return {};
    stream::Hello hello;
    hello.secret = std::getenv(kSecretEnv) ? std::getenv(kSecretEnv) : "";
    hello.run_id = std::getenv(kRunIdEnv) ? std::atoll(std::getenv(kRunIdEnv)) : 0;
    hello.rank = rank_;
    hello.world_size = world_size;
    hello.pid = int(getpid());
    hello.host = machine::host_name();
    hello.device = device;
    auto client = stream::StreamClient::connect(endpoint, hello);
    if (!client.ok()) return client.error();
    client_ = std::move(*client);
    sink_ = std::make_unique<stream::StreamSink>(*client_);
    return {};
  }

  trace::RunSink* sink() { return sink_.get(); }

  int fail(const std::string& message, int code) {
    std::fprintf(stderr, "loom-rank %d: %s\n", rank_, message.c_str());
    if (sink_) {
      (void)sink_->write_log("error: " + message);
      (void)sink_->write_done({0, trace::RunStatus::Failed, message});
    }
    return code;
  }

  void clock(const stream::ClockInfo& info) {
    if (sink_) (void)sink_->write_clock(info);
  }

  void done(const stream::Done& done) {
    if (sink_) (void)sink_->write_done(done);
  }

  void device(const trace::DeviceInfo& info) {
    if (sink_) (void)sink_->write_device(info);
  }

  void log(const std::string& line) {
    std::fprintf(stderr, "loom-rank %d: %s\n", rank_, line.c_str());
    if (sink_) (void)sink_->write_log(line);
  }

  void metrics(const std::vector<trace::MetricRecord>& metrics) {
    if (sink_) (void)sink_->write_metrics(metrics);
  }

 private:
  int rank_;
  std::unique_ptr<stream::StreamClient> client_;
  std::unique_ptr<stream::StreamSink> sink_;
};

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// Ranks sharing this host, as the MPI launcher reports it.
int ranks_on_this_host(int world) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  }
  return world;
}

// Ranks sharing this machine's cores, among which BLAS threads are divided: those whose
// kernel has this rank's boot id (a collective: every rank splits the world by it). The
// MPI launcher counts by host name, so on simulated hosts (network namespaces of one
// machine) each rank counted itself alone and took every core: three ranks on two
// cores ran two BLAS threads each.
struct MachineRanks {
  int count = 1;       // ranks on this machine, this one included
  bool first = true;   // this rank is the lowest of them
};
MachineRanks ranks_on_this_machine(comm::Communicator& comm) {
  if (comm.size() == 1) return {};
  const int color = int(std::hash<std::string>{}(machine::machine_id()) & 0x7fffffff);
  const std::unique_ptr<comm::Communicator> here = comm.split(color, comm.rank());
  if (!here) return {ranks_on_this_host(comm.size()), comm.rank() == 0};
  return {here->size(), here->rank() == 0};
}

// Where more ranks share this machine than the launcher counted on its host (simulated
// hosts that Loom's launcher did not recognise as this machine's network namespaces, or
// another launcher: they count by host name, so nothing was said) and they outnumber its
// cores, the first of them says so, as the launcher would have: a log line and the run's
// oversubscription metrics (only rank 0's reach the run's record).
void report_hidden_oversubscription(Reporter& reporter, const MachineRanks& here, int world, int rank) {
  const int cores = machine::cores_available();
  if (env_or_empty(stream::kCrowdingReportedEnv) == "1") return;  // the host said it before the launch
  if (!here.first || here.count <= ranks_on_this_host(world) || here.count <= cores) return;
  reporter.log("oversubscribed: " + std::to_string(here.count) + " ranks share " + std::to_string(cores) + " core" +
               (cores == 1 ? "" : "s") + " on one machine whose network namespaces the plan names as hosts (" +
               machine::host_name() + "'s kernel): ranks take turns on the cores, so step times and communication "
               "waits include time a rank waited for a core; mpirun counted them apart, so a waiting rank spins "
               "unless OMPI_MCA_mpi_yield_when_idle=1");
  if (rank == 0)
    reporter.metrics({{0, -1, 0, machine::kOversubscribedRanksMetric, double(here.count)},
                      {0, -1, 0, machine::kOversubscribedCoresMetric, double(cores)}});
}

std::string world_mismatch(int size, const Plan& plan) {
  const std::string needed = std::to_string(world_size(plan));
  return "the MPI world has " + std::to_string(size) + " rank(s) but plan '" + plan.name + "' needs " + needed +
         " (hint: start it with mpirun -n " + needed + "; a launcher without MPI support starts N separate worlds of 1)";
}

// What a rank measures and trains between connecting and reporting Done.
struct Session {
  Session(comm::Communicator& c, const Plan& p, const data::TrainTest& d, Reporter& r, kernels::Backend& b)
      : comm(c), plan(p), data(d), reporter(r), backend(b) {}
  comm::Communicator& comm;
  const Plan& plan;
  const data::TrainTest& data;
  Reporter& reporter;
  kernels::Backend& backend;  // this rank's device
  trace::Recorder recorder;
  stream::ClockInfo clock;
  std::pair<std::int64_t, std::int64_t> data_loaded{0, 0};  // when the dataset was read (before the recorder)
};

// Clock alignment and the bandwidth probe; the probe's figure becomes a run metric.
// LOOM_SETUP_DELAY_MS (a diagnostic, docs/figures.md): every rank but rank 0 sleeps this
// long before clock alignment, so rank 0 waits for it in its traced pings, as on a machine
// that is slow to start ranks. Training figures must not change.
void delay_setup_if_requested(int rank) {
  const char* ms = std::getenv("LOOM_SETUP_DELAY_MS");
  if (rank == 0 || !ms || std::atoi(ms) <= 0) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

// The probes' figures as run metrics. The probe's size beside them: a prediction between
// hosts takes the link's latency back out (loom/predict/host_links.h). Each other host's
// figure is its first rank's "host_p2p_gbs" (rank 1's is "p2p_gbs"); the link from one
// host to the next, the first host's first rank's (machine.h).
struct Probes {
  double p2p_gbs = 0;
  std::vector<engine::HostProbe> other_hosts;
  std::vector<engine::HostPairProbe> next_hosts;
};
void record_probes(const Session& s, trace::RunWriter& writer, const Probes& probes) {
  const int rank = s.comm.rank();
  const std::int64_t t = s.clock.t0_ns;
  if (rank == 0)
    writer.add_metrics({{0, -1, t, "p2p_gbs", probes.p2p_gbs},
                        {0, -1, t, "p2p_probe_bytes", double(engine::kP2pProbeBytes)}});
  for (const engine::HostProbe& probe : probes.other_hosts)
    if (probe.rank == rank) writer.add_metrics({{rank, -1, t, "host_p2p_gbs", probe.gbs}});
  for (const engine::HostPairProbe& pair : probes.next_hosts)
    if (pair.from == rank)
      writer.add_metrics({{rank, -1, t, machine::kNextHostRankMetric, double(pair.to)},
                          {rank, -1, t, machine::kNextHostLatencyMetric, double(pair.latency_ns) / 1e3},
                          {rank, -1, t, machine::kNextHostP2pMetric, pair.gbs}});
}

Status measure_before_training(Session& s, trace::RunWriter* writer) {
  const std::int64_t clock_start = trace::now_ns();
  delay_setup_if_requested(s.comm.rank());
  auto start = engine::estimate_clock_offset(s.comm, &s.recorder, 0);
  if (!start.ok()) return start.error();
  trace::record_setup(s.recorder, trace::SetupPhase::ClockAlignment, clock_start);
  s.clock.offset_start_ns = start->offset_ns;
  s.clock.uncertainty_ns = start->uncertainty_ns;
  s.clock.sync_start_ns = start->at_ns;
  const std::int64_t probe_start = trace::now_ns();
  auto p2p = engine::probe_p2p_bandwidth(s.comm, &s.recorder);
  if (!p2p.ok()) return p2p.error();
  auto firsts = engine::first_ranks_by_host(s.comm, machine::host_name());
  if (!firsts.ok()) return firsts.error();
  auto other_hosts = engine::probe_other_hosts(s.comm, &s.recorder, *firsts);
  if (!other_hosts.ok()) return other_hosts.error();
  auto next_hosts = engine::probe_next_hosts(s.comm, &s.recorder, *firsts);
  if (!next_hosts.ok()) return next_hosts.error();
  trace::record_setup(s.recorder, trace::SetupPhase::BandwidthProbe, probe_start);
  s.clock.t0_ns = trace::now_ns();
  s.reporter.clock(s.clock);  // sent now so a rank that dies mid-run is still aligned
  if (writer) record_probes(s, *writer, {*p2p, std::move(*other_hosts), std::move(*next_hosts)});
  return {};
}

Status measure_after_training(Session& s) {
  const std::int64_t clock_start = trace::now_ns();
  auto end = engine::estimate_clock_offset(s.comm, &s.recorder, 1);
  if (!end.ok()) return end.error();
  trace::record_setup(s.recorder, trace::SetupPhase::ClockAlignment, clock_start);
  s.clock.offset_end_ns = end->offset_ns;
  s.clock.sync_end_ns = end->at_ns;
  s.clock.uncertainty_ns = std::max(s.clock.uncertainty_ns, end->uncertainty_ns);
  s.reporter.clock(s.clock);
  return {};
}

// After a rank's work: the end-of-run clock estimate (collective), then its last records
// to the host. A stream that cannot take them is said on standard error only: the host
// learns of it as missing events.
Status align_and_flush(Session& s, trace::RunWriter* writer) {
  LOOM_TRY(measure_after_training(s));
  if (writer) {
    Status flushed = writer->finish();
    if (!flushed.ok()) std::fprintf(stderr, "loom-rank %d: stream: %s\n", s.comm.rank(), flushed.error().describe().c_str());
  }
  return {};
}

void print_summary(const engine::TrainResult& result, int world) {
  nlohmann::json summary = {{"world_size", world},
                            {"steps", result.steps},
                            {"wall_s", result.wall_s},
                            {"samples_per_s", result.wall_s > 0 ? double(result.samples) / result.wall_s : 0.0},
                            {"final_loss", result.final_loss},
                            {"test_accuracy", result.test.accuracy},
                            {"stopped", result.stopped}};
  std::printf("%s\n", summary.dump().c_str());
  std::fflush(stdout);
}

// The host receives everything a rank records; once it cannot (the host died, its
// connection closed), training on would only burn cores nobody watches. The rank asks for
// the same stop as the Stop button, so the ranks agree on a last step and exit.
std::function<void(const Status&)> stop_when_host_gone(int rank) {
  return [rank](const Status& error) {
    std::fprintf(stderr, "loom-rank %d: cannot send to the host any more (%s); stopping\n", rank,
                 error.error().describe().c_str());
    request_stop();
  };
}

// The rank body's hooks under mpirun: the stop flag of the signal handlers, the
// checkpoint and resume directories the host passed, records into the stream.
engine::RankHooks rank_hooks(Session& s, const RankOptions& options, trace::RunWriter* writer) {
  engine::RankHooks hooks;
  hooks.stop = &stop_requested();
  hooks.checkpoint_dir = env_or_empty(kCheckpointDirEnv);
  hooks.resume_step_dir = env_or_empty(kResumeFromEnv);
  hooks.dump_params = options.dump_params;
  hooks.on_step = [](const engine::StepProgress& p) { note_step(p.step); };
  if (writer) {
    hooks.on_metrics = [writer](std::vector<trace::MetricRecord>&& m) { writer->add_metrics(std::move(m)); };
    hooks.on_updates = [writer](std::vector<trace::UpdateRecord>&& u) { writer->add_updates(std::move(u)); };
  }
  hooks.flush = [&s, writer] { return align_and_flush(s, writer); };
  return hooks;
}

// Setup measured, then the rank body (engine rank_body.h), then Done to the host.
int run_session(Session& s, const RankOptions& options) {
  trace::record_setup(s.recorder, trace::SetupPhase::LoadData, s.data_loaded.first, s.data_loaded.second);
  std::vector<PlanError> errors;
  const ModelInfo info = infer_model(s.plan, &errors);
  std::unique_ptr<trace::RunWriter> writer;
  if (s.reporter.sink())
    writer = std::make_unique<trace::RunWriter>(*s.reporter.sink(), s.comm.rank(), s.recorder, kStreamPeriod,
                                                 stop_when_host_gone(s.comm.rank()));
  Status measured = measure_before_training(s, writer.get());
  if (!measured.ok()) return s.reporter.fail(measured.error().describe(), 1);
  const engine::RankContext context{s.plan, info, s.data, s.recorder, &s.comm, s.backend, s.clock.t0_ns};
  const engine::RankEnd end = engine::run_rank_body(context, rank_hooks(s, options, writer.get()));
  // A capture the device refused (training.graph) went on uncaptured: the launch log says so.
  if (!end.note.empty()) std::fprintf(stderr, "loom-rank %d: %s\n", s.comm.rank(), end.note.c_str());
  if (!end.ok()) return s.reporter.fail(end.error, end.exit_code);
  s.reporter.done({std::int64_t(s.recorder.recorded()), end.status, ""});
  if (s.comm.rank() == 0 && !s.plan.serve) print_summary(end.train, s.comm.size());
  return 0;
}

// With "backend": "nccl", NCCL over the MPI communicator (which keeps carrying host
// memory: probes, parameter-server and pipeline messages); nullptr for "mpi".
Expected<std::unique_ptr<comm::Communicator>> open_nccl(comm::Communicator& mpi, const Plan& plan,
                                                        const DeviceSpec& device) {
  if (plan.parallel.backend != CommBackend::Nccl) return std::unique_ptr<comm::Communicator>();
#ifdef LOOM_WITH_NCCL
  comm::NcclOptions options;
  options.device = device.gpu;
  if (plan.training.hang_timeout_s > 0)
    options.timeout = std::chrono::milliseconds(std::int64_t(plan.training.hang_timeout_s * 1000.0));
  return comm::make_nccl_communicator(mpi, options);
#else
  (void)mpi;
  (void)device;
  return make_error(ErrorCode::Unavailable, "this build has no NCCL communicator", "set \"backend\": \"mpi\"");
#endif
}

// What this rank runs on, sent once its device is open and NCCL joined (whose version it
// names): `show`, compare and the Runs list say "NVIDIA H200" instead of "gpu 0".
trace::DeviceInfo identity_of(const DeviceSpec& device, int blas_threads, bool uses_nccl) {
  trace::DeviceInfo info = device::describe_device(device, blas_threads);
#ifdef LOOM_WITH_NCCL
  if (uses_nccl) info.nccl = comm::nccl_version();
#else
  (void)uses_nccl;
#endif
  return info;
}

}  // namespace

int run_rank(comm::Communicator& comm, const Plan& plan, const RankOptions& options) {
  Reporter reporter(comm.rank());
  const DeviceSpec device = comm.rank() < int(plan.parallel.devices.size())
                                ? plan.parallel.devices[std::size_t(comm.rank())]
                                : DeviceSpec{};
  Status connected = reporter.connect_if_requested(comm.size(), device::device_label(device));
  if (!connected.ok()) return reporter.fail("cannot reach the host's stream: " + connected.error().describe(), 1);
  if (comm.size() != world_size(plan)) return reporter.fail(world_mismatch(comm.size(), plan), 2);
  const std::int64_t load_start = trace::now_ns();
  auto data = data::load_dataset(plan.data);
  if (!data.ok()) return reporter.fail(data.error().describe(), 1);
  const std::int64_t load_end = trace::now_ns();
  const MachineRanks here = ranks_on_this_machine(comm);
  report_hidden_oversubscription(reporter, here, comm.size(), comm.rank());
  const int blas_threads = engine::apply_thread_count(plan, here.count);
  // Opened before training: no driver or no such GPU fails the rank here, with CUDA's
  // words and a hint, and the run is stored as failed.
  auto backend = device::open_device(device, plan.training.tf32);
  if (!backend.ok()) return reporter.fail("cannot open " + device::device_label(device) + ": " + backend.error().describe(), 1);
  // Joining NCCL is collective: every rank gets here, or fails with a message.
  auto nccl = open_nccl(comm, plan, device);
  if (!nccl.ok()) return reporter.fail("cannot start NCCL on " + device::device_label(device) + ": " + nccl.error().describe(), 1);
  comm::Communicator& training_comm = *nccl ? **nccl : comm;
  reporter.device(identity_of(device, blas_threads, *nccl != nullptr));
  // An exception escaping training (std::bad_alloc for a model this machine cannot hold,
  // a bug) is reported as this rank's failure, with its message, instead of an abort that
  // leaves the host guessing.
  try {
    Session session(training_comm, plan, *data, reporter, **backend);
    session.data_loaded = {load_start, load_end};
    return run_session(session, options);
  } catch (const std::bad_alloc&) {
    return reporter.fail("out of memory while training (make the model or the batch smaller)", 1);
  } catch (const std::exception& e) {
    return reporter.fail(std::string("training stopped by an exception: ") + e.what(), 1);
  }
}

}  // namespace loom::rank
