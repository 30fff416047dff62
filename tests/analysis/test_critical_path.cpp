// Critical path and wait attribution on constructed traces whose answer is worked out by
// hand: a 3-rank pipeline step with a chain of late senders (the path crosses ranks four
// times and is exactly work 36 ms + communication 4 ms), a 2-rank data-parallel step with a
// late arrival at the collective (from either side, with a descheduled share prorated),
// and the groups the plan makes.
#include <QtTest>

#include "loom/analysis/critical_path.h"
#include "loom/test/events.h"

using loom::analysis::CriticalPath;
using loom::analysis::PathPart;
using loom::trace::Event;
using loom::trace::EventKind;
using loom::trace::Stream;

namespace {

constexpr double kMs = 1e6;

Event span(EventKind kind, double start_ms, double end_ms, int step, int layer = -1, int peer = -1, int message = -1,
           Stream stream = Stream::Compute) {
  Event e = loom::testing::span_ms(kind, stream, start_ms, end_ms, step, layer);
  e.peer = peer;
  e.message = message;
  return e;
}

Event send(double start, double end, int step, int peer, int message) {
  return span(EventKind::Send, start, end, step, -1, peer, message, Stream::Host);
}
Event recv(double start, double end, int step, int peer, int message) {
  return span(EventKind::Recv, start, end, step, -1, peer, message, Stream::Host);
}

// Three stages, one micro-batch, step 1 (ms):
//   rank 0: forward L0 [0,10) send m1 [10,11) recv m4 [11,35) (+ its idle twin) backward
//           [35,39) optimizer [39,40)
//   rank 1: recv m1 [0,10.5) forward L1 [10.5,15) send m2 [15,16) recv m3 [16,30) backward
//           [30,34) send m4 [34,35) optimizer [35,37)
//   rank 2: recv m2 [0,15.5) forward of block L5 [15.5,20) holding L2 [15.5,18) and L3
//           [18,20), loss [20,22) backward [22,28) send m3 [28,29) optimizer [29,31)
// Rank 0 ends last (40). Back from there: its optimizer and backward; the receive of m4
// waited for rank 1, which sent at 34; rank 1's backward; m3 from rank 2 at 28; rank 2's
// backward, loss, forward; m2 from rank 1 at 15; rank 1's forward; m1 from rank 0 at 10;
// rank 0's forward to 0.
std::vector<std::vector<Event>> pipeline_step() {
  const int s = 1;
  std::vector<Event> r0 = {span(EventKind::Step, 0, 40, s, -1, -1, -1, Stream::Host),
                           span(EventKind::Forward, 0, 10, s, 0),
                           send(10, 11, s, 1, 1),
                           recv(11, 35, s, 1, 4),
                           span(EventKind::Idle, 11, 35, s, -1, 1),
                           span(EventKind::Backward, 35, 39, s, 0),
                           span(EventKind::Optimizer, 39, 40, s),
                           span(EventKind::AllReduce, 20, 30, s, -1, -1, -1, Stream::Comm)};  // another thread
  std::vector<Event> r1 = {span(EventKind::Step, 0, 37, s, -1, -1, -1, Stream::Host),
                           recv(0, 10.5, s, 0, 1),
                           span(EventKind::Forward, 10.5, 15, s, 1),
                           send(15, 16, s, 2, 2),
                           recv(16, 30, s, 2, 3),
                           span(EventKind::Backward, 30, 34, s, 1),
                           send(34, 35, s, 0, 4),
                           span(EventKind::Optimizer, 35, 37, s)};
  std::vector<Event> r2 = {span(EventKind::Step, 0, 32, s, -1, -1, -1, Stream::Host),
                           recv(0, 15.5, s, 1, 2),
                           span(EventKind::Forward, 15.5, 20, s, 5),  // a block holding two layers
                           span(EventKind::Forward, 15.5, 18, s, 2),
                           span(EventKind::Forward, 18, 20, s, 3),
                           span(EventKind::Loss, 20, 22, s),
                           span(EventKind::Backward, 22, 28, s, 2),
                           send(28, 29, s, 1, 3),
                           span(EventKind::Optimizer, 29, 31, s)};
  return {r0, r1, r2};
}

double ms(std::int64_t ns) { return double(ns) / kMs; }

}  // namespace

