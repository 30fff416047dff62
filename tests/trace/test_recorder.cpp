// Recorder tests: concurrent producers with a concurrent drainer lose and duplicate
// nothing; several recorders in one process keep their events apart; Span records what
// it was given. Each event encodes its thread and sequence number so a lost, duplicated
// or torn event is detected. Communication spans carry the time their thread waited for a
// core, as the kernel counts it; a twin shares its span's interval; chained layer spans
// share their boundaries. (The RunWriter shipping updates into a store is tested with the
// store, tests/store, where its sink lives.)
#include <QtTest>

#include <sched.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "loom/trace/recorder.h"
#include "loom/trace/run_writer.h"

using loom::trace::Event;
using loom::trace::EventKind;
using loom::trace::Recorder;
using loom::trace::Span;
using loom::trace::Stream;

namespace {
Event make_event(int thread, std::int64_t seq) {
  Event e;
  e.start_ns = seq;
  e.end_ns = seq + 1;
  e.bytes = (static_cast<std::int64_t>(thread) << 40) | seq;
  e.peer = thread;
  e.message = static_cast<std::int32_t>(seq);
  e.step = static_cast<std::int32_t>(seq % 1000);
  e.layer = static_cast<std::int32_t>(seq % 7);
  e.kind = static_cast<EventKind>(seq % loom::trace::kEventKindCount);
  e.stream = static_cast<Stream>(thread % loom::trace::kStreamCount);
  return e;
}

bool same(const Event& a, const Event& b) { return std::memcmp(&a, &b, sizeof(Event)) == 0; }
}  // namespace

class TestRecorder : public QObject {
  Q_OBJECT
 private slots:
  void init() {
#if !LOOM_TRACING
    QSKIP("tracing compiled out (LOOM_TRACING=0)");
#endif
  }

  void kindAndStreamNames() {
    QCOMPARE(loom::trace::event_kind_name(EventKind::Forward), std::string_view("forward"));
    QCOMPARE(loom::trace::event_kind_name(EventKind::DataLoad), std::string_view("data"));
    QCOMPARE(loom::trace::event_kind_name(EventKind::InjectedDelay), std::string_view("delay"));
    QCOMPARE(loom::trace::event_kind_name(EventKind::Barrier), std::string_view("barrier"));
    QCOMPARE(loom::trace::stream_name(Stream::Comm), std::string_view("comm"));
    QCOMPARE(loom::trace::stream_name(Stream::Host), std::string_view("host"));
  }

  void concurrentRecordAndDrain() {
    constexpr int kThreads = 4;
    constexpr std::int64_t kPerThread = 200'000;
    Recorder rec(1000);  // small chunks: many chunk switches and recycles
    std::atomic<int> running{kThreads};
    std::vector<Event> drained;
    std::thread drainer([&] {
      while (running.load() > 0) rec.drain(drained);
    });
    std::vector<std::thread> producers;
    for (int t = 0; t < kThreads; ++t) {
      producers.emplace_back([&, t] {
        for (std::int64_t i = 0; i < kPerThread; ++i) rec.record(make_event(t, i));
        running.fetch_sub(1);
      });
    }
    for (auto& p : producers) p.join();
    drainer.join();
    rec.drain(drained);  // whatever the drainer had not seen yet

    QCOMPARE(rec.recorded(), static_cast<std::uint64_t>(kThreads * kPerThread));
    QCOMPARE(drained.size(), static_cast<std::size_t>(kThreads * kPerThread));
    // Per thread, events come out in order (FIFO per buffer), exactly once, untorn.
    std::vector<std::int64_t> next(kThreads, 0);
    for (const Event& e : drained) {
      int t = e.peer;
      QVERIFY(t >= 0 && t < kThreads);
      QCOMPARE(static_cast<std::int64_t>(e.message), next[t]);
      QVERIFY(same(e, make_event(t, next[t])));
      ++next[t];
    }
    for (int t = 0; t < kThreads; ++t) QCOMPARE(next[t], kPerThread);
    std::vector<Event> again;
    QCOMPARE(rec.drain(again), std::size_t(0));
  }

  void severalRecorders() {
    std::vector<Event> out_a, out_b;
    {
      Recorder a(8), b(8);
      for (int i = 0; i < 100; ++i) {
        a.record(make_event(1, i));
        b.record(make_event(2, i));
      }
      std::thread other([&] { b.record(make_event(3, 0)); });
      other.join();
      a.drain(out_a);
      b.drain(out_b);
      QCOMPARE(a.recorded(), std::uint64_t(100));
      QCOMPARE(b.recorded(), std::uint64_t(101));
    }
    QCOMPARE(out_a.size(), std::size_t(100));
    for (const Event& e : out_a) QCOMPARE(e.peer, 1);
    QCOMPARE(out_b.size(), std::size_t(101));
    // A new recorder, likely at a destroyed one's address, must not inherit its buffer.
    for (int round = 0; round < 3; ++round) {
      Recorder c(8);
      QCOMPARE(c.recorded(), std::uint64_t(0));
      c.record(make_event(4, round));
      std::vector<Event> out;
      QCOMPARE(c.drain(out), std::size_t(1));
      QVERIFY(same(out[0], make_event(4, round)));
    }
  }

