// Pure chart data, no display: mean-over-ranks curves that do not depend on how records
// are batched or ordered, the per-rank time origin, duplicate and run-level records, the
// staleness histogram and curves, and the non-overlapping breakdown segments.
#include <QtTest>

#include <algorithm>
#include <random>

#include "loom/ui/charts/chart_series.h"

using loom::trace::MetricRecord;
using loom::ui::charts::breakdown_segments;
using loom::ui::charts::MetricAccumulator;
using loom::ui::charts::staleness_histogram;
using loom::ui::charts::staleness_over_time;
using loom::ui::charts::StalenessSample;
using loom::ui::charts::XAxis;

namespace {

MetricRecord rec(int rank, std::int64_t step, std::int64_t t_ns, const char* name, double value) {
  return MetricRecord{rank, step, t_ns, name, value};
}

// 3 ranks x 12 steps of loss and samples_per_s, each rank on its own clock origin.
std::vector<MetricRecord> run_records() {
  std::vector<MetricRecord> out;
  for (int rank = 0; rank < 3; ++rank) {
    const std::int64_t origin = 1'000'000'000LL * (rank * 1000 + 7);
    for (std::int64_t step = 0; step < 12; ++step) {
      const std::int64_t t = origin + step * 100'000'000LL + rank * 1'000'000LL;
      out.push_back(rec(rank, step, t, "loss", 2.0 - 0.1 * double(step) + 0.01 * rank));
      out.push_back(rec(rank, step, t, "samples_per_s", 1000.0 + 10.0 * rank + double(step)));
    }
  }
  return out;
}

}  // namespace

class TestChartSeries : public QObject {
  Q_OBJECT
 private slots:
  void meanOverRanksPerStep();
  void batchesAndOrderGiveSameSeries();
  void timeAxisUsesEachRanksOrigin();
  void lateEarlierRecordMovesOrigin();
  void samplesAxisCountsGlobalBatches();
  void duplicatesAndRunLevelRecords();
  void revisionAndClear();
  void histogramCounts();
  void stalenessPerStep();
  void stalenessPerTimeBucket();
  void stalenessTimeFromServerOrigin();
  void breakdownSegmentsDoNotOverlap();
};

void TestChartSeries::meanOverRanksPerStep() {
  MetricAccumulator acc;
  acc.append({rec(0, 0, 10, "loss", 2.0), rec(1, 0, 10, "loss", 3.0), rec(0, 1, 20, "loss", 1.0),
              rec(1, 1, 20, "loss", 2.0), rec(0, 2, 30, "loss", 0.5), rec(0, 0, 10, "train_accuracy", 0.25)});
  const QVector<QPointF> loss = acc.series("loss", XAxis::Step);
  QCOMPARE(loss.size(), 3);
  QCOMPARE(loss[0], QPointF(0, 2.5));
  QCOMPARE(loss[1], QPointF(1, 1.5));
  QCOMPARE(loss[2], QPointF(2, 0.5));  // only rank 0 reported step 2
  QCOMPARE(acc.series("train_accuracy", XAxis::Step), QVector<QPointF>{QPointF(0, 0.25)});
  QVERIFY(acc.series("test_accuracy", XAxis::Step).isEmpty());
  QCOMPARE(acc.names(), (std::vector<std::string>{"loss", "train_accuracy"}));
}

void TestChartSeries::batchesAndOrderGiveSameSeries() {
  const std::vector<MetricRecord> records = run_records();
  MetricAccumulator whole;
  whole.append(records);

  std::vector<MetricRecord> shuffled = records;
  std::mt19937 rng(42);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  MetricAccumulator pieces;
  std::size_t at = 0, batch = 1;
  while (at < shuffled.size()) {  // batches of 1, 2, 3, ... records
    const std::size_t end = std::min(shuffled.size(), at + batch++);
    pieces.append({shuffled.begin() + std::ptrdiff_t(at), shuffled.begin() + std::ptrdiff_t(end)});
    at = end;
  }
  QCOMPARE(pieces.names(), whole.names());
  for (const char* name : {"loss", "samples_per_s"}) {
    for (XAxis x : {XAxis::Step, XAxis::Time}) {
      QCOMPARE(pieces.series(name, x), whole.series(name, x));
    }
  }
  const QVector<QPointF> loss = whole.series("loss", XAxis::Step);
  QCOMPARE(loss.size(), 12);
  QCOMPARE(loss[4].y(), 2.0 - 0.4 + 0.01);  // mean of +0, +0.01, +0.02
}

