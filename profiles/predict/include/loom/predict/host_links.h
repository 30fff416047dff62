// Links between hosts as this machine's runs across them measured them, for predicting
// on those hosts (or on a cluster file's "between_hosts": "calibrated") without writing
// the link down. Every run whose ranks sit on several hosts measures, before it trains,
// the link from rank 0's host to each other host, through the first rank on that host
// (launcher/engine/rank_probes.h):
//  - latency: that rank's clock alignment, half the shortest of its ping-pong round trips
//    with rank 0 (24-byte messages), the larger of the estimates before and after training;
//  - bandwidth: the point-to-point probe, `p2p_probe_bytes` sent one way and back
//    repeatedly, less that latency per message (a run from before the probe's size was
//    recorded: the probe's figure as it is, which counts the latency as transfer time).
// Links between two hosts neither of which is rank 0's are not measured. Each rank also
// says which machine it ran on (its kernel's boot id, trace::DeviceInfo::machine): hosts
// whose ranks say the same are one machine's network namespaces (simulated hosts), whose
// ranks share its cores. Runs stored
// before 2026-11-29 probed ranks 0 and 1 only: theirs is learnt where those two sit on
// two hosts.
// Such runs calibrate nothing else (calibration.cpp, can_calibrate): their spans measured
// those hosts, not this one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/predict/cluster.h"
#include "loom/store/run_store.h"

namespace loom::predict {

// One run's measurement of the link between two hosts (first < second by name).
struct LinkObservation {
  std::string first, second;
  std::int64_t run = 0;
  double latency_us = 0, bandwidth_gbs = 0;
  int shared_cores = 0;  // both hosts one machine (the same boot id): its cores; else 0
};

// A pair of hosts' link: the median latency and the median bandwidth over its runs.
struct HostLink {
  std::string first, second;
  std::vector<std::int64_t> runs;  // oldest first
  Link link;                       // measured = false: latency + bytes / bandwidth
  int shared_cores = 0;            // every run found both hosts one machine: its fewest cores
};

// The links a run measured, from rank 0's host to each other host in rank order; none
// where its ranks share one host or it recorded no probe (one rank, or it ended before
// training).
Expected<std::vector<LinkObservation>> observe_links(store::RunStore& store, std::int64_t run_id);

// Per pair of hosts, their observations' medians, by host names.
std::vector<HostLink> fit_links(const std::vector<LinkObservation>& observations);

// The learnt link between these two hosts (either order); nullptr where none.
const HostLink* find_link(const std::vector<HostLink>& links, const std::string& a, const std::string& b);

// The link between hosts the learnt links stand for: the pair's where there is one pair,
// else the median over the pairs (`why` says which, and whose runs). nullopt where none.
std::optional<Link> median_link(const std::vector<HostLink>& links, std::string* why = nullptr);

// A cluster file's "between_hosts": "calibrated" filled with median_link. InvalidArgument
// where no run measured a link between hosts.
Status fill_calibrated_link(Cluster& cluster, const std::vector<HostLink>& links, std::string* why = nullptr);

// A plan's ranks by host (parallel.devices[].host): its hosts in rank order, one per
// contiguous run of ranks, and each run's length.
struct PlanHosts {
  std::vector<std::string> hosts;
  std::vector<int> per_host;
  // Runs of equal length, each host named once: the layout a cluster describes.
  bool like_a_cluster() const;
};
PlanHosts hosts_of_plan(const Plan& plan);

// A plan whose ranks sit on several hosts like a cluster, as a cluster of those hosts:
// devices like this machine's, their link the median of those learnt between two of the
// plan's hosts (median_link); where every such link joins two namespaces of one machine,
// the hosts share its cores (Cluster::shared_cores). A plan's "localhost" is `this_host`, the name this
// machine's runs stored. nullopt where the plan keeps to one host, or spans hosts but no
// such link was learnt or its hosts are not laid out so. `note` gets, where the plan spans hosts, the link used or
// why none was.
std::optional<Cluster> cluster_of_plan_hosts(const Plan& plan, const std::vector<HostLink>& links,
                                             const std::string& this_host, std::string* note);

}  // namespace loom::predict
