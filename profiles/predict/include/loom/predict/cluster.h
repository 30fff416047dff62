// A cluster the predictor may lay a plan onto without running it there: hosts with the
// same number of devices each, one kind of device, and the links inside and between
// hosts (docs/prediction.md, "Clusters"). A device is either this machine's rank as its
// stored runs calibrated it, or a roofline (peak FLOP/s and memory bandwidth); a link is
// latency + bytes / bandwidth, or, inside a host of this machine's kind, what its runs
// measured.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "loom/core/status.h"

namespace loom::predict {

// latency + bytes / bandwidth. measured: no figures given, the calibration's costs stand.
// calibrated: a cluster file's "calibrated" between hosts, its figures the link this
// machine's runs across hosts measured (host_links.h), filled before predicting.
struct Link {
  bool measured = true;
  double bandwidth_gbs = 0;  // GB/s (1e9 bytes per second)
  double latency_us = 0;
  bool calibrated = false;
  double ms(double bytes) const { return latency_us / 1e3 + bytes / (bandwidth_gbs * 1e6); }
};

struct ClusterDevice {
  bool calibrated = true;  // this machine's rank, from its stored runs; else a roofline
  std::string name;
  double peak_tflops = 0;           // fp32 FLOP/s / 1e12 the device reaches at best
  double memory_bandwidth_gbs = 0;  // GB/s
  double host_link_gbs = 25;        // host to device (the batch's copy), GB/s
  double launch_us = 5;             // fixed cost of each kernel
  double efficiency = 1;            // share of the peaks reached (1: the roofline's bound)
  double memory_gib = 0;            // per device; 0: not said
};

struct Cluster {
  std::string name;
  int hosts = 1;
  int devices_per_host = 1;
  ClusterDevice device;
  Link inside_host, between_hosts;
  // > 0: the hosts are network namespaces of one machine (simulated hosts) whose ranks all
  // share its this many cores, so they crowd as ranks on one host do; 0: each host its own.
  int shared_cores = 0;

  // Links between two particular hosts (host indices, the lower first), where runs across
  // them measured that pair (host_links.h, cluster_of_plan_hosts); any other pair of hosts
  // crosses between_hosts.
  std::map<std::pair<int, int>, Link> host_pairs;

  int devices() const { return hosts * devices_per_host; }
  int host_of(int rank) const { return rank / devices_per_host; }
  bool spans_hosts(const std::vector<int>& ranks) const;
  // The link a message between two ranks crosses.
  const Link& link(int a, int b) const;
  // The slowest link a ring through these ranks, in their order, crosses: inside_host on
  // one host; across hosts, the highest latency and the lowest bandwidth of the links
  // between consecutive ranks (the last to the first too), every step of a ring waiting
  // for its slowest hop.
  Link ring_link(const std::vector<int>& ranks) const;
  // The hops of a ring through these ranks, in their order: each to the next, the last
  // to the first.
  std::vector<Link> ring_hops(const std::vector<int>& ranks) const;
};

// A ring all-reduce of `bytes` over `ranks` ranks on one link: 2 (p - 1) steps, each one
// latency and bytes / p over the link (each rank sends and receives 2 (p - 1) / p of it).
double ring_allreduce_ms(const Link& link, int ranks, double bytes);
// The same ring over hops that differ (hops[i]: rank i to the next). A rank forwards each
// of its 2 (p - 1) chunks once it has received the chunk before it and its own link has
// sent its previous one; a hop's latency delays a chunk's arrival but does not hold the
// link. The last arrival ends it. On equal hops this is the one-link ring above; on a
// ring of three with one fast hop it is shorter than the slowest hop's ring.
double ring_allreduce_ms(const std::vector<Link>& hops, double bytes);
// A pipelined tree (reduce up, broadcast down): twice the tree's depth in latencies, and
// the whole message twice over the link. Beats the ring where latency dominates. The
// depth of a binomial (or binary) tree of p ranks is floor(log2 p), not the ceil(log2 p)
// rounds of a synchronous schedule: a rank sends as soon as its own children have, so on
// 3 ranks both leaves send to the root at once (one latency up, one down).
double tree_allreduce_ms(const Link& link, int ranks, double bytes);

// The fastest of the algorithms NCCL chooses between, for these ranks on the cluster: a
// ring or a tree over the slowest link the ranks cross, or, across hosts with several of
// the ranks each, hierarchical (reduce-scatter inside each host, an all-reduce of each
// host's share between hosts, all-gather inside). `algorithm` gets its name.
double allreduce_ms(const Cluster& cluster, const std::vector<int>& ranks, double bytes, std::string* algorithm = nullptr);

// What Loom's MPI communicator runs (loom/core/mpi_allreduce.h), over the slowest link
// the ranks cross: up to 64 KiB, Open MPI's non-blocking all-reduce, in place, which Open
// MPI 4.1 runs as a binomial tree (reduce, then broadcast); larger, Loom's own ring, or on
// 4, 8, ... ranks recursive doubling (log2 p exchanges of the whole message). Not the
// fastest: on 3 hosts 2 ms apart a 137 KB bucket's ring took 8-13 ms where a tree would
// take 6.7. `algorithm` gets its name.
double mpi_allreduce_ms(const Cluster& cluster, const std::vector<int>& ranks, double bytes,
                        std::string* algorithm = nullptr);

// The cluster a JSON text describes; InvalidArgument naming the field that is wrong.
Expected<Cluster> cluster_from_json(const std::string& text, const std::string& where = "cluster");
Expected<Cluster> load_cluster(const std::string& path);

}  // namespace loom::predict
