// Builds the command that starts a plan's ranks: an argument list, never a shell line, so
// paths with spaces or quotes need no escaping and nothing is interpreted twice.
//  - One machine: `mpirun -n N --bind-to none [--oversubscribe] ... loom-rank PLAN`.
//    Ranks run BLAS threads, so Open MPI's default binding (one core per rank) would
//    pile a rank's threads onto one core; more ranks than cores needs --oversubscribe.
//  - Whenever a host is known to hold more ranks than cores (oversubscription.h), every
//    rank gets OMPI_MCA_mpi_yield_when_idle=1, so that waiting ranks give up the core.
//  - Several machines (the plan's devices name other hosts): a hostfile with one line per
//    host and as many slots as the plan places there; ranks fill hosts in the order the
//    plan first names them. The stream server then listens on every interface and the
//    ranks are given this host's name to connect back to.
//  - Under Slurm (SLURM_JOB_ID set): `srun --mpi=pmix -n N ...`; Slurm owns placement.
// Pure: everything it depends on comes in through LaunchContext, so tests can check the
// command for root, oversubscription, hostfile and Slurm cases without starting anything.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "loom/core/plan.h"

namespace loom::host {

struct LaunchContext {
  std::string mpirun = "mpirun";  // or a full path
  std::string srun = "srun";
  std::string rank_executable;    // loom-rank
  std::string plan_path;          // the plan file the ranks read
  std::string this_host;          // this machine's host name
  // How ranks on other hosts reach this one's stream server, when this_host does not
  // resolve to an address they can reach (an /etc/hosts mapping it to 127.0.0.1, several
  // networks): $LOOM_STREAM_HOST. Empty: this_host.
  std::string stream_host;
  int port = 0;                   // the stream server's port
  std::string secret;             // the run's stream secret
  long long run_id = 0;
  std::string checkpoint_dir;     // LOOM_CHECKPOINT_DIR: where the ranks save checkpoints
  std::string resume_step_dir;    // LOOM_RESUME_FROM: the checkpoint they start from (resume)
  int cores = 1;                  // this machine's cores (cores_available(): affinity, cgroup quota)
  std::map<std::string, int> host_cores;  // other hosts' cores where known (oversubscription.h)
  std::set<std::string> namespace_hosts;  // the plan's hosts that are this machine's network namespaces
  bool running_as_root = false;
  bool under_slurm = false;
  std::string hostfile_path;      // where a hostfile is written, when one is needed
};

struct LaunchCommand {
  std::string program;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to the launcher's environment
  std::string hostfile_text;    // non-empty: write it to LaunchContext::hostfile_path first
  std::string bind_address;     // where the stream server must listen
  std::string stream_endpoint;  // what the ranks connect to (host:port)
};

// True when `host` names this machine ("localhost", loopback addresses or its own name).
bool is_local_host(const std::string& host, const std::string& this_host);

// The stream server's bind address for a plan: loopback unless a rank runs elsewhere.
std::string stream_bind_address(const Plan& plan, const LaunchContext& context);

LaunchCommand build_launch_command(const Plan& plan, const LaunchContext& context);

// The command as one line for the run log and error messages (shell-quoted for reading;
// the secret is masked).
std::string describe_command(const LaunchCommand& command);

}  // namespace loom::host
