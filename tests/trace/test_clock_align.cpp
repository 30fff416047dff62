// Clock alignment tests: a synthetic rank clock with a known skew and drift against
// rank 0's is mapped back to rank 0's clock within a nanosecond or two, before, between
// and after the two sync points; a record without an end estimate is a constant offset.
#include <QtTest>

#include <cmath>

#include "loom/trace/clock_align.h"

using loom::trace::RankRecord;
using loom::trace::Event;

namespace {
constexpr std::int64_t kS = 1'000'000'000;
constexpr std::int64_t kSkewNs = -3'700'000'000;  // rank clock 3.7 s behind rank 0's
constexpr double kDrift = 50e-6;                  // and gaining 50 us per second

// This rank's clock reading at rank-0 time t.
std::int64_t rank_clock(std::int64_t t) { return t + kSkewNs + std::llround(kDrift * double(t)); }

// What the launcher's ping-pong would store: the offset at both sync points, each at
// the rank-clock time it was taken.
RankRecord synced_rank() {
  RankRecord r;
  r.rank = 1;
  const std::int64_t t_start = 2 * kS, t_end = 602 * kS;
  r.sync_start_ns = rank_clock(t_start);
  r.offset_ns = r.sync_start_ns - t_start;
  r.sync_end_ns = rank_clock(t_end);
  r.offset_end_ns = r.sync_end_ns - t_end;
  return r;
}
}  // namespace

class TestClockAlign : public QObject {
  Q_OBJECT
 private slots:
  void skewAndDriftAreRemoved() {
    const RankRecord r = synced_rank();
    // Before the first sync, between the two, at them, and an hour after the last.
    for (std::int64_t t : {std::int64_t(0), 2 * kS, 100 * kS + 123'456, 602 * kS, 3600 * kS + 7}) {
      const std::int64_t back = loom::clock::to_reference_clock(r, rank_clock(t));
      QVERIFY2(std::llabs(back - t) <= 2, qPrintable(QString("t=%1 came back as %2").arg(t).arg(back)));
    }
    QCOMPARE(loom::clock::offset_at(r, r.sync_start_ns), r.offset_ns);
    QCOMPARE(loom::clock::offset_at(r, r.sync_end_ns), r.offset_end_ns);
    QVERIFY(std::abs(loom::clock::drift_ppm(r) - 50.0) < 0.01);
  }

  void withoutEndEstimateTheOffsetIsConstant() {
    RankRecord r;
    r.offset_ns = kS;  // rank clock 1 s ahead
    r.offset_end_ns = 5 * kS;  // ignored: sync_end_ns is 0
    r.sync_start_ns = 10 * kS;
    QVERIFY(!loom::clock::has_end_estimate(r));
    QCOMPARE(loom::clock::offset_at(r, 0), kS);
    QCOMPARE(loom::clock::offset_at(r, 1000 * kS), kS);
    QCOMPARE(loom::clock::to_reference_clock(r, 3 * kS), 2 * kS);
    QCOMPARE(loom::clock::drift_ppm(r), 0.0);
  }

  void alignEventsMovesBothEnds() {
    const RankRecord r = synced_rank();
    Event a, b;
    a.start_ns = rank_clock(10 * kS);
    a.end_ns = rank_clock(10 * kS + 5'000'000);
    b.start_ns = rank_clock(500 * kS);
    b.end_ns = b.start_ns;  // an instant stays an instant
    std::vector<Event> events{a, b};
    loom::clock::align_events(r, events);
    QVERIFY(std::llabs(events[0].start_ns - 10 * kS) <= 2);
    QVERIFY(std::llabs(events[0].end_ns - (10 * kS + 5'000'000)) <= 2);
    QVERIFY(std::llabs(events[1].start_ns - 500 * kS) <= 2);
    QCOMPARE(events[1].end_ns, events[1].start_ns);

    RankRecord rank0;  // offset 0: nothing moves
    std::vector<Event> same{a};
    loom::clock::align_events(rank0, same);
    QCOMPARE(same[0].start_ns, a.start_ns);
    QCOMPARE(same[0].end_ns, a.end_ns);
  }
};

QTEST_GUILESS_MAIN(TestClockAlign)
#include "test_clock_align.moc"
