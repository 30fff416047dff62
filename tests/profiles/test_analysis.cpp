// Analysis tests: hand-built events whose overlaps are known give exact per-category
// seconds (nested spans counted once, containers and off-stream spans excluded), and the
// summary JSON carries every key the CLI and GUI read.
#include <QtTest>

#include <cmath>

#include "loom/profiles/analysis.h"

using loom::analysis::RankBreakdown;
using loom::store::RunStore;
using loom::trace::Event;
using loom::trace::EventKind;
using loom::trace::Stream;

namespace {
constexpr std::int64_t kMs = 1'000'000;

Event span(EventKind kind, Stream stream, std::int64_t start_ms, std::int64_t end_ms, int step = 0, int layer = -1) {
  Event e;
  e.kind = kind;
  e.stream = stream;
  e.start_ns = start_ms * kMs;
  e.end_ns = end_ms * kMs;
  e.step = step;
  e.layer = layer;
  return e;
}

// Rank 0, one 100 ms step:
//   data [0,10)  forward [10,40) with layers [10,20) [20,40)  loss [40,45)  backward [45,75)
//   allreduce [60,85) on comm (overlaps backward)  wait [85,90)  optimizer [90,95)
//   a Forward on the comm stream [95,98) (not compute)  step container [0,100)
// compute = [10,75) = 65 ms; comm = 25; optimizer = 5; data = 10;
// busy union = [0,85) + [90,95) = 90 ms, so idle = 100 - 90 = 10 ms.
std::vector<Event> rank0_events() {
  return {
      span(EventKind::Step, Stream::Host, 0, 100),
      span(EventKind::DataLoad, Stream::Host, 0, 10),
      span(EventKind::Forward, Stream::Compute, 10, 40),
      span(EventKind::Forward, Stream::Compute, 10, 20, 0, 0),
      span(EventKind::Forward, Stream::Compute, 20, 40, 0, 1),
      span(EventKind::Loss, Stream::Compute, 40, 45),
      span(EventKind::Backward, Stream::Compute, 45, 75),
      span(EventKind::AllReduce, Stream::Comm, 60, 85),
      span(EventKind::Wait, Stream::Comm, 85, 90),
      span(EventKind::Optimizer, Stream::Compute, 90, 95),
      span(EventKind::Forward, Stream::Comm, 95, 98),
  };
}

// Rank 1: a 50 ms step with 20 ms of forward and nothing else: idle 30 ms.
std::vector<Event> rank1_events() {
  return {span(EventKind::Step, Stream::Host, 0, 50, 1), span(EventKind::Forward, Stream::Compute, 0, 20, 1)};
}

template <class T>
T must(loom::Expected<T> r) {
  if (!r.ok()) qFatal("unexpected error: %s", r.error().describe().c_str());
  return std::move(r).value();
}
}  // namespace

class TestAnalysis : public QObject {
  Q_OBJECT
 private slots:
  void unionOfIntervals() {
    std::vector<std::pair<std::int64_t, std::int64_t>> v = {{5, 10}, {0, 3}, {2, 4}, {10, 12}, {20, 20}, {6, 7}};
    QCOMPARE(loom::analysis::union_length_ns(v), std::int64_t(4 + 7));  // [0,4) + [5,12)
    std::vector<std::pair<std::int64_t, std::int64_t>> none;
    QCOMPARE(loom::analysis::union_length_ns(none), std::int64_t(0));
  }

  void breakdownIsExact() {
    RankBreakdown b = loom::analysis::breakdown_rank(0, rank0_events());
    QCOMPARE(b.compute_s, 0.065);
    QCOMPARE(b.comm_s, 0.025);
    QCOMPARE(b.optimizer_s, 0.005);
    QCOMPARE(b.data_s, 0.010);
    QCOMPARE(b.idle_s, 0.010);
    QCOMPARE(b.events_stored, std::int64_t(11));
  }

