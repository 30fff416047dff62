// Oversubscription: more ranks on a host than it has cores. Ranks then take turns on the
// cores, so a rank's step times and communication waits include time it spent waiting
// for a core, and N ranks train slower than one process would. Loom says so before a run
// (launch log, loom-cli's terminal, the workbench) and records it with the run.
//
// The detection is a pure function of the plan's placement and the cores known per host,
// so it is tested without starting anything: this machine's cores are those this process
// may run on (its CPU affinity, capped by a cgroup CPU quota); another host's cores are
// what the caller knows of it (e.g. a hostfile's slots) or unknown.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/store/run_store.h"
#include "loom/trace/machine.h"

namespace loom::host {

struct HostLoad {
  // "localhost" for this machine (or, where the plan names its network namespaces as
  // hosts, "this machine, whose network namespaces ..."), else as the plan names it
  std::string host;
  int ranks = 0;     // ranks the plan places there
  int cores = 0;     // cores they can use; 0 = unknown
  bool oversubscribed() const { return cores > 0 && ranks > cores; }
};

struct Oversubscription {
  std::vector<HostLoad> hosts;  // in the order the plan first names them
  bool any() const;
  // The most loaded oversubscribed host (highest ranks per core); nullptr when none.
  const HostLoad* worst() const;
  // One line per oversubscribed host, saying what sharing does to the figures; empty
  // when no host is oversubscribed, e.g. "4 ranks share 2 cores on localhost: ranks take
  // turns on the cores, so step times and communication waits include time a rank
  // waited for a core; expect lower throughput than 1 process".
  std::vector<std::string> messages() const;
};

// Hosts in the order the plan first names them, with the ranks placed on each; hosts that
// name this machine (is_local_host) are merged into "localhost".
std::vector<std::pair<std::string, int>> ranks_per_host(const Plan& plan, const std::string& this_host);

// `local_cores`: cores this process may use (cores_available()); `known_cores`: cores of
// other hosts by name, where known (absent or <= 0: unknown, never reported);
// `namespace_hosts`: hosts that are network namespaces of this machine (simulated hosts,
// docs/cluster.md). Their ranks share this machine's cores, so they count with this
// machine's as one load, "this machine" (Open MPI counts them by host name, apart).
Oversubscription detect_oversubscription(const Plan& plan, const std::string& this_host, int local_cores,
                                         const std::map<std::string, int>& known_cores = {},
                                         const std::set<std::string>& namespace_hosts = {});

// The hosts a plan names that are network namespaces of this machine: a file of that name
// in `netns_dir`, where `ip netns add` puts them. A real host of the same name as one of
// this machine's namespaces would be taken for it.
std::set<std::string> namespace_hosts(const Plan& plan, const std::string& netns_dir = "/run/netns");

// The plan on this machine as the mpirun transport would launch it: this host's name,
// cores_available() and namespace_hosts(); other hosts unknown. What loom-cli and the
// workbench show.
Oversubscription oversubscription_here(const Plan& plan);

// Cores this process may use, and the cgroup quota parser: profiles/machine.h.
using machine::cores_available;
using machine::cores_from_cpu_max;

// Run metrics that record it with the run (machine.h).
using machine::kOversubscribedCoresMetric;
using machine::kOversubscribedRanksMetric;

// What a stored run recorded with those metrics (host left empty: the run's log names it),
// or nullopt for a run that was not oversubscribed or predates them.
Expected<std::optional<HostLoad>> recorded_oversubscription(store::RunStore& store, std::int64_t run_id);

}  // namespace loom::host
