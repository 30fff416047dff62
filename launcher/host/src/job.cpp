// The mpirun transport: supervises one mpirun or srun job (see job.h).
#include "loom/host/job.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "loom/host/hang_watch.h"
#include "loom/host/job_output.h"
#include "loom/host/launch_command.h"
#include "loom/host/oversubscription.h"
#include "loom/store/run_store.h"
#include "loom/store/space_reserve.h"
#include "loom/stream/frame.h"
#include "loom/stream/server.h"
#include "loom/trace/machine.h"
#include "loom/trace/recorder.h"

namespace loom::host {
namespace {

using Clock = std::chrono::steady_clock;

Status write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return make_error(ErrorCode::Io, "cannot write " + path);
  return {};
}

// Everything one job needs while it runs; lives on MpirunTransport::run's stack.
struct Job {
  Job(const RunContext& run, const MpirunOptions& l, StoreFeeder& f)
      : plan(run.plan), options(run.options), launch(l), store(run.store), run_id(run.run_id), feeder(f),
        reserve(run.reserve) {}
  const Plan& plan;
  const RunOptions& options;
  const MpirunOptions& launch;
  store::RunStore& store;
  std::int64_t run_id;
  StoreFeeder& feeder;
  store::SpaceReserve& reserve;  // given back when the store refuses a write
  QProcess process;
  Clock::time_point started = Clock::now();
  std::string output_tail;   // the last lines of mpirun's output, for the error message
  std::string pending_log;   // output not yet appended to the run log
  bool stopping = false, terminated = false, marked_failed = false;
  bool under_slurm = false;  // the launcher is srun (launch_command.h)
  std::string hang;  // why the watchdog ended the run; empty while it has not
  Clock::time_point stop_sent{};
};

void forward_output(Job& job) {
  while (job.process.canReadLine()) {
    std::string line = job.process.readLine().toStdString();
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (job.launch.on_output) job.launch.on_output(line);
    job.pending_log += line + "\n";
    job.output_tail += line + "\n";
    if (job.output_tail.size() > 4000) job.output_tail.erase(0, job.output_tail.size() - 4000);
  }
}

void flush_log(Job& job) {
  if (job.pending_log.empty()) return;
  (void)job.store.append_log(job.run_id, job.pending_log);
  job.pending_log.clear();
}

// Stopping is graceful first: mpirun (and srun) forward SIGUSR1 to every rank at once,
// and the ranks agree on a last step, flush their record and report Done. mpirun's own
// SIGTERM handling only reaches the ranks after its kill timeout and SIGKILLs them soon
// after, so SIGTERM (then SIGKILL) is what a job that ignores the request gets.
void request_stop(Job& job) {
  if (job.stopping) return;
  job.stopping = true;
  job.stop_sent = Clock::now();
  ::kill(pid_t(job.process.processId()), SIGUSR1);
}

void escalate_stop(Job& job) {
  const auto waited = Clock::now() - job.stop_sent;
  if (!job.terminated && waited > job.launch.stop_grace) {
    job.terminated = true;
    job.process.terminate();
  } else if (job.terminated && waited > 2 * job.launch.stop_grace) {
    job.process.kill();
  }
}

std::string store_failure(const std::string& store_error) {
  return "the run store cannot be written, so the run was ended (what was stored until then is kept): " +
         store_error;
}

double elapsed_s(const Job& job) {
  return std::chrono::duration<double>(Clock::now() - job.started).count();
}

void kill_local_ranks(Job& job);

// A rank is gone under srun: its peers wait on it and cannot agree on a last step, and srun
// would pass a stop on as SIGTERM, which the ranks take as a stop request, SIGKILLing them
// only after Slurm's KillWait (30 s by default). Two SIGINTs within a second make srun
// kill every task of the step at once, on every node. (mpirun ends a job by itself when
// a rank dies.)
void end_step_at_once(Job& job) {
  const auto srun = pid_t(job.process.processId());
  ::kill(srun, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ::kill(srun, SIGINT);
  job.stopping = job.terminated = true;
  job.stop_sent = Clock::now();
  kill_local_ranks(job);
}

// What ended the run when the launcher died first: that, not the rank it took with it.
std::string launcher_death(const Job& job, const std::string& rank_failure) {
  return "the launcher (" + std::string(job.under_slurm ? "srun" : "mpirun") +
         ") died while the ranks trained, killed or crashed, and its ranks ended with it (the first the host "
         "lost: " + rank_failure + ")";
}

// The launcher ended by a signal this host never sent it: killed from outside, or crashed.
// (It exits normally, with a code, when it ends a job because a rank died.)
bool launcher_was_killed(const Job& job) {
  return job.process.state() == QProcess::NotRunning && job.process.exitStatus() == QProcess::CrashExit &&
         !job.terminated;
}

// A failure is stored the moment the host learns of it, before the job is wound down,
// so a reader of the store sees it at once.
void watch_for_failure(Job& job) {
  if (job.marked_failed || !job.hang.empty()) return;  // a hung job's ranks die as it ends
  std::string failure = job.feeder.first_failure();
  const std::string store_error = job.feeder.store_error();
  if (failure.empty() && !store_error.empty()) failure = store_failure(store_error);
  if (failure.empty()) return;
  // A run that cannot be recorded is not worth training on: end it while its status can
  // still be written, with the reserve's room.
  if (!store_error.empty()) job.reserve.release();
  job.marked_failed = true;
  flush_log(job);
  const JobProgress p = job.feeder.progress();
  (void)job.store.finish_run(job.run_id, trace::RunStatus::Failed, elapsed_s(job), p.step * job.plan.training.batch, failure);
  if (job.under_slurm && store_error.empty()) return end_step_at_once(job);
  request_stop(job);
}

// Where a rank's process runs on this machine: its state letter (machine::process_state),
// '\0' when it is gone or the pid now belongs to another program.
char local_rank_state(int pid) {
  std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
  std::string argv0;
  std::getline(cmdline, argv0, '\0');
  return argv0.find("loom-rank") == std::string::npos ? '\0' : machine::process_state(pid);
}

// Kills the ranks of this machine that are still there. The last step of every exit
// path: mpirun, SIGTERMed or SIGKILLed, does not always take a stopped rank with it.
void kill_local_ranks(Job& job) {
  for (const RankOutcome& r : job.feeder.outcomes()) {
    const char state = r.same_host ? local_rank_state(r.pid) : '\0';
    if (state == '\0' || state == 'Z') continue;
    ::kill(pid_t(r.pid), SIGKILL);  // works on a stopped process too
  }
}

// The watchdog (hang_watch.h): a rank silent past its limit gets the run stored as hung,
// naming it and its last span, and the job ended at once: a graceful stop needs every
// rank to agree on a last step, which a hung rank never does.
void watch_for_hang(Job& job) {
  if (!job.hang.empty() || job.marked_failed || job.stopping) return;
  std::vector<RankActivity> ranks = job.feeder.activity();
  HangLimits limits;
  limits.fixed_s = job.plan.training.hang_timeout_s;
  const std::int64_t now = trace::now_ns();
  const double median_step_s = job.feeder.median_step_s();
  // Whether a rank silent past its limit is stopped decides both whether the job is hung
  // while others progress and whom to blame: those ranks' process states are read, and
  // only theirs, only then.
  auto past_limit = [&](const RankActivity& a) {
    return a.connected && !a.finished &&
           double(now - a.last_progress_ns) * 1e-9 > hang_limit_s(limits, a.training, median_step_s);
  };
  if (std::none_of(ranks.begin(), ranks.end(), past_limit)) return;
  const std::vector<RankOutcome> outcomes = job.feeder.outcomes();
  for (RankActivity& a : ranks) {
    if (!past_limit(a) || std::size_t(a.rank) >= outcomes.size()) continue;
    const RankOutcome& o = outcomes[std::size_t(a.rank)];
    const char state = o.same_host ? local_rank_state(o.pid) : '\0';
    a.process_stopped = state == 'T' || state == 't';
  }
  const auto stall = find_stall(ranks, now, limits, median_step_s);
  if (!stall) return;
  job.hang = describe_stall(*stall);
  flush_log(job);
  (void)job.store.append_log(job.run_id, "hung: " + job.hang + "; ending the job\n");
  const JobProgress p = job.feeder.progress();
  (void)job.store.finish_run(job.run_id, trace::RunStatus::Hung, elapsed_s(job), p.step * job.plan.training.batch, job.hang);
  job.stopping = job.terminated = true;
  job.stop_sent = Clock::now();
  kill_local_ranks(job);
  job.process.terminate();
}

void supervise(Job& job) {
  auto last_log = Clock::now();
  while (job.process.state() != QProcess::NotRunning) {
    job.process.waitForReadyRead(50);
    forward_output(job);
    if (job.options.stop && job.options.stop->load()) request_stop(job);
    watch_for_failure(job);
    watch_for_hang(job);
    if (job.stopping) escalate_stop(job);
    if (Clock::now() - last_log > std::chrono::milliseconds(200)) {
      flush_log(job);
      last_log = Clock::now();
    }
    if (job.options.on_progress) job.options.on_progress(job.feeder.progress());
  }
  job.process.waitForFinished(1000);
  forward_output(job);
  const QByteArray rest = job.process.readAll();
  if (!rest.isEmpty()) job.pending_log += rest.toStdString();
  flush_log(job);
}

// After mpirun is gone, the last frames may still be in flight on the sockets.
void drain_stream(Job& job) {
  const auto deadline = Clock::now() + job.launch.drain_grace;
  while (!job.feeder.all_accounted() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

RunOutcome decide(Job& job) {
  RunOutcome out;
  out.exit_code = job.process.exitStatus() == QProcess::NormalExit ? job.process.exitCode() : -1;
  out.wall_s = elapsed_s(job);
  // Samples this run trained: a resumed run's steps count on from its checkpoint's.
  out.samples = std::max<std::int64_t>(0, job.feeder.progress().step - job.options.resume_step) * job.plan.training.batch;
  const std::string failure = job.feeder.first_failure();
  bool all_done = true, rank_stopped = false;
  for (const RankOutcome& r : job.feeder.outcomes()) {
    all_done = all_done && r.done;
    rank_stopped = rank_stopped || r.status == trace::RunStatus::Stopped;
  }
  if (!job.hang.empty()) {
    out.status = trace::RunStatus::Hung;
    out.error = job.hang;
  } else if (!failure.empty() && launcher_was_killed(job)) {
    out.status = trace::RunStatus::Failed;
    out.error = launcher_death(job, failure);
  } else if (!failure.empty()) {
    out.status = trace::RunStatus::Failed;
    const int rank = job.feeder.first_failure_rank();
    out.error = failure + (rank >= 0 ? explain_rank_end(rank, job.output_tail) : "");
  } else if (job.stopping || rank_stopped) {
    // Asked from here, or from outside: Slurm's scancel, time limit or revoked allocation
    // SIGTERMs the ranks, which stop at an agreed step and exit 0 like a finished run.
    out.status = trace::RunStatus::Stopped;
  } else if (out.exit_code != 0 || !all_done) {
    out.status = trace::RunStatus::Failed;
    out.error = "mpirun exited with " + (out.exit_code < 0 ? std::string("a signal") : std::to_string(out.exit_code)) +
                (all_done ? "" : " before every rank reported its end") + "; its last output:\n" + job.output_tail;
  } else {
    out.status = trace::RunStatus::Completed;
  }
  if (out.status != trace::RunStatus::Failed && !job.feeder.store_error().empty()) {
    out.status = trace::RunStatus::Failed;
    out.error = store_failure(job.feeder.store_error());
  }
  return out;
}

Status start_process(Job& job, const LaunchCommand& command) {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const auto& [name, value] : command.env) {
    const QString key = QString::fromStdString(name);
    // Open MPI settings the user made in the environment win over Loom's defaults (e.g.
    // the CMA transport where the container allows it, or yield off to compare).
    if (key.startsWith(QLatin1String("OMPI_MCA_")) && env.contains(key)) continue;
    env.insert(key, QString::fromStdString(value));
  }
  job.process.setProcessEnvironment(env);
  job.process.setProcessChannelMode(QProcess::MergedChannels);
  job.process.setProgram(QString::fromStdString(command.program));
  QStringList args;
  for (const auto& a : command.args) args << QString::fromStdString(a);
  job.process.setArguments(args);
  // Its own process group: a Ctrl-C at the terminal reaches only the supervisor, which
  // then stops the job in order (SIGTERM, grace, SIGKILL) instead of mpirun aborting it.
  // And a parent-death signal: when the supervisor dies (killed, crashed), mpirun gets
  // SIGTERM and takes its ranks down with it, instead of training on unwatched. The
  // signal follows the thread that started mpirun, which is the one supervising it.
  const pid_t supervisor = ::getpid();
  job.process.setChildProcessModifier([supervisor] {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != supervisor) ::_exit(127);  // the supervisor died before prctl
  });
  job.process.start();
  if (job.process.waitForStarted(10000)) return {};
  return make_error(ErrorCode::Io, "cannot start " + command.program + ": " + job.process.errorString().toStdString(),
                    "install Open MPI (apt-get install openmpi-bin) or put mpirun on PATH");
}

LaunchContext make_context(const Job& job, const QTemporaryDir& dir, int port, const std::string& secret) {
  LaunchContext c;
  c.mpirun = job.launch.mpirun;
  c.rank_executable = job.launch.rank_executable;
  c.plan_path = dir.filePath("plan.json").toStdString();
  c.hostfile_path = dir.filePath("hostfile").toStdString();
  c.this_host = machine::host_name();
  if (const char* stream_host = std::getenv("LOOM_STREAM_HOST")) c.stream_host = stream_host;
  c.port = port;
  c.secret = secret;
  c.run_id = job.run_id;
  c.checkpoint_dir = store::checkpoint_dir(job.store.path(), job.run_id);
  c.resume_step_dir = job.options.resume_step_dir;
  c.cores = cores_available();
  c.namespace_hosts = namespace_hosts(job.plan);
  c.running_as_root = geteuid() == 0;
  c.under_slurm = std::getenv("SLURM_JOB_ID") != nullptr;
  return c;
}

// Said before anything starts, as the log's first lines, and kept as run metrics so that a
// stored run can still say that its ranks shared cores.
void record_oversubscription(Job& job, const Oversubscription& over) {
  const HostLoad* worst = over.worst();
  if (!worst) return;
  std::string text;
  for (const std::string& line : over.messages()) text += "oversubscribed: " + line + "\n";
  (void)job.store.append_log(job.run_id, text);
  (void)job.store.append_metrics(job.run_id, {{0, -1, 0, kOversubscribedRanksMetric, double(worst->ranks)},
                                              {0, -1, 0, kOversubscribedCoresMetric, double(worst->cores)}});
}

// The rank executable must be there before mpirun is asked to start it everywhere, or the
// user reads mpirun's page about a missing program instead of one line naming the file.
// Checked on this machine only: other hosts are assumed to mirror its layout.
Status check_rank_executable(const std::string& path) {
  const QFileInfo file(QString::fromStdString(path));
  if (file.isFile() && file.isExecutable()) return {};
  const char* env = std::getenv("LOOM_RANK");
  return make_error(ErrorCode::NotFound,
                    "the rank executable " + path + (file.exists() ? " is not executable" : " does not exist") +
                        (env ? " (it comes from LOOM_RANK)" : ""),
                    env ? "point LOOM_RANK at loom-rank (build/launcher/rank/loom-rank), or unset it"
                        : "build it: cmake --build build --target loom-rank");
}

// Starts the stream server, writes the plan (and hostfile), starts mpirun and supervises it.
Status launch_and_supervise(Job& job, const QTemporaryDir& dir, RunOutcome& outcome) {
  LOOM_TRY(check_rank_executable(job.launch.rank_executable));
  const std::string secret = stream::random_secret();
  LaunchContext context = make_context(job, dir, 0, secret);
  stream::ServerOptions server_options{stream_bind_address(job.plan, context), 0, secret, job.run_id,
                                       world_size(job.plan)};
  auto server = stream::StreamServer::start(server_options, job.feeder);
  if (!server.ok()) return server.error();
  context.port = (*server)->port();
  const LaunchCommand command = build_launch_command(job.plan, context);
  outcome.command = describe_command(command);
  LOOM_TRY(write_file(context.plan_path, plan_to_json(job.plan)));
  if (!command.hostfile_text.empty()) LOOM_TRY(write_file(context.hostfile_path, command.hostfile_text));
  record_oversubscription(job, detect_oversubscription(job.plan, context.this_host, context.cores, context.host_cores,
                                                       context.namespace_hosts));
  (void)job.store.append_log(job.run_id, "launch: " + outcome.command + "\n");
  job.under_slurm = context.under_slurm;
  LOOM_TRY(start_process(job, command));
  supervise(job);
  kill_local_ranks(job);
  drain_stream(job);
  (*server)->stop();
  job.feeder.write_latency_metrics();
  return {};
}

}  // namespace

std::string default_rank_executable(const std::string& this_executable) {
  if (const char* env = std::getenv("LOOM_RANK")) return env;
  const QFileInfo self(QString::fromStdString(this_executable));
  const QString beside = self.absolutePath() + "/loom-rank";
  if (QFileInfo(beside).isExecutable()) return beside.toStdString();
  return (self.absolutePath() + "/../launcher/rank/loom-rank").toStdString();
}

RunOutcome MpirunTransport::run(const RunContext& run) {
  const auto failed = [](const Error& error) {
    RunOutcome outcome;
    outcome.error = error.describe();
    return outcome;
  };
  auto feeder_store = store::RunStore::open(run.store.path());
  if (!feeder_store.ok()) return failed(feeder_store.error());
  StoreFeeder feeder(std::move(*feeder_store), run.run_id, world_size(run.plan), machine::host_name());
  Job job(run, options_, feeder);
  RunOutcome launch;  // the command, once it is built
  QTemporaryDir dir;
  Status launched = dir.isValid() ? launch_and_supervise(job, dir, launch)
                                  : make_error(ErrorCode::Io, "cannot create a temporary directory for the plan");
  RunOutcome outcome = decide(job);
  outcome.command = launch.command;
  if (!launched.ok()) {
    outcome.status = trace::RunStatus::Failed;
    outcome.error = launched.error().describe();
  }
  return outcome;
}

}  // namespace loom::host