  void summaryFromStore() {
    QTemporaryDir dir;
    RunStore store = must(RunStore::open(dir.filePath("runs.db").toStdString()));
    loom::store::RunRecord run;
    run.name = "dp2";
    run.plan_json = R"({"replicas": 2, "model": "mlp"})";
    run.world_size = 2;
    std::int64_t id = must(store.create_run(run));
    auto e0 = rank0_events(), e1 = rank1_events();
    QVERIFY(store.append_events(id, 0, e0.data(), e0.size()).ok());
    QVERIFY(store.append_events(id, 1, e1.data(), e1.size()).ok());
    QVERIFY(store.upsert_rank(id, {0, "h", "cpu", 0, 0, 0, 12}).ok());  // one event dropped
    QVERIFY(store.upsert_rank(id, {1, "h", "cpu", 0, 0, 0, 2}).ok());
    QVERIFY(store.append_metrics(id, {{0, 0, 1, "loss", 2.0},
                                      {0, 1, 2, "loss", 1.5},
                                      {0, 2, 3, "loss", 0.75},
                                      {1, 2, 3, "loss", 0.80},  // same step from rank 1
                                      {0, 2, 4, "test_accuracy", 0.875}})
                .ok());
    QVERIFY(store.finish_run(id, "completed", 2.0, 1000, "").ok());

    auto s = must(loom::analysis::summarize_run(store, id));
    QCOMPARE(s.world_size, 2);
    QCOMPARE(s.steps, std::int64_t(3));
    QCOMPARE(s.wall_s, 2.0);
    QCOMPARE(s.samples_per_s, 500.0);
    QCOMPARE(s.final_loss, 0.80);
    QCOMPARE(s.test_accuracy, 0.875);
    QCOMPARE(s.ranks.size(), std::size_t(2));
    QCOMPARE(s.ranks[0].compute_s, 0.065);
    QCOMPARE(s.ranks[0].idle_s, 0.010);
    QCOMPARE(s.ranks[0].events_recorded, std::int64_t(12));
    QCOMPARE(s.ranks[0].events_stored, std::int64_t(11));
    QCOMPARE(s.ranks[1].compute_s, 0.020);
    QCOMPARE(s.ranks[1].idle_s, 0.030);

    nlohmann::json j = loom::analysis::summary_to_json(s);
    for (const char* key : {"id", "status", "plan", "world_size", "steps", "wall_s", "samples_per_s",
                            "final_loss", "test_accuracy", "ranks"})
      QVERIFY2(j.contains(key), key);
    QCOMPARE(j["id"].get<std::int64_t>(), id);
    QCOMPARE(j["status"].get<std::string>(), std::string("completed"));
    QVERIFY(j["plan"].is_object());
    QCOMPARE(j["plan"]["replicas"].get<int>(), 2);
    QCOMPARE(j["test_accuracy"].get<double>(), 0.875);
    QCOMPARE(j["ranks"].size(), std::size_t(2));
    for (const char* key : {"rank", "compute_s", "comm_s", "optimizer_s", "data_s", "idle_s", "events_recorded",
                            "events_stored"})
      QVERIFY2(j["ranks"][0].contains(key), key);
    QCOMPARE(j["ranks"][0]["comm_s"].get<double>(), 0.025);

    std::string text = loom::analysis::format_summary(s);
    QVERIFY(text.find("dp2") != std::string::npos);
    QVERIFY(text.find("completed") != std::string::npos);
    QVERIFY(text.find("500.0 samples/s") != std::string::npos);
  }

  void unknownValuesAreNull() {
    QTemporaryDir dir;
    RunStore store = must(RunStore::open(dir.filePath("runs.db").toStdString()));
    std::int64_t id = must(store.create_run({}));
    auto e1 = rank1_events();  // steps up to 1, no metrics
    QVERIFY(store.append_events(id, 0, e1.data(), e1.size()).ok());
    auto s = must(loom::analysis::summarize_run(store, id));
    QCOMPARE(s.steps, std::int64_t(2));  // max step + 1 without a loss metric
    QVERIFY(std::isnan(s.final_loss));
    nlohmann::json j = loom::analysis::summary_to_json(s);
    QVERIFY(j["final_loss"].is_null());
    QVERIFY(j["test_accuracy"].is_null());
    QVERIFY(j["plan"].is_null());
    QCOMPARE(j["samples_per_s"].get<double>(), 0.0);
    QCOMPARE(loom::analysis::summarize_run(store, id + 1).error().code, loom::ErrorCode::NotFound);
  }
};

QTEST_GUILESS_MAIN(TestAnalysis)
#include "test_analysis.moc"
