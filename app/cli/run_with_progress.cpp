// A plan run from the command line (see run_with_progress.h).
#include "run_with_progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "loom/host/in_process_transport.h"
#include "loom/host/job.h"
#include "loom/host/oversubscription.h"
#include "progress.h"

namespace loom::cli {
namespace {

std::string this_executable() {
  char path[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, std::size_t(n)) : std::string("loom-cli");
}

engine::StepProgress to_step_progress(const host::JobProgress& p, double elapsed_s) {
  engine::StepProgress s;
  s.step = p.step;
  s.total_steps = std::max(p.total_steps, p.step);
  s.loss = p.loss;
  s.samples_per_s = p.samples_per_s;
  s.elapsed_s = elapsed_s;
  s.eta_s = p.step > 0 ? elapsed_s / double(p.step) * double(s.total_steps - p.step) : 0.0;
  return s;
}

// One rank in this process; several as a job. Before a job, its oversubscription is said
// here too, so that nobody reads the figures without knowing (the run's log and metrics
// keep the same lines).
std::unique_ptr<host::RunTransport> transport_for(const Plan& plan) {
  if (world_size(plan) <= 1) return std::make_unique<host::InProcessTransport>();
  for (const std::string& line : host::oversubscription_here(plan).messages())
    std::fprintf(stderr, "loom-cli: oversubscribed: %s\n", line.c_str());
  host::MpirunOptions options;
  options.rank_executable = host::default_rank_executable(this_executable());
  return std::make_unique<host::MpirunTransport>(options);
}

void say_failure(const Expected<host::RunOutcome>& outcome) {
  if (!outcome.ok()) {
    std::fprintf(stderr, "loom-cli: %s\n", outcome.error().describe().c_str());
    return;
  }
  if (outcome->status != trace::RunStatus::Failed && outcome->status != trace::RunStatus::Hung) return;
  std::fprintf(stderr, "loom-cli: run %lld %s: %s\n", static_cast<long long>(outcome->run_id),
               status_text(outcome->status).c_str(), outcome->error.c_str());
  if (!outcome->command.empty()) std::fprintf(stderr, "(the launch command was: %s)\n", outcome->command.c_str());
}

}  // namespace

Expected<host::RunOutcome> run_with_progress(const Plan& plan, const std::string& db_path,
                                             const std::atomic<bool>& stop, const host::ResumeRequest* resume) {
  const std::unique_ptr<host::RunTransport> transport = transport_for(plan);
  ProgressBar progress(stderr);
  const auto started = std::chrono::steady_clock::now();
  host::RunOptions options;
  options.stop = &stop;
  if (resume) {
    options.resumed_from = resume->from_run;
    options.resume_step_dir = resume->step_dir;
    options.resume_step = resume->step;
  }
  options.on_progress = [&](const host::JobProgress& p) {
    if (p.step == 0) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    progress.update(to_step_progress(p, elapsed));
  };
  auto outcome = host::run_plan(plan, db_path, *transport, options);
  progress.finish();
  say_failure(outcome);
  return outcome;
}

int exit_code_of(const Expected<host::RunOutcome>& outcome) {
  if (!outcome.ok()) return kFailed;
  switch (outcome->status) {
    case trace::RunStatus::Completed: return kOk;
    case trace::RunStatus::Stopped: return kStopped;
    default: return kFailed;
  }
}

}  // namespace loom::cli
