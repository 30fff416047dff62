// Measurements a multi-rank run makes outside training, over the run's communicator:
//  - clock alignment: each rank's steady clock against rank 0's, by ping-pong. Open MPI
//    does not synchronise clocks across nodes, so the offset is estimated from the round
//    trip with the lowest latency (its midpoint is the tightest bound on when rank 0's
//    message was answered); half that round trip is the uncertainty.
//  - a point-to-point bandwidth probe between ranks 0 and 1, the reference next to which
//    the all-reduce bandwidth is read;
//  - the same probe between rank 0 and the first rank on each other host, so a run
//    measures the links from rank 0's host to every other (loom/predict/host_links.h)
//    even where ranks 0 and 1 share a host;
//  - between the first ranks of each two consecutive hosts neither of which is rank 0's
//    (hosts in the order ranks first name them), a ping-pong and the same probe: with the
//    above, every link a ring over the hosts in rank order crosses, and every link
//    between consecutive stages of a pipeline laid over them.
// Both are collective: every rank of the communicator calls them, in the same order.
// Their messages are traced as Send/Recv events with matching message ids, so the aligned
// timeline can be checked for causality (no receive ends before its send starts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/status.h"
#include "loom/trace/recorder.h"

namespace loom::engine {

struct ClockSample {
  std::int64_t send_ns = 0;    // rank 0's clock when it sent the ping
  std::int64_t remote_ns = 0;  // the peer's clock when it answered
  std::int64_t recv_ns = 0;    // rank 0's clock when the answer arrived
};

struct ClockEstimate {
  std::int64_t offset_ns = 0;       // peer clock minus rank-0 clock
  std::int64_t uncertainty_ns = 0;  // half the best round trip
  std::int64_t at_ns = 0;           // the peer's clock when the estimate holds
};

// The estimate from the sample with the lowest round trip (pure; for tests).
ClockEstimate estimate_from_samples(const std::vector<ClockSample>& samples);

// Collective. Every rank gets its own estimate (rank 0: zero offset and uncertainty).
// `phase` (0 at start, 1 at end, ...) keeps the traced message ids of separate
// estimates apart.
Expected<ClockEstimate> estimate_clock_offset(comm::Communicator& comm, trace::Recorder* recorder, int phase,
                                              int rounds = 16);

// Collective. Ranks 0 and 1 exchange `bytes`-sized messages `repeats` times each way, one
// after the other; the result (GB/s, one direction: bytes over each message's time, its
// latency included) is returned on every rank (0 for a one-rank world).
inline constexpr std::int64_t kP2pProbeBytes = 4 << 20;
Expected<double> probe_p2p_bandwidth(comm::Communicator& comm, trace::Recorder* recorder,
                                     std::int64_t bytes = kP2pProbeBytes, int repeats = 8);

// The probe between rank 0 and the first rank on one other host.
struct HostProbe {
  int rank = 0;     // the first rank on its host
  double gbs = 0;   // as probe_p2p_bandwidth measures it
};

// Collective. `host` is this rank's host name: rank 0 gathers every rank's, and every rank
// gets the first rank on each host, hosts in the order ranks first name them (rank 0's
// first). The probes below take this list, so the names are gathered once.
Expected<std::vector<int>> first_ranks_by_host(comm::Communicator& comm, const std::string& host);

// Collective. One host at a time, rank 0 probes with the first rank on each host other
// than its own (`firsts`: first_ranks_by_host), as probe_p2p_bandwidth does, except rank 1
// (that probe measured it already). Every rank gets every result, in rank order; empty
// where every rank shares rank 0's host.
Expected<std::vector<HostProbe>> probe_other_hosts(comm::Communicator& comm, trace::Recorder* recorder,
                                                   const std::vector<int>& firsts,
                                                   std::int64_t bytes = kP2pProbeBytes, int repeats = 8);

// The link between the first ranks of two consecutive hosts, measured between them.
struct HostPairProbe {
  int from = 0, to = 0;       // the first rank on one host and on the next
  std::int64_t latency_ns = 0;  // half the shortest round trip of 8-byte ping-pongs
  double gbs = 0;               // as probe_p2p_bandwidth measures it
};

// Collective. For each two consecutive hosts other than rank 0's (`firsts`:
// first_ranks_by_host), one pair at a time, their first ranks ping-pong `pings` times and
// exchange the probe's messages; every rank gets every result, in host order; empty for
// fewer than three hosts.
Expected<std::vector<HostPairProbe>> probe_next_hosts(comm::Communicator& comm, trace::Recorder* recorder,
                                                      const std::vector<int>& firsts,
                                                      std::int64_t bytes = kP2pProbeBytes, int repeats = 8,
                                                      int pings = 16);

}  // namespace loom::engine