class TestCriticalPath : public QObject {
  Q_OBJECT
 private slots:
  void lateSenderChainAcrossThreeRanks() {
    const std::vector<int> no_groups = {-1, -1, -1};
    const CriticalPath p = loom::analysis::critical_path_of_step(pipeline_step(), no_groups, 1);
    QCOMPARE(p.steps, 1);
    QCOMPARE(ms(p.length_ns), 40.0);
    QCOMPARE(ms(p.part_ns[int(PathPart::Work)]), 36.0);
    QCOMPARE(ms(p.part_ns[int(PathPart::Communication)]), 4.0);
    QCOMPARE(p.part_ns[int(PathPart::Untraced)], std::int64_t(0));
    QCOMPARE(p.jumps, std::int64_t(4));
    // Chronological: rank 0's forward, then ranks 1, 2, 1, 0.
    std::vector<std::pair<int, EventKind>> expected = {
        {0, EventKind::Forward},  {1, EventKind::Recv},     {1, EventKind::Forward}, {2, EventKind::Recv},
        {2, EventKind::Forward},  {2, EventKind::Forward},  {2, EventKind::Loss},     {2, EventKind::Backward}, {1, EventKind::Recv},
        {1, EventKind::Backward}, {0, EventKind::Recv},     {0, EventKind::Backward}, {0, EventKind::Optimizer}};
    QCOMPARE(p.segments.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      QCOMPARE(p.segments[i].rank, expected[i].first);
      QCOMPARE(p.segments[i].kind, expected[i].second);
    }
    QCOMPARE(ms(p.segments[1].start_ns), 10.0);  // m1 in flight from its send to the receive's end
    QCOMPARE(ms(p.segments[1].end_ns), 10.5);
    QCOMPARE(p.segments[4].layer, 2);  // the block's layers, not the block
    QCOMPARE(p.segments[5].layer, 3);
    // The profile's largest entry: rank 0's forward, 10 ms.
    QCOMPARE(p.profile.front().rank, 0);
    QCOMPARE(p.profile.front().kind, EventKind::Forward);
    QCOMPARE(ms(p.profile.front().ns), 10.0);
  }

  // A PyTorch DDP step: the main thread traces nothing while it waits for the all-reduce
  // on gloo's thread. The gap is that all-reduce's up to its end (from the gap's start, as
  // the all-reduce began earlier), and untraced after it; a gap with no communication
  // ending in it stays untraced.
  void gapWaitingForBackgroundCommunication() {
    const std::vector<Event> r0 = {span(EventKind::Step, 0, 8, 1, -1, -1, -1, Stream::Host),
                                   span(EventKind::Forward, 0, 1, 1, 0),
                                   span(EventKind::Backward, 1, 2, 1, 0),
                                   span(EventKind::AllReduce, 1.5, 4.5, 1, -1, -1, -1, Stream::Comm),
                                   span(EventKind::Optimizer, 5, 6, 1),
                                   span(EventKind::DataLoad, 7, 8, 1)};
    const CriticalPath p = loom::analysis::critical_path_of_step({r0}, {-1}, 1);
    QCOMPARE(ms(p.length_ns), 8.0);
    QCOMPARE(ms(p.part_ns[int(PathPart::Work)]), 4.0);
    QCOMPARE(ms(p.part_ns[int(PathPart::Communication)]), 2.5);  // [2, 4.5)
    QCOMPARE(ms(p.part_ns[int(PathPart::Untraced)]), 1.5);       // [4.5, 5) and [6, 7)
    bool allreduce_on_path = false;
    for (const auto& seg : p.segments)
      allreduce_on_path = allreduce_on_path || (seg.kind == EventKind::AllReduce && ms(seg.start_ns) == 2.0 &&
                                                ms(seg.end_ns) == 4.5 && seg.part == PathPart::Communication);
    QVERIFY(allreduce_on_path);
  }

  void lateSendersAreCharged() {
    const auto a = loom::analysis::analyze_paths(pipeline_step(), {-1, -1, -1}, {1});
    QCOMPARE(a.path.steps, 1);
    std::map<std::pair<int, int>, double> waited;  // (waiter, cause) -> ms
    for (const auto& w : a.waits) {
      QCOMPARE(w.reason, std::string("late sender"));
      QCOMPARE(w.count, std::int64_t(1));
      waited[{w.waiter, w.cause}] = ms(w.ns);
    }
    QCOMPARE(waited.size(), std::size_t(4));
    QCOMPARE(waited[std::make_pair(1, 0)], 10.0);  // m1
    QCOMPARE(waited[std::make_pair(2, 1)], 15.0);  // m2
    QCOMPARE(waited[std::make_pair(1, 2)], 12.0);  // m3
    QCOMPARE(waited[std::make_pair(0, 1)], 23.0);  // m4, the largest, listed first
    QCOMPARE(a.waits.front().waiter, 0);
  }

