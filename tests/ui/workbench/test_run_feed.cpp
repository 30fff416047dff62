// RunFeed against a real SQLite run store: a stored run is delivered whole (in pages, each
// event once, grouped by rank, with its ranks, metrics, parameter-server updates and
// breakdown) and then ends; a
// pipelined run's batches carry its stages' bubbles from the run's own plan; a run
// being written (events and updates) is followed as it grows and ends when the writer marks it ended; a second
// follow() drops the first run's batches; an unknown run is reported, not hung on.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <map>
#include <thread>

#include "loom/core/plan.h"
#include "loom/store/run_store.h"
#include "loom/test/events.h"
#include "loom/test/expect.h"
#include "loom/ui/workbench/run_feed.h"

using loom::store::RunStore;
using loom::trace::Event;
using loom::ui::FeedBatch;
using loom::ui::RunFeed;
using BatchPtr = std::shared_ptr<const FeedBatch>;
using loom::testing::must;
using loom::testing::must_ok;

namespace {

// Forward spans of 1 µs, numbered through `message` so each one can be recognised.
std::vector<Event> numbered_events(int first, int count) {
  std::vector<Event> v(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    Event& e = v[static_cast<std::size_t>(i)];
    e.start_ns = 1'000'000 + std::int64_t(first + i) * 2000;
    e.end_ns = e.start_ns + 1000;
    e.message = first + i;
    e.step = (first + i) / 100;
  }
  return v;
}

struct Collected {
  std::vector<BatchPtr> batches;
  std::map<int, std::vector<int>> messages_by_rank;
  std::size_t metrics = 0;
  std::vector<loom::trace::UpdateRecord> updates;  // in delivery order
  bool finished = false;
};

Collected collect_until_finished(RunFeed& feed, int timeout_ms) {
  Collected c;
  QObject context;
  QObject::connect(&feed, &RunFeed::batchReady, &context, [&c](BatchPtr b) {
    c.batches.push_back(b);
    for (const auto& r : b->events)
      for (const Event& e : r.events) c.messages_by_rank[r.rank].push_back(e.message);
    c.metrics += b->metrics.size();
    c.updates.insert(c.updates.end(), b->updates.begin(), b->updates.end());
    c.finished = c.finished || b->finished;
  });
  static_cast<void>(QTest::qWaitFor([&c] { return c.finished; }, timeout_ms));
  return c;  // callers check c.finished
}

// Updates of one worker numbered through `step`, applied by server 0.
std::vector<loom::trace::UpdateRecord> numbered_updates(int worker, int first, int count) {
  std::vector<loom::trace::UpdateRecord> v;
  for (int i = 0; i < count; ++i) {
    const std::int64_t step = first + i;
    v.push_back({worker, 0, step, step, step + worker, worker, 1'000'000 * step});
  }
  return v;
}

std::vector<std::int64_t> steps_of(const std::vector<loom::trace::UpdateRecord>& updates, int worker) {
  std::vector<std::int64_t> out;
  for (const auto& u : updates)
    if (u.worker == worker) out.push_back(u.step);
  return out;
}

std::vector<int> iota_vec(int first, int count) {
  std::vector<int> v(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = first + i;
  return v;
}

}  // namespace

class TestRunFeed : public QObject {
  Q_OBJECT

 private slots:
  void init() {
    path_ = dir_.filePath(QString("runs-%1-%2.db").arg(QTest::currentTestFunction()).arg(++files_));
  }

  // Finished runs are read from their packed blocks; one stored before packing existed
  // (its blocks removed here) from its rows. Either way every event arrives once.
  void storedRunIsDeliveredWholeThenEnds_data() {
    QTest::addColumn<bool>("packed");
    QTest::newRow("packed blocks") << true;
    QTest::newRow("rows only") << false;
  }

