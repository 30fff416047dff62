// Clock-offset estimation and the point-to-point bandwidth probe (see rank_probes.h).
#include "loom/engine/rank_probes.h"

#include <algorithm>
#include <limits>
#include <string>

#include "loom/engine/message_tags.h"

namespace loom::engine {
namespace {

using trace::Event;
using trace::EventKind;
using trace::Stream;

// Tags kept apart from training traffic (which uses collectives only for now).

// Message ids for the traced probe messages: unique per (kind of probe, round) so a send
// and its receive pair up in the timeline.
constexpr std::int32_t kClockMessageBase = 1 << 24;
constexpr std::int32_t kProbeMessageBase = 2 << 24;
constexpr std::int32_t kPairMessageBase = 3 << 24;

// Sends or receives one traced message on the communication stream.
Status traced_transfer(comm::Communicator& comm, trace::Recorder* recorder, bool sending, void* data,
                       std::int64_t bytes, int peer, int tag, std::int32_t message) {
  Event e;
  e.kind = sending ? EventKind::Send : EventKind::Recv;
  e.stream = Stream::Comm;
  e.peer = peer;
  e.message = message;
  e.bytes = bytes;
  e.start_ns = trace::now_ns();
  Status s = sending ? comm.send(data, bytes, peer, tag) : comm.recv(data, bytes, peer, tag);
  e.end_ns = trace::now_ns();
  if (recorder && s.ok()) recorder->record(e);
  return s;
}

std::int32_t clock_message(int phase, int peer, int round) {
  return kClockMessageBase + phase * (1 << 20) + peer * 1024 + round * 2;
}

// Rank 0's half of the ping-pong with one peer; returns the samples it measured.
Expected<std::vector<ClockSample>> ping_peer(comm::Communicator& comm, trace::Recorder* recorder, int phase,
                                             int peer, int rounds) {
  std::vector<ClockSample> samples;
  for (int round = 0; round < rounds; ++round) {
    const std::int32_t message = clock_message(phase, peer, round);
    ClockSample s;
    std::int64_t ping = 0;
    s.send_ns = trace::now_ns();
    LOOM_TRY(traced_transfer(comm, recorder, true, &ping, sizeof ping, peer, kClockTag, message));
    LOOM_TRY(traced_transfer(comm, recorder, false, &s.remote_ns, sizeof s.remote_ns, peer, kClockTag, message + 1));
    s.recv_ns = trace::now_ns();
    samples.push_back(s);
  }
  return samples;
}

// A peer's half: answer each ping with the time it arrived, then receive the estimate.
Expected<ClockEstimate> answer_pings(comm::Communicator& comm, trace::Recorder* recorder, int phase, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    const std::int32_t message = clock_message(phase, comm.rank(), round);
    std::int64_t ping = 0;
    LOOM_TRY(traced_transfer(comm, recorder, false, &ping, sizeof ping, 0, kClockTag, message));
    std::int64_t arrived = trace::now_ns();
    LOOM_TRY(traced_transfer(comm, recorder, true, &arrived, sizeof arrived, 0, kClockTag, message + 1));
  }
  ClockEstimate estimate;
  LOOM_TRY(comm.recv(&estimate, sizeof estimate, 0, kClockTag));
  return estimate;
}

}  // namespace

ClockEstimate estimate_from_samples(const std::vector<ClockSample>& samples) {
  ClockEstimate best;
  std::int64_t best_rtt = std::numeric_limits<std::int64_t>::max();
  for (const ClockSample& s : samples) {
    const std::int64_t rtt = s.recv_ns - s.send_ns;
    if (rtt < 0 || rtt >= best_rtt) continue;
    best_rtt = rtt;
    // The answer was taken somewhere inside [send, recv] on rank 0's clock; the midpoint
    // is the estimate and half the round trip bounds the error.
    const std::int64_t midpoint = s.send_ns + rtt / 2;
    best.offset_ns = s.remote_ns - midpoint;
    best.uncertainty_ns = (rtt + 1) / 2;
    best.at_ns = s.remote_ns;
  }
  return best;
}

Expected<ClockEstimate> estimate_clock_offset(comm::Communicator& comm, trace::Recorder* recorder, int phase,
                                              int rounds) {
  if (comm.rank() != 0) return answer_pings(comm, recorder, phase, rounds);
  // Peers are measured one at a time so no round trip queues behind another's.
  for (int peer = 1; peer < comm.size(); ++peer) {
    auto samples = ping_peer(comm, recorder, phase, peer, rounds);
    if (!samples.ok()) return samples.error();
    ClockEstimate estimate = estimate_from_samples(*samples);
    LOOM_TRY(comm.send(&estimate, sizeof estimate, peer, kClockTag));
  }
  return ClockEstimate{0, 0, trace::now_ns()};
}

