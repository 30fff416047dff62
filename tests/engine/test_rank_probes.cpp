// Clock-offset estimation and the bandwidth probe. The estimator is checked on synthetic
// ping-pongs with a known skew (one machine's ranks share a clock, so a real run cannot
// show a wrong sign or a wrong sample choice); the collective versions run on ranks as
// threads and must trace matching Send/Recv pairs that are causally ordered.
#include <QtTest>

#include <algorithm>
#include <map>
#include <optional>
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
  // Each rank's result (nullopt where its probe failed) and how often each traced message
  // id was sent and received.
  template <typename Result>
  struct ProbeRun {
    std::vector<std::optional<Result>> got;
    std::map<std::int32_t, int> sends, recvs;
    bool every_rank_got_one() const {
      return std::all_of(got.begin(), got.end(), [](const auto& g) { return g.has_value(); });
    }
    bool messages_pair_once() const {
      if (recvs.size() != sends.size()) return false;
      for (const auto& [message, count] : sends)
        if (count != 1 || !recvs.count(message) || recvs.at(message) != 1) return false;
      return true;
    }
  };

  // `probe(comm, recorder, firsts)` on every rank of a thread group told it sits on
  // `hosts`, after first_ranks_by_host gave the list, as a rank's set-up does.
  template <typename Result, typename Probe>
  static ProbeRun<Result> run_probes(const std::vector<std::string>& hosts, Probe probe) {
    const std::size_t n = hosts.size();
    auto comms = comm::make_thread_group(int(n));
    std::vector<trace::Recorder> recorders(n);
    ProbeRun<Result> out;
    out.got.resize(n);
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        auto firsts = engine::first_ranks_by_host(*comms[r], hosts[r]);
        if (!firsts.ok()) return;
        auto result = probe(*comms[r], &recorders[r], *firsts);
        if (result.ok()) out.got[r] = *result;
      });
    for (auto& t : threads) t.join();
    for (auto& recorder : recorders) {
      std::vector<trace::Event> events;
      recorder.drain(events);
      for (const auto& e : events) ++(e.kind == trace::EventKind::Send ? out.sends : out.recvs)[e.message];
    }
    return out;
  }

  // The pairs probe_next_hosts probed, as rank 0 got them; every rank must get the same
  // figures, and each pair's 2 x kPings ping-pong and 2 x kRepeats probe messages must
  // pair up once.
  static std::vector<std::pair<int, int>> probed_pairs(const std::vector<std::string>& hosts) {
    constexpr int kPings = 4, kRepeats = 2;
    const auto run = run_probes<std::vector<engine::HostPairProbe>>(
        hosts, [](comm::Communicator& c, trace::Recorder* recorder, const std::vector<int>& firsts) {
          return engine::probe_next_hosts(c, recorder, firsts, 1 << 14, kRepeats, kPings);
        });
    if (!run.every_rank_got_one()) return {{-1, 0}};
    const auto& first = *run.got[0];
    std::vector<std::pair<int, int>> pairs;
    for (const engine::HostPairProbe& p : first) {
      pairs.emplace_back(p.from, p.to);
      if (!(p.gbs > 0) || p.latency_ns <= 0) return {{-2, 0}};
    }
    for (const auto& got : run.got)
      for (std::size_t i = 0; i < first.size(); ++i)
        if (got->size() != first.size() || (*got)[i].gbs != first[i].gbs || (*got)[i].latency_ns != first[i].latency_ns)
          return {{-3, 0}};
    if (run.sends.size() != first.size() * (2 * kPings + 2 * kRepeats) || !run.messages_pair_once()) return {{-4, 0}};
    return pairs;
  }

  // The ranks probe_other_hosts probed, as rank 0 got them; every rank must get the same
  // list with the same figures, and the traced messages must pair up.
  static std::vector<int> probed_ranks(const std::vector<std::string>& hosts) {
    const auto run = run_probes<std::vector<engine::HostProbe>>(
        hosts, [](comm::Communicator& c, trace::Recorder* recorder, const std::vector<int>& firsts) {
          return engine::probe_other_hosts(c, recorder, firsts, 1 << 14, 2);
        });
    if (!run.every_rank_got_one()) return {-1};
    const auto& first = *run.got[0];
    std::vector<int> ranks;
    for (const engine::HostProbe& p : first) {
      ranks.push_back(p.rank);
      if (!(p.gbs > 0)) return {-2};
    }
    for (const auto& got : run.got) {
      if (got->size() != first.size()) return {-3};
      for (std::size_t i = 0; i < first.size(); ++i)
        if ((*got)[i].rank != first[i].rank || (*got)[i].gbs != first[i].gbs) return {-4};
    }
    if (run.sends.size() != 2 * 2 * first.size() || !run.messages_pair_once()) return {-5};
    return ranks;
  }
};

QTEST_APPLESS_MAIN(TestRankProbes)
#include "test_rank_probes.moc"