  void storedRunIsDeliveredWholeThenEnds() {
    QFETCH(bool, packed);
    RunStore store = must(RunStore::open(path_.toStdString()));
    loom::trace::RunRecord record = loom::store::new_run_record(loom::default_plan(), "test");
    const std::int64_t id = must(store.create_run(record));
    must_ok(store.upsert_rank(id, {0, "here", "cpu"}));
    must_ok(store.upsert_rank(id, {1, "here", "cpu"}));
    auto rank0 = numbered_events(0, 400'000);  // more than one page
    auto rank1 = numbered_events(0, 1000);
    must_ok(store.append_events(id, 0, rank0.data(), rank0.size()));
    must_ok(store.append_events(id, 1, rank1.data(), rank1.size()));
    must_ok(store.append_metrics(id, {{0, 0, 5, "loss", 2.0}, {1, 0, 6, "loss", 2.2}, {0, 1, 7, "loss", 1.8}}));
    must_ok(store.append_updates(id, {{1, 0, 0, 0, 0, 0, 100}, {1, 1, 1, 0, 2, 2, 200}, {0, 0, 0, 1, 4, 3, 300}}));
    must_ok(store.append_log(id, "launch: mpirun -n 2\n"));
    must_ok(store.finish_run(id, loom::trace::RunStatus::Completed, 1.0, 64, ""));
    QVERIFY(must(store.load_packed_run(id)).has_value());
    if (!packed) must_ok(must(loom::store::Database::open(path_.toStdString())).exec("DELETE FROM event_blocks"));
    QCOMPARE(must(store.load_packed_run(id)).has_value(), packed);

    RunFeed feed;
    feed.follow(path_, id);
    Collected c = collect_until_finished(feed, 20000);
    QVERIFY(c.finished);
    QVERIFY(c.batches.size() >= 2);  // paged
    QString log;
    for (const auto& b : c.batches) log += b->log;
    QCOMPARE(log, QString("launch: mpirun -n 2\n"));  // delivered once
    QVERIFY(c.batches.front()->first);
    QVERIFY(c.batches.front()->plan_json.contains("loom-plan/1"));
    QVERIFY(c.messages_by_rank[0] == iota_vec(0, 400'000));
    QVERIFY(c.messages_by_rank[1] == iota_vec(0, 1000));
    QCOMPARE(c.metrics, std::size_t(3));
    QCOMPARE(c.updates.size(), std::size_t(3));  // each once, in stored order, every field
    QCOMPARE(c.updates[1].worker, 1);
    QCOMPARE(c.updates[1].server, 1);
    QCOMPARE(c.updates[1].step, std::int64_t(1));
    QCOMPARE(c.updates[1].version_applied, std::int64_t(2));
    QCOMPARE(c.updates[2].version_read, std::int64_t(1));
    QCOMPARE(c.updates[2].staleness, std::int64_t(3));
    QCOMPARE(c.updates[2].t_ns, std::int64_t(300));
    QCOMPARE(c.batches.back()->status, loom::trace::RunStatus::Completed);
    QCOMPARE(c.batches.back()->total_events, std::int64_t(401'000));
    int rank_updates = 0;
    std::vector<loom::analysis::RankBreakdown> breakdown;
    for (const auto& b : c.batches) {
      if (b->ranks_changed) {
        ++rank_updates;
        QCOMPARE(b->ranks.size(), std::size_t(2));
      }
      if (b->breakdown_changed) breakdown = b->breakdown;
    }
    QCOMPARE(rank_updates, 1);
    QCOMPARE(breakdown.size(), std::size_t(2));
    QCOMPARE(breakdown[1].rank, 1);
    QVERIFY(qAbs(breakdown[1].compute_s - 1000 * 1e-6) < 1e-9);  // 1000 spans of 1 µs
  }

  // Stage 0 (rank 0) works 40 of its 100 ms step, stage 1 (rank 1) 50: GPipe bubbles of
  // 60 % and 50 % of wall time, against (2-1)/(4+2-1) = 20 % in theory.
  void pipelineStagesComeWithTheBreakdown() {
    loom::Plan plan = loom::default_plan();
    plan.parallel.devices.assign(2, loom::DeviceSpec{});
    plan.parallel.stages = 2;
    plan.parallel.microbatches = 4;
    for (std::size_t i = 3; i < plan.model.layers.size(); ++i) plan.model.layers[i].stage = 1;
    QVERIFY(loom::validate_plan(plan).empty());
    RunStore store = must(RunStore::open(path_.toStdString()));
    const std::int64_t id = must(store.create_run(loom::store::new_run_record(plan, "pipe")));
    auto span = [](loom::trace::EventKind kind, std::int64_t start_ms, std::int64_t end_ms) {
      const auto stream = kind == loom::trace::EventKind::Step ? loom::trace::Stream::Host : loom::trace::Stream::Compute;
      return loom::testing::span_ms(kind, stream, start_ms, end_ms);
    };
    using loom::trace::EventKind;
    std::vector<Event> rank0 = {span(EventKind::Step, 0, 100), span(EventKind::Forward, 0, 40)};
    std::vector<Event> rank1 = {span(EventKind::Step, 0, 100), span(EventKind::Backward, 50, 100)};
    must_ok(store.append_events(id, 0, rank0.data(), rank0.size()));
    must_ok(store.append_events(id, 1, rank1.data(), rank1.size()));
    must_ok(store.append_metrics(id, {{0, 0, 1, "max_in_flight", 4.0}, {1, 0, 1, "peak_activation_bytes", 512.0}}));
    must_ok(store.finish_run(id, loom::trace::RunStatus::Completed, 1.0, 64, ""));

    RunFeed feed;
    feed.follow(path_, id);
    Collected c = collect_until_finished(feed, 20000);
    QVERIFY(c.finished);
    std::optional<loom::analysis::PipelineStats> pipeline;
    for (const auto& b : c.batches)
      if (b->breakdown_changed) pipeline = b->pipeline;
    QVERIFY(pipeline.has_value());
    QCOMPARE(pipeline->stages_stats.size(), std::size_t(2));
    QCOMPARE(pipeline->stages_stats[0].bubble_fraction, 0.6);
    QCOMPARE(pipeline->stages_stats[1].bubble_fraction, 0.5);
    QCOMPARE(pipeline->stages_stats[1].bubble_textbook, 0.2);
    QCOMPARE(pipeline->stages_stats[0].max_in_flight, std::int64_t(4));
    QCOMPARE(pipeline->stages_stats[1].peak_activation_bytes, std::int64_t(512));
  }

  void liveRunIsFollowedAsItGrows() {
    RunStore store = must(RunStore::open(path_.toStdString()));
    const std::int64_t id = must(store.create_run(loom::store::new_run_record(loom::default_plan(), "test")));
    RunFeed feed;
    feed.setPollIntervalMs(10);
    // The writer waits (up to 1.5 s) for each part to be delivered before it writes the
    // next, rather than sleeping a fixed 40 ms: on a loaded machine the feed's thread may
    // not run within 40 ms, and the parts then arrived together (a failure seen in a
    // fresh clone at load ~10). A feed that delivered only at the end still fails: the
    // writer then times out at every part and the run arrives in one batch.
    std::atomic<std::size_t> delivered{0};
    QObject counter;
    QObject::connect(&feed, &RunFeed::batchReady, &counter, [&delivered](BatchPtr b) {
      for (const auto& r : b->events) delivered += r.events.size();
    });
    feed.follow(path_, id);
    std::thread writer([this, id, &delivered] {
      RunStore w = must(RunStore::open(path_.toStdString()));
      for (int b = 0; b < 10; ++b) {
        auto events = numbered_events(b * 500, 500);
        must_ok(w.append_events(id, b % 2, events.data(), events.size()));
        must_ok(w.append_updates(id, numbered_updates(b % 2, b * 5, 5)));
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
        while (delivered < std::size_t(b + 1) * 500 && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      must_ok(w.finish_run(id, loom::trace::RunStatus::Stopped, 0.5, 0, ""));
    });
    Collected c = collect_until_finished(feed, 20000);
    QVERIFY(c.finished);
    writer.join();
    int with_events = 0;
    for (const auto& b : c.batches) with_events += b->events.empty() ? 0 : 1;
    QVERIFY2(with_events >= 3, "events should arrive while the run is written, not all at the end");
    int with_updates = 0;
    for (const auto& b : c.batches) with_updates += b->updates.empty() ? 0 : 1;
    QVERIFY2(with_updates >= 3, "updates should arrive while the run is written, not all at the end");
    std::vector<int> even, odd;
    for (int b = 0; b < 10; ++b) {
      auto part = iota_vec(b * 500, 500);
      (b % 2 ? odd : even).insert((b % 2 ? odd : even).end(), part.begin(), part.end());
    }
    QVERIFY(c.messages_by_rank[0] == even);
    QVERIFY(c.messages_by_rank[1] == odd);
    QCOMPARE(c.updates.size(), std::size_t(50));
    const std::vector<std::int64_t> worker1 = {5, 6, 7, 8, 9, 15, 16, 17, 18, 19, 25, 26, 27, 28, 29,
                                               35, 36, 37, 38, 39, 45, 46, 47, 48, 49};
    QVERIFY(steps_of(c.updates, 1) == worker1);
    QCOMPARE(steps_of(c.updates, 0).size(), std::size_t(25));
    QCOMPARE(c.batches.back()->status, loom::trace::RunStatus::Stopped);
  }

  void secondFollowDropsTheFirstRun() {
    RunStore store = must(RunStore::open(path_.toStdString()));
    const std::int64_t a = must(store.create_run({}));
    const std::int64_t b = must(store.create_run({}));
    auto events = numbered_events(0, 300'000);
    must_ok(store.append_events(a, 0, events.data(), events.size()));
    must_ok(store.append_events(b, 0, events.data(), 10));
    must_ok(store.finish_run(a, loom::trace::RunStatus::Completed, 1, 0, ""));
    must_ok(store.finish_run(b, loom::trace::RunStatus::Completed, 1, 0, ""));
    RunFeed feed;
    feed.follow(path_, a);
    feed.follow(path_, b);  // before any batch of a could be handled
    Collected c = collect_until_finished(feed, 20000);
    QVERIFY(c.finished);
    for (const auto& batch : c.batches) QCOMPARE(batch->run_id, b);
    QCOMPARE(c.messages_by_rank[0].size(), std::size_t(10));
  }

  void unknownRunIsReported() {
    must(RunStore::open(path_.toStdString()));
    RunFeed feed;
    QSignalSpy failed(&feed, &RunFeed::failed);
    feed.follow(path_, 4242);
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 5000);
    QVERIFY2(failed.at(0).at(0).toString().contains("4242"), qPrintable(failed.at(0).at(0).toString()));
  }

 private:
  QTemporaryDir dir_;
  QString path_;
  int files_ = 0;  // a data-driven test gets a new file per row
};

QTEST_GUILESS_MAIN(TestRunFeed)
#include "test_run_feed.moc"