  void spanRecordsKindAndTimes() {
    Recorder rec;
    std::int64_t before = loom::trace::now_ns();
    {
      Span s(&rec, EventKind::AllReduce, Stream::Comm, 7, 3, 2, 4096);
      s.event().peer = 5;
      s.event().message = 11;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::int64_t after = loom::trace::now_ns();
    { Span none(nullptr, EventKind::Forward, Stream::Compute, 0); }  // must not crash or record
    std::vector<Event> out;
    QCOMPARE(rec.drain(out), std::size_t(1));
    const Event& e = out[0];
    QCOMPARE(e.kind, EventKind::AllReduce);
    QCOMPARE(e.stream, Stream::Comm);
    QCOMPARE(e.step, 7);
    QCOMPARE(e.layer, 3);
    QCOMPARE(e.microbatch, std::int16_t(2));
    QCOMPARE(e.bytes, std::int64_t(4096));
    QCOMPARE(e.peer, 5);
    QCOMPARE(e.message, 11);
    QVERIFY(before <= e.start_ns);
    QVERIFY(e.start_ns + 2'000'000 <= e.end_ns);
    QVERIFY(e.end_ns <= after);
  }

  // The kernel's word on descheduling: a communication span whose thread shares one core
  // with two spinning threads for 300 ms waits for that core most of the time; a span while
  // the thread sleeps (not runnable) and a compute span are not charged.
  void spanMeasuresTimeWaitingForACore() {
    if (loom::trace::thread_run_delay_ns() < 0) QSKIP("no /proc/thread-self/schedstat here");
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    std::atomic<bool> stop{false};
    auto spin = [&] {
      sched_setaffinity(0, sizeof one, &one);
      while (!stop.load()) {
      }
    };
    cpu_set_t old;
    sched_getaffinity(0, sizeof old, &old);
    sched_setaffinity(0, sizeof one, &one);
    Recorder rec;
    { Span sleeping(&rec, EventKind::Wait, Stream::Compute, 0); std::this_thread::sleep_for(std::chrono::milliseconds(50)); }
    std::thread a(spin), b(spin);
    auto spin_for_ms = [](int ms) {
      const std::int64_t until = loom::trace::now_ns() + std::int64_t(ms) * 1'000'000;
      while (loom::trace::now_ns() < until) {
      }
    };
    {
      Span busy(&rec, EventKind::AllReduce, Stream::Comm, 1);
      busy.event().message = 7;
      busy.also_record_as(EventKind::Idle, Stream::Compute);
      spin_for_ms(300);
    }
    { Span compute(&rec, EventKind::Forward, Stream::Compute, 2); std::this_thread::sleep_for(std::chrono::milliseconds(20)); }
    {
      Span post(&rec, EventKind::Send, Stream::Host, 3, -1, 0, 64, loom::trace::Descheduling::NotMeasured);
      spin_for_ms(100);
    }
    stop = true;
    a.join();
    b.join();
    sched_setaffinity(0, sizeof old, &old);
    std::vector<Event> out;
    QCOMPARE(rec.drain(out), std::size_t(5));
    QVERIFY2(out[0].descheduled_us < 10'000, qPrintable(QString::number(out[0].descheduled_us)));
    // Three threads on one core: this one waits about two thirds of the time.
    QVERIFY2(out[1].descheduled_us > 100'000, qPrintable(QString::number(out[1].descheduled_us)));
    // The twin covers exactly the same interval, with the same descheduled time.
    QCOMPARE(out[2].kind, EventKind::Idle);
    QCOMPARE(out[2].stream, Stream::Compute);
    QCOMPARE(out[2].start_ns, out[1].start_ns);
    QCOMPARE(out[2].end_ns, out[1].end_ns);
    QCOMPARE(out[2].descheduled_us, out[1].descheduled_us);
    QCOMPARE(out[2].message, -1);  // arrows pair the receive, not its idle twin
    QCOMPARE(out[3].descheduled_us, 0);  // compute spans do not measure it
    QCOMPARE(out[4].kind, EventKind::Send);
    QCOMPARE(out[4].descheduled_us, 0);  // asked not to measure, though it waited for a core
  }

  // A chain of layer spans: each span ends where the next begins (one clock read per
  // boundary), close() ends the open one, and nothing is recorded for a null recorder.
  void chainedSpansShareBoundaries() {
    Recorder rec;
    const std::int64_t before = loom::trace::now_ns();
    {
      loom::trace::SpanChain chain(&rec);
      for (int layer = 0; layer < 3; ++layer) {
        chain.next(EventKind::Forward, Stream::Compute, 5, layer, 2);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      chain.close();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // outside every span
      chain.next(EventKind::Backward, Stream::Compute, 5, 2, 2);
    }  // the destructor ends the last span
    std::vector<Event> out;
    QCOMPARE(rec.drain(out), std::size_t(4));
    for (int i = 0; i < 3; ++i) {
      QCOMPARE(out[std::size_t(i)].kind, EventKind::Forward);
      QCOMPARE(out[std::size_t(i)].layer, i);
      QCOMPARE(out[std::size_t(i)].microbatch, std::int16_t(2));
      QVERIFY(out[std::size_t(i)].end_ns - out[std::size_t(i)].start_ns >= 2'000'000);
    }
    QVERIFY(before <= out[0].start_ns);
    QCOMPARE(out[1].start_ns, out[0].end_ns);
    QCOMPARE(out[2].start_ns, out[1].end_ns);
    QVERIFY(out[3].start_ns - out[2].end_ns >= 5'000'000);  // close() left the gap untraced
    QCOMPARE(out[3].kind, EventKind::Backward);
    QVERIFY(out[3].end_ns >= out[3].start_ns);
    loom::trace::SpanChain none(nullptr);
    none.next(EventKind::Forward, Stream::Compute, 0);
  }
};

QTEST_GUILESS_MAIN(TestRecorder)
#include "test_recorder.moc"