namespace {

// Ranks `from` and `to` exchange the probe's messages (traced with ids from `base`); the
// figure reaches every rank.
Expected<double> exchange_probe(comm::Communicator& comm, trace::Recorder* recorder, int from, int to,
                                std::int32_t base, std::int64_t bytes, int repeats) {
  double gbs = 0;
  const bool first = comm.rank() == from;
  if (first || comm.rank() == to) {
    std::vector<char> buffer(static_cast<std::size_t>(bytes), 1);
    const int other = first ? to : from;
    // One untraced exchange first: it pays for connection set-up and page faults.
    LOOM_TRY(first ? comm.send(buffer.data(), bytes, other, kProbeTag) : comm.recv(buffer.data(), bytes, other, kProbeTag));
    const std::int64_t start = trace::now_ns();
    for (int i = 0; i < 2 * repeats; ++i) {
      const bool sending = (i % 2 == 0) == first;
      LOOM_TRY(traced_transfer(comm, recorder, sending, buffer.data(), bytes, other, kProbeTag, base + i));
    }
    const double seconds = double(trace::now_ns() - start) * 1e-9;
    gbs = seconds > 0 ? double(bytes) * 2.0 * repeats / seconds * 1e-9 : 0.0;
  }
  // Every rank learns the figure, so whichever rank reports it reports the same number.
  LOOM_TRY(comm.broadcast(&gbs, sizeof gbs, from));
  return gbs;
}

// Ranks 0 and `peer`.
Expected<double> probe_pair(comm::Communicator& comm, trace::Recorder* recorder, int peer, std::int64_t bytes,
                            int repeats) {
  return exchange_probe(comm, recorder, 0, peer, kProbeMessageBase + (peer - 1) * 1024, bytes, repeats);
}

// Half the shortest round trip of `pings` 8-byte ping-pongs between `from` and `to`,
// on every rank.
Expected<std::int64_t> pair_latency(comm::Communicator& comm, trace::Recorder* recorder, int from, int to,
                                    std::int32_t base, int pings) {
  std::int64_t half_rtt = 0;
  if (comm.rank() == from || comm.rank() == to) {
    const bool first = comm.rank() == from;
    const int other = first ? to : from;
    std::int64_t best = std::numeric_limits<std::int64_t>::max(), word = 0;
    for (int i = 0; i < pings; ++i) {
      const std::int64_t start = trace::now_ns();
      LOOM_TRY(traced_transfer(comm, recorder, first, &word, sizeof word, other, kClockTag, base + 2 * i));
      LOOM_TRY(traced_transfer(comm, recorder, !first, &word, sizeof word, other, kClockTag, base + 2 * i + 1));
      best = std::min(best, trace::now_ns() - start);
    }
    half_rtt = (best + 1) / 2;
  }
  LOOM_TRY(comm.broadcast(&half_rtt, sizeof half_rtt, from));
  return half_rtt;
}

}  // namespace

constexpr std::size_t kHostNameBytes = 256;

Expected<std::vector<int>> first_ranks_by_host(comm::Communicator& comm, const std::string& host) {
  std::vector<char> name(kHostNameBytes, 0);
  host.copy(name.data(), kHostNameBytes - 1);
  std::vector<int> firsts = {0};
  if (comm.rank() != 0) {
    LOOM_TRY(comm.send(name.data(), kHostNameBytes, 0, kHostNameTag));
  } else {
    std::vector<std::string> seen = {host};
    for (int r = 1; r < comm.size(); ++r) {
      LOOM_TRY(comm.recv(name.data(), kHostNameBytes, r, kHostNameTag));
      const std::string peer_host(name.data());
      if (std::find(seen.begin(), seen.end(), peer_host) != seen.end()) continue;
      seen.push_back(peer_host);
      firsts.push_back(r);
    }
  }
  // The list reaches every rank: its length, then its ranks.
  int count = int(firsts.size());
  LOOM_TRY(comm.broadcast(&count, sizeof count, 0));
  firsts.resize(std::size_t(count));
  LOOM_TRY(comm.broadcast(firsts.data(), std::int64_t(sizeof(int)) * count, 0));
  return firsts;
}

Expected<double> probe_p2p_bandwidth(comm::Communicator& comm, trace::Recorder* recorder, std::int64_t bytes,
                                     int repeats) {
  if (comm.size() < 2) return 0.0;
  return probe_pair(comm, recorder, 1, bytes, repeats);
}

Expected<std::vector<HostProbe>> probe_other_hosts(comm::Communicator& comm, trace::Recorder* recorder,
                                                   const std::vector<int>& firsts, std::int64_t bytes, int repeats) {
  std::vector<HostProbe> probes;
  for (const int rank : firsts) {
    if (rank == 0 || rank == 1) continue;  // rank 1: probe_p2p_bandwidth measured it
    auto gbs = probe_pair(comm, recorder, rank, bytes, repeats);
    if (!gbs.ok()) return gbs.error();
    probes.push_back({rank, *gbs});
  }
  return probes;
}

Expected<std::vector<HostPairProbe>> probe_next_hosts(comm::Communicator& comm, trace::Recorder* recorder,
                                                      const std::vector<int>& firsts, std::int64_t bytes, int repeats,
                                                      int pings) {
  std::vector<HostPairProbe> probes;
  for (std::size_t k = 1; k + 1 < firsts.size(); ++k) {
    HostPairProbe p{firsts[k], firsts[k + 1]};
    const std::int32_t base = kPairMessageBase + std::int32_t(k) * 1024;
    auto latency = pair_latency(comm, recorder, p.from, p.to, base, pings);
    if (!latency.ok()) return latency.error();
    auto gbs = exchange_probe(comm, recorder, p.from, p.to, base + 2 * pings, bytes, repeats);
    if (!gbs.ok()) return gbs.error();
    p.latency_ns = *latency, p.gbs = *gbs;
    probes.push_back(p);
  }
  return probes;
}

}  // namespace loom::engine
