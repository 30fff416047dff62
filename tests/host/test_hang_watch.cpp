// The job watchdog's rules (launcher/host hang_watch.h): the limit per phase, which silent
// rank is blamed, and what the user reads.
#include <QtTest>

#include "loom/host/hang_watch.h"

using namespace loom::host;
using loom::trace::EventKind;

namespace {
constexpr std::int64_t kS = 1'000'000'000;

RankActivity active(int rank, std::int64_t last_progress_ns, bool training = true) {
  RankActivity a;
  a.rank = rank;
  a.connected = true;
  a.training = training;
  a.last_progress_ns = last_progress_ns;
  return a;
}
}  // namespace

class TestHangWatch : public QObject {
  Q_OBJECT
 private slots:
  void limitsPerPhase() {
    HangLimits limits;
    QCOMPARE(hang_limit_s(limits, false, 0.01), 120.0);       // setup
    QCOMPARE(hang_limit_s(limits, true, 0.01), 30.0);         // the floor
    QCOMPARE(hang_limit_s(limits, true, 2.5), 50.0);          // 20 median steps
    QCOMPARE(hang_limit_s(limits, true, std::nan("")), 30.0); // no step seen yet
    limits.fixed_s = 3;
    QCOMPARE(hang_limit_s(limits, false, 2.5), 120.0);        // setup keeps its own limit
    QCOMPARE(hang_limit_s(limits, true, 2.5), 3.0);           // the plan's own limit wins
    limits.fixed_s = 300;
    QCOMPARE(hang_limit_s(limits, false, 2.5), 300.0);        // unless the plan's is longer
  }

  void everyRankProgressingIsNoStall() {  // 10 s and 5 s silent, limit 30 s
    const std::vector<RankActivity> ranks{active(0, 90 * kS), active(1, 95 * kS)};
    QVERIFY(!find_stall(ranks, 100 * kS, {}, 0.01));
  }

  // One rank still progressing: the silent ones may be waiting for it (an asynchronous
  // worker done early waits for a straggler at the end). Not a hang.
  void oneRankProgressingIsNoStall() {
    const std::vector<RankActivity> ranks{active(0, 10 * kS), active(1, 99 * kS)};
    QVERIFY(!find_stall(ranks, 100 * kS, {}, 0.01));
  }

  // Rank 1 went quiet first; rank 0 then blocked waiting on it: rank 1 is blamed.
  void longestSilentIsBlamed() {
    std::vector<RankActivity> ranks{active(0, 62 * kS), active(1, 60 * kS)};
    ranks[1].has_last_span = true;
    ranks[1].last_span.kind = EventKind::Backward;
    ranks[1].last_span.layer = 2;
    ranks[1].last_span.step = 41;
    const auto stall = find_stall(ranks, 100 * kS, {}, 0.01);
    QVERIFY(stall);
    QCOMPARE(stall->rank, 1);
    QCOMPARE(stall->also_silent, std::vector<int>{0});
    QCOMPARE(QString::fromStdString(describe_stall(*stall, {"flatten", "fc1", "relu", "fc2"})),
             QStringLiteral("rank 1 recorded nothing for 40 s (limit 30 s); its last span: backward, layer relu, "
                            "step 41. Also silent, waiting on it or hung too: rank 0"));
  }

  // A stopped process is the cause even when a waiting peer has been silent longer.
  void stoppedProcessIsBlamedFirst() {
    std::vector<RankActivity> ranks{active(0, 50 * kS), active(1, 60 * kS)};
    ranks[1].process_stopped = true;
    const auto stall = find_stall(ranks, 100 * kS, {}, 0.01);
    QVERIFY(stall);
    QCOMPARE(stall->rank, 1);
    QVERIFY(describe_stall(*stall).find("its process is stopped") != std::string::npos);
    QCOMPARE(stall->also_silent, std::vector<int>{0});
  }

  // A stopped worker of an asynchronous job, past its limit, while its peers train on:
  // a hang (it never resumes by itself), though another rank progresses. Silent as long
  // but not stopped, it is not one.
  void stoppedRankPastItsLimitIsHungWhileOthersProgress() {
    std::vector<RankActivity> ranks{active(0, 60 * kS), active(1, 99 * kS), active(2, 99 * kS)};
    QVERIFY(!find_stall(ranks, 100 * kS, {}, 0.01));
    ranks[0].process_stopped = true;
    const auto stall = find_stall(ranks, 100 * kS, {}, 0.01);
    QVERIFY(stall);
    QCOMPARE(stall->rank, 0);
    QVERIFY(stall->also_silent.empty());
    ranks[0].last_progress_ns = 80 * kS;  // stopped, but within its limit: not yet
    QVERIFY(!find_stall(ranks, 100 * kS, {}, 0.01));
  }

  // Setup has its own, longer limit; finished and unconnected ranks are not watched.
  void setupFinishedAndUnconnectedAreSpared() {
    std::vector<RankActivity> ranks{active(0, 10 * kS, false), active(1, 10 * kS), active(2, 10 * kS)};
    ranks[1].finished = true;
    ranks[2].connected = false;
    QVERIFY(!find_stall(ranks, 100 * kS, {}, 0.01));  // rank 0: 90 s of setup < 120 s
    const auto stall = find_stall(ranks, 131 * kS, {}, 0.01);
    QVERIFY(stall);
    QCOMPARE(stall->rank, 0);
    QVERIFY(describe_stall(*stall).find("no span yet (still in setup)") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestHangWatch)
#include "test_hang_watch.moc"