void TestChartSeries::timeAxisUsesEachRanksOrigin() {
  MetricAccumulator acc;
  // Rank 0's clock reads ~1 s, rank 1's ~5000 s: only per-rank origins line them up.
  acc.append({rec(0, 0, 1'000'000'000, "loss", 2.0), rec(1, 0, 5'000'000'000'000, "loss", 4.0),
              rec(0, 1, 1'500'000'000, "loss", 1.0), rec(1, 1, 5'000'700'000'000, "loss", 3.0)});
  const QVector<QPointF> t = acc.series("loss", XAxis::Time);
  QCOMPARE(t.size(), 2);
  QCOMPARE(t[0], QPointF(0.0, 3.0));
  QCOMPARE(t[1].x(), 0.6);  // mean of 0.5 s and 0.7 s
  QCOMPARE(t[1].y(), 2.0);

  acc.setOrigin(1, 4'999'000'000'000);  // rank 1 started a second before its first report
  const QVector<QPointF> shifted = acc.series("loss", XAxis::Time);
  QCOMPARE(shifted[0].x(), 0.5);  // (0 + 1) / 2
  QCOMPARE(shifted[1].x(), 1.1);  // (0.5 + 1.7) / 2
}

// Two replicas of batch 64 consume 128 samples a step: step 0 ends at 128, step 9 at 1280.
void TestChartSeries::samplesAxisCountsGlobalBatches() {
  MetricAccumulator acc;
  acc.append({rec(0, 0, 1, "loss", 2.0), rec(1, 0, 1, "loss", 4.0), rec(0, 9, 2, "loss", 1.0)});
  const std::uint64_t before = acc.revision();
  acc.setSamplesPerStep(128);
  QVERIFY(acc.revision() != before);  // a view must redraw against the new axis
  QCOMPARE(acc.series("loss", XAxis::Samples), (QVector<QPointF>{QPointF(128, 3.0), QPointF(1280, 1.0)}));
}

void TestChartSeries::lateEarlierRecordMovesOrigin() {
  MetricAccumulator acc;
  acc.append({rec(0, 1, 3'000'000'000, "loss", 1.0)});
  QCOMPARE(acc.series("loss", XAxis::Time), QVector<QPointF>{QPointF(0.0, 1.0)});
  acc.append({rec(0, 0, 2'000'000'000, "loss", 2.0)});  // step 0 arrives after step 1
  QCOMPARE(acc.series("loss", XAxis::Time), (QVector<QPointF>{QPointF(0.0, 2.0), QPointF(1.0, 1.0)}));
}

void TestChartSeries::duplicatesAndRunLevelRecords() {
  MetricAccumulator acc;
  acc.append({rec(0, 5, 200, "samples_per_s", 900.0), rec(0, 5, 100, "samples_per_s", 800.0),
              rec(0, -1, 50, "p2p_gbs", 12.0), rec(0, -1, 50, "total_steps", 6.0)});
  // The later report of the same rank and step replaces the earlier one, in any arrival order.
  QCOMPARE(acc.series("samples_per_s", XAxis::Step), QVector<QPointF>{QPointF(5, 900.0)});
  acc.append({rec(0, 5, 300, "samples_per_s", 950.0)});
  QCOMPARE(acc.series("samples_per_s", XAxis::Step), QVector<QPointF>{QPointF(5, 950.0)});
  // Step -1 holds run-level figures: no curve, and its t_ns (50) does not become rank 0's
  // origin; the replaced report at 100 ns still counts as the rank's first.
  QCOMPARE(acc.names(), std::vector<std::string>{"samples_per_s"});
  QCOMPARE(acc.series("samples_per_s", XAxis::Time), QVector<QPointF>{QPointF(2e-7, 950.0)});
}

void TestChartSeries::revisionAndClear() {
  MetricAccumulator acc;
  const std::uint64_t r0 = acc.revision();
  acc.append({});
  QCOMPARE(acc.revision(), r0);  // nothing new: a view must not redraw
  acc.append({rec(0, -1, 1, "total_steps", 10)});
  QCOMPARE(acc.revision(), r0);
  acc.append({rec(0, 0, 1, "loss", 1.0)});
  QVERIFY(acc.revision() > r0);
  const std::uint64_t r1 = acc.revision();
  acc.clear();
  QVERIFY(acc.revision() > r1);
  QVERIFY(acc.names().empty());
  QVERIFY(acc.series("loss", XAxis::Step).isEmpty());
}

void TestChartSeries::histogramCounts() {
  const std::vector<StalenessSample> samples = {{0, 0, 0, 10}, {0, 1, 1, 20}, {0, 2, 1, 30}, {0, 3, 3, 40},
                                                {1, 0, 2, 15}, {1, 1, -1, 25}, {1, 2, 0, 35}};
  QCOMPARE(staleness_histogram(samples, 0).bins, (std::vector<int>{1, 2, 0, 1}));
  QCOMPARE(staleness_histogram(samples, 1).bins, (std::vector<int>{1, 0, 1}));  // -1 skipped
  QCOMPARE(staleness_histogram(samples, -1).bins, (std::vector<int>{2, 2, 1, 1}));
  QCOMPARE(staleness_histogram(samples, -1).total(), 6);
  QVERIFY(staleness_histogram(samples, 7).bins.empty());
  QCOMPARE(loom::ui::charts::staleness_workers(samples), (std::vector<int>{0, 1}));
}

void TestChartSeries::stalenessPerStep() {
  const std::vector<StalenessSample> samples = {{1, 2, 4, 0}, {0, 0, 0, 0}, {0, 2, 2, 0}, {1, 0, 1, 0}, {0, 1, 3, 0}};
  QCOMPARE(staleness_over_time(samples, 0, XAxis::Step),
           (QVector<QPointF>{QPointF(0, 0), QPointF(1, 3), QPointF(2, 2)}));
  QCOMPARE(staleness_over_time(samples, -1, XAxis::Step),
           (QVector<QPointF>{QPointF(0, 0.5), QPointF(1, 3), QPointF(2, 3)}));
  QVERIFY(staleness_over_time(samples, 5, XAxis::Step).isEmpty());
}

void TestChartSeries::stalenessPerTimeBucket() {
  // Worker 0's gradients go to server 0, whose clock starts at 1 s, worker 1's to server 1,
  // whose clock starts at 100 s; 4 s span -> 200 buckets of 20 ms.
  const std::vector<StalenessSample> samples = {{0, 0, 1, 1'000'000'000, 0}, {0, 1, 3, 3'000'000'000, 0},
                                                {0, 2, 5, 5'000'000'000, 0}, {1, 0, 2, 100'000'000'000, 1},
                                                {1, 1, 4, 102'000'000'000, 1}};
  QCOMPARE(staleness_over_time(samples, 0, XAxis::Time),
           (QVector<QPointF>{QPointF(0, 1), QPointF(2, 3), QPointF(4, 5)}));
  // All workers: worker 1's samples fall in the same buckets as worker 0's at 0 s and 2 s.
  QCOMPARE(staleness_over_time(samples, -1, XAxis::Time),
           (QVector<QPointF>{QPointF(0, 1.5), QPointF(2, 3.5), QPointF(4, 5)}));
}

// On one server's clock the origin is its first update, whichever worker pushed it: a
// worker whose first gradient lands 2 s later starts at x = 2.
void TestChartSeries::stalenessTimeFromServerOrigin() {
  const std::vector<loom::trace::UpdateRecord> updates = {
      {0, 0, 0, 0, 0, 0, 10'000'000'000}, {1, 0, 0, 0, 1, 1, 12'000'000'000}, {0, 0, 1, 1, 2, 1, 13'000'000'000}};
  const std::vector<StalenessSample> samples = loom::ui::charts::staleness_samples(updates);
  QCOMPARE(samples.size(), std::size_t(3));
  QCOMPARE(samples[1].worker, 1);
  QCOMPARE(samples[1].staleness, 1);
  QCOMPARE(staleness_over_time(samples, 1, XAxis::Time), (QVector<QPointF>{QPointF(2, 1)}));
  QCOMPARE(staleness_over_time(samples, 0, XAxis::Time), (QVector<QPointF>{QPointF(0, 0), QPointF(3, 1)}));
}

void TestChartSeries::breakdownSegmentsDoNotOverlap() {
  loom::analysis::RankBreakdown r;
  r.compute_s = 6.0;
  r.comm_s = 3.0;
  r.exposed_comm_s = 1.0;
  r.optimizer_s = 0.5;
  r.data_s = 0.25;
  r.idle_s = 0.75;
  const auto s = breakdown_segments(r);
  QCOMPARE(s.exposed_comm, 1.0);
  QCOMPARE(s.hidden_comm, 2.0);
  QCOMPARE(s.stacked(), 8.5);  // 6 + 0.5 + 0.25 + 1 + 0.75: comm counted once
  r.exposed_comm_s = 3.5;       // rounding made exposed exceed the whole
  QCOMPARE(breakdown_segments(r).exposed_comm, 3.0);
  QCOMPARE(breakdown_segments(r).hidden_comm, 0.0);
}

QTEST_GUILESS_MAIN(TestChartSeries)
#include "test_chart_series.moc"
