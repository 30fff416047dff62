// Clock-offset estimation and the bandwidth probe. The estimator is checked on synthetic
// ping-pongs with a known skew (one machine's ranks share a clock, so a real run cannot
// show a wrong sign or a wrong sample choice); the collective versions run on ranks as
// threads and must trace matching Send/Recv pairs that are causally ordered.
#include <QtTest>

#include <map>
#include <string>
#include <thread>

#include "loom/comm/threads.h"
#include "loom/engine/rank_probes.h"

using namespace loom;
using engine::ClockSample;

namespace {

constexpr std::int64_t kSkew = 3'000'000'000;  // the peer's clock is 3 s ahead

// A ping sent at `send` (rank 0's clock) that takes `out` ns to arrive and `back` ns to return.
ClockSample ping(std::int64_t send, std::int64_t out, std::int64_t back) {
  return {send, send + out + kSkew, send + out + back};
}

}  // namespace

class TestRankProbes : public QObject {
  Q_OBJECT
 private slots:
  void estimatorPicksTheFastestRoundTrip() {
    // Slow, asymmetric round trips would pull the estimate off; the fastest one is tight.
    const std::vector<ClockSample> samples = {ping(1000, 90'000, 5'000), ping(500'000, 2'000, 2'000),
                                              ping(900'000, 5'000, 70'000)};
    const engine::ClockEstimate e = engine::estimate_from_samples(samples);
    QCOMPARE(e.offset_ns, kSkew);
    QCOMPARE(e.uncertainty_ns, std::int64_t(2'000));
    QCOMPARE(e.at_ns, 500'000 + 2'000 + kSkew);
  }

  void estimateIsWithinItsUncertainty() {
    // An asymmetric fastest trip: the true offset must lie within the stated bound.
    const engine::ClockEstimate e = engine::estimate_from_samples({ping(0, 1'000, 9'000)});
    QVERIFY(std::abs(e.offset_ns - kSkew) <= e.uncertainty_ns);
    QCOMPARE(e.uncertainty_ns, std::int64_t(5'000));
  }

  void collectiveProbesTraceCausalPairs() {
    constexpr int kRanks = 3;
    auto comms = comm::make_thread_group(kRanks);
    std::vector<trace::Recorder> recorders(kRanks);
    std::vector<engine::ClockEstimate> estimates(kRanks);
    std::vector<double> bandwidth(kRanks, -1);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        auto e = engine::estimate_clock_offset(*comms[std::size_t(r)], &recorders[std::size_t(r)], 0, 8);
        if (e.ok()) estimates[std::size_t(r)] = *e;
        auto bw = engine::probe_p2p_bandwidth(*comms[std::size_t(r)], &recorders[std::size_t(r)], 1 << 16, 4);
        if (bw.ok()) bandwidth[std::size_t(r)] = *bw;
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r) {
      // Threads share one steady clock: the offset is zero within the estimate's bound.
      QVERIFY(std::abs(estimates[std::size_t(r)].offset_ns) <= estimates[std::size_t(r)].uncertainty_ns);
      QVERIFY(bandwidth[std::size_t(r)] > 0);
      QCOMPARE(bandwidth[std::size_t(r)], bandwidth[0]);  // every rank reports rank 0's figure
    }
    std::map<std::int32_t, trace::Event> sends, recvs;
    for (auto& recorder : recorders) {
      std::vector<trace::Event> events;
      recorder.drain(events);
      for (const auto& e : events) (e.kind == trace::EventKind::Send ? sends : recvs)[e.message] = e;
    }
    // 8 pings + 8 answers to each of 2 peers, and 4 probe messages each way.
    QCOMPARE(int(sends.size()), 2 * 8 * 2 + 8);
    QCOMPARE(recvs.size(), sends.size());
    for (const auto& [message, recv] : recvs) {
      QVERIFY(sends.count(message));
      QCOMPARE(recv.peer == -1, false);
      QVERIFY(recv.end_ns >= sends[message].start_ns);
    }
  }

  // Ranks on hosts {a, a, b, c}: rank 0 probes b through rank 2 and c through rank 3, one
  // after the other; every rank gets both figures. On {a, b, b, c} rank 1 stands for b
  // (probe_p2p_bandwidth measured it), so only c is probed, through rank 3. On one host
  // nothing is. The probes' traced messages pair up, ids unique.
  void eachOtherHostIsProbedThroughItsFirstRank() {
    QCOMPARE(probed_ranks({"a", "a", "b", "c"}), (std::vector<int>{2, 3}));
    QCOMPARE(probed_ranks({"a", "b", "b", "c"}), (std::vector<int>{3}));
    QCOMPARE(probed_ranks({"a", "a", "a"}), (std::vector<int>{}));
    QCOMPARE(probed_ranks({"a"}), (std::vector<int>{}));
  }

  // Hosts {a, b, c, d}: beside rank 0's probes (a to each), the first ranks of b and c,
  // then of c and d, measure the link between them, so every link of a ring a-b-c-d-a is
  // measured. {a, a, b, b, c}: b and c through ranks 2 and 4; {a, b, a, c}: b and c
  // through ranks 1 and 3 (hosts in the order ranks first name them). Fewer than three
  // hosts: none. Every rank gets every pair with the same figures; messages pair up.
  void consecutiveHostsAreProbedBetweenTheirFirstRanks() {
    QCOMPARE(probed_pairs({"a", "b", "c", "d"}), (std::vector<std::pair<int, int>>{{1, 2}, {2, 3}}));
    QCOMPARE(probed_pairs({"a", "a", "b", "b", "c"}), (std::vector<std::pair<int, int>>{{2, 4}}));
    QCOMPARE(probed_pairs({"a", "b", "a", "c"}), (std::vector<std::pair<int, int>>{{1, 3}}));
    QCOMPARE(probed_pairs({"a", "b", "b"}), (std::vector<std::pair<int, int>>{}));
    QCOMPARE(probed_pairs({"a"}), (std::vector<std::pair<int, int>>{}));
  }

 private:
  static std::vector<std::pair<int, int>> probed_pairs(const std::vector<std::string>& hosts) {
    const int n = int(hosts.size());
    constexpr int kPings = 4, kRepeats = 2;
    auto comms = comm::make_thread_group(n);
    std::vector<trace::Recorder> recorders(static_cast<std::size_t>(n));
    std::vector<std::vector<engine::HostPairProbe>> got(static_cast<std::size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        auto probes = engine::probe_next_hosts(*comms[std::size_t(r)], &recorders[std::size_t(r)], hosts[std::size_t(r)],
                                               1 << 14, kRepeats, kPings);
        if (probes.ok()) got[std::size_t(r)] = *probes;
        else got[std::size_t(r)] = {{-1, -1, 0, 0}};
      });
    for (auto& t : threads) t.join();
    std::map<std::int32_t, int> sends, recvs;
    for (auto& recorder : recorders) {
      std::vector<trace::Event> events;
      recorder.drain(events);
      for (const auto& e : events) ++(e.kind == trace::EventKind::Send ? sends : recvs)[e.message];
    }
    std::vector<std::pair<int, int>> pairs;
    for (const engine::HostPairProbe& p : got[0]) {
      pairs.emplace_back(p.from, p.to);
      if (!(p.gbs > 0) || p.latency_ns <= 0) return {{-2, 0}};
    }
    for (int r = 1; r < n; ++r)
      for (std::size_t i = 0; i < got[0].size(); ++i)
        if (got[std::size_t(r)].size() != got[0].size() || got[std::size_t(r)][i].gbs != got[0][i].gbs ||
            got[std::size_t(r)][i].latency_ns != got[0][i].latency_ns)
          return {{-3, r}};
    // each pair: 2 x kPings ping-pong messages and 2 x kRepeats probe messages, once each
    if (sends.size() != got[0].size() * (2 * kPings + 2 * kRepeats) || recvs.size() != sends.size()) return {{-4, 0}};
    for (const auto& [message, count] : sends)
      if (count != 1 || recvs[message] != 1) return {{-5, message}};
    return pairs;
  }

  // The ranks probe_other_hosts probed, as rank 0 got them; every rank must get the same
  // list with the same figures, and the traced messages must pair up.
  static std::vector<int> probed_ranks(const std::vector<std::string>& hosts) {
    const int n = int(hosts.size());
    auto comms = comm::make_thread_group(n);
    std::vector<trace::Recorder> recorders(static_cast<std::size_t>(n));
    std::vector<std::vector<engine::HostProbe>> got(static_cast<std::size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        auto probes = engine::probe_other_hosts(*comms[std::size_t(r)], &recorders[std::size_t(r)], hosts[std::size_t(r)],
                                                1 << 14, 2);
        if (probes.ok()) got[std::size_t(r)] = *probes;
        else got[std::size_t(r)] = {{-1, 0}};
      });
    for (auto& t : threads) t.join();
    std::map<std::int32_t, int> sends, recvs;
    for (auto& recorder : recorders) {
      std::vector<trace::Event> events;
      recorder.drain(events);
      for (const auto& e : events) ++(e.kind == trace::EventKind::Send ? sends : recvs)[e.message];
    }
    std::vector<int> ranks;
    for (const engine::HostProbe& p : got[0]) {
      ranks.push_back(p.rank);
      if (!(p.gbs > 0)) return {-2};
    }
    for (int r = 1; r < n; ++r) {
      if (got[std::size_t(r)].size() != got[0].size()) return {-3};
      for (std::size_t i = 0; i < got[0].size(); ++i)
        if (got[std::size_t(r)][i].rank != got[0][i].rank || got[std::size_t(r)][i].gbs != got[0][i].gbs) return {-4};
    }
    if (sends.size() != 2 * 2 * got[0].size() || recvs.size() != sends.size()) return {-5};
    for (const auto& [message, count] : sends)
      if (count != 1 || recvs[message] != 1) return {-6};
    return ranks;
  }
};

QTEST_APPLESS_MAIN(TestRankProbes)
#include "test_rank_probes.moc"