  // Two replicas, one all-reduce wait each step. Step 1: rank 0 backward [0,5) waits
  // [5,15), optimizer [15,16); rank 1 backward [0,12) waits [12,15), optimizer [15,20):
  // rank 1 ends last and was itself the last to arrive. Step 2 (from 100): rank 0's
  // optimizer runs to 125, so the path starts on rank 0, whose wait [105,115) ends on rank
  // 1's arrival at 112; 2 of its 10 ms were descheduled, prorated 0.6 ms to [112,115).
  void lateArrivalAtACollective() {
    std::vector<Event> r0 = {span(EventKind::Step, 0, 16, 1, -1, -1, -1, Stream::Host),
                             span(EventKind::Backward, 0, 5, 1, 0), span(EventKind::Wait, 5, 15, 1),
                             span(EventKind::Optimizer, 15, 16, 1),
                             span(EventKind::Step, 100, 125, 2, -1, -1, -1, Stream::Host),
                             span(EventKind::Backward, 100, 105, 2, 0), span(EventKind::Wait, 105, 115, 2),
                             span(EventKind::Optimizer, 115, 125, 2)};
    r0[6].descheduled_us = 2000;
    std::vector<Event> r1 = {span(EventKind::Step, 0, 20, 1, -1, -1, -1, Stream::Host),
                             span(EventKind::Backward, 0, 12, 1, 0), span(EventKind::Wait, 12, 15, 1),
                             span(EventKind::Optimizer, 15, 20, 1),
                             span(EventKind::Step, 100, 116, 2, -1, -1, -1, Stream::Host),
                             span(EventKind::Backward, 100, 112, 2, 0), span(EventKind::Wait, 112, 115, 2),
                             span(EventKind::Optimizer, 115, 116, 2)};
    const std::vector<int> one_group = {0, 0};
    const CriticalPath s1 = loom::analysis::critical_path_of_step({r0, r1}, one_group, 1);
    QCOMPARE(ms(s1.length_ns), 20.0);
    QCOMPARE(ms(s1.part_ns[int(PathPart::Work)]), 17.0);
    QCOMPARE(ms(s1.part_ns[int(PathPart::Communication)]), 3.0);
    QCOMPARE(s1.jumps, std::int64_t(0));

    const CriticalPath s2 = loom::analysis::critical_path_of_step({r0, r1}, one_group, 2);
    QCOMPARE(ms(s2.length_ns), 25.0);
    QCOMPARE(s2.jumps, std::int64_t(1));
    QCOMPARE(ms(s2.part_ns[int(PathPart::Work)]), 22.0);  // rank 1's backward 12 + rank 0's optimizer 10
    QCOMPARE(ms(s2.part_ns[int(PathPart::Descheduled)]), 0.6);
    QCOMPARE(ms(s2.part_ns[int(PathPart::Communication)]), 2.4);
    QCOMPARE(s2.segments.front().rank, 1);

    const auto a = loom::analysis::analyze_paths({r0, r1}, one_group, {1, 2});
    QCOMPARE(a.path.steps, 2);
    QCOMPARE(ms(a.path.length_ns), 45.0);
    QCOMPARE(a.waits.size(), std::size_t(1));
    QCOMPARE(a.waits[0].waiter, 0);
    QCOMPARE(a.waits[0].cause, 1);
    QCOMPARE(a.waits[0].reason, std::string("late arrival at a collective"));
    QCOMPARE(ms(a.waits[0].ns), 14.0);  // 7 ms in each step
    QCOMPARE(a.waits[0].count, std::int64_t(2));

    // Without a group the waits are not matched across ranks: no jump, no attribution.
    const auto alone = loom::analysis::analyze_paths({r0, r1}, {-1, -1}, {1, 2});
    QCOMPARE(alone.path.jumps, std::int64_t(0));
    QVERIFY(alone.waits.empty());
  }

  void groupsFollowThePlan() {
    loom::Plan plan;
    plan.parallel.data_parallel = 2;
    plan.parallel.stages = 2;
    QCOMPARE(loom::analysis::sync_groups(plan, 4), (std::vector<int>{0, 0, 1, 1}));
    plan.parallel.stages = 1;
    plan.parallel.sync.mode = loom::SyncMode::Ssp;
    QCOMPARE(loom::analysis::sync_groups(plan, 3), (std::vector<int>{-1, -1, -1}));
  }
};

QTEST_GUILESS_MAIN(TestCriticalPath)
#include "test_critical_path.moc"
