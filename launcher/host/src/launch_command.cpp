// The launch command for a plan's ranks (see launch_command.h).
#include "loom/host/launch_command.h"

#include <algorithm>
#include <map>

#include "loom/host/oversubscription.h"
#include "loom/stream/launch_env.h"

namespace loom::host {
namespace {

using namespace loom::stream;  // the launch environment's names (launch_env.h)

// Between hosts messages go over TCP. Above Open MPI's eager limit (64 KiB by default) a
// message leaves only once the receiver has answered (rendezvous), and that answer rides
// the same connection behind the receiver's own outgoing data: in a ring all-reduce both
// peers send at once, so the link ran as if it were half-duplex (700 KiB over a 100 Mb/s
// link: 122 ms, against 64 ms with this limit; 1 MiB at 1 Gb/s: 30 ms against 17;
// bench_allreduce between the simulated hosts). With the limit above the ring's segment
// (4 MiB, mpi_communicator.cpp) and its header, every segment goes at once. The cost: Open
// MPI's eager buffers grow with the limit (a rank's peak memory 26.9 -> 33.7 MB there).
constexpr long kTcpEagerLimit = 4 * 1024 * 1024 + 4096;

bool spans_hosts(const Plan& plan, const LaunchContext& context) {
  const auto hosts = ranks_per_host(plan, context.this_host);
  return hosts.size() > 1 || (hosts.size() == 1 && hosts[0].first != "localhost");
}

std::string hostfile_text(const std::vector<std::pair<std::string, int>>& hosts) {
  std::string text = "# written by Loom for one run: host and the ranks the plan places there\n";
  for (const auto& [host, slots] : hosts) text += host + " slots=" + std::to_string(slots) + "\n";
  return text;
}

std::vector<std::pair<std::string, std::string>> launch_env(const Plan& plan, const LaunchCommand& command,
                                                            const LaunchContext& context) {
  std::vector<std::pair<std::string, std::string>> env = {
      {kStreamEnv, command.stream_endpoint}, {kSecretEnv, context.secret}, {kRunIdEnv, std::to_string(context.run_id)}};
  if (!context.checkpoint_dir.empty()) env.emplace_back(kCheckpointDirEnv, context.checkpoint_dir);
  if (!context.resume_step_dir.empty()) env.emplace_back(kResumeFromEnv, context.resume_step_dir);
  if (context.running_as_root) {
    env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
    env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  }
  // Containers often forbid cross-process memory attach (CMA); copy-in/out always works.
  env.emplace_back("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
  // A rank waiting in MPI polls; with more ranks than cores it must give the core up
  // between polls (sched_yield) or the rank it waits for cannot run: the 4-rank example
  // ran 35-90x slower without (bench/results/oversub_bench_yield.md,
  // oversub_experiments.md). Open MPI yields on its own only
  // when it sees more ranks than slots, which a hostfile with slots = ranks placed, a
  // cgroup quota or srun hide from it, so Loom says so itself whenever it knows.
  if (detect_oversubscription(plan, context.this_host, context.cores, context.host_cores, context.namespace_hosts)
          .any()) {
    env.emplace_back("OMPI_MCA_mpi_yield_when_idle", "1");
    env.emplace_back(kCrowdingReportedEnv, "1");
  }
  if (spans_hosts(plan, context) || context.under_slurm)
    env.emplace_back("OMPI_MCA_btl_tcp_eager_limit", std::to_string(kTcpEagerLimit));
  return env;
}

void add_mpirun_args(const Plan& plan, const LaunchContext& context, LaunchCommand& command) {
  const int ranks = world_size(plan);
  const auto hosts = ranks_per_host(plan, context.this_host);
  const bool remote = spans_hosts(plan, context);
  auto& a = command.args;
  a = {"-n", std::to_string(ranks), "--bind-to", "none"};
  int most_on_one_host = 0;
  for (const auto& h : hosts) most_on_one_host = std::max(most_on_one_host, h.second);
  if (!remote && most_on_one_host > context.cores) a.push_back("--oversubscribe");
  if (remote) {
    command.hostfile_text = hostfile_text(hosts);
    a.insert(a.end(), {"--hostfile", context.hostfile_path, "--map-by", "slot"});
  }
  // -x exports a variable to every rank, including those on other hosts.
  for (const auto& [name, value] : command.env) a.insert(a.end(), {"-x", name});
}

}  // namespace

bool is_local_host(const std::string& host, const std::string& this_host) {
  return host.empty() || host == "localhost" || host == "127.0.0.1" || host == "::1" || host == this_host;
}

std::string stream_bind_address(const Plan& plan, const LaunchContext& context) {
  return spans_hosts(plan, context) ? "0.0.0.0" : "127.0.0.1";
}

LaunchCommand build_launch_command(const Plan& plan, const LaunchContext& context) {
  LaunchCommand command;
  command.bind_address = stream_bind_address(plan, context);
  const bool remote = command.bind_address != "127.0.0.1";
  const std::string& reachable = context.stream_host.empty() ? context.this_host : context.stream_host;
  command.stream_endpoint = (remote ? reachable : std::string("127.0.0.1")) + ":" + std::to_string(context.port);
  command.env = launch_env(plan, command, context);
  if (context.under_slurm) {
    command.program = context.srun;
    // srun passes the environment on by default; a rank that dies ends the step.
    command.args = {"--mpi=pmix", "-n", std::to_string(world_size(plan)), "--kill-on-bad-exit=1"};
  } else {
    command.program = context.mpirun;
    add_mpirun_args(plan, context, command);
  }
  command.args.push_back(context.rank_executable);
  command.args.push_back(context.plan_path);
  return command;
}

std::string describe_command(const LaunchCommand& command) {
  auto quote = [](const std::string& s) {
    if (!s.empty() && s.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos) return s;
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  std::string line;
  for (const auto& [name, value] : command.env) {
    line += name + "=" + (name == kSecretEnv ? std::string("<secret>") : quote(value)) + " ";
  }
  line += quote(command.program);
  for (const auto& a : command.args) line += " " + quote(a);
  return line;
}

}  // namespace loom::host
