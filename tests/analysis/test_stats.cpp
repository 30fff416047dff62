// The shared statistics (analysis/stats.h) that staleness, serving, the comparison and
// the predictor all use: nearest-rank percentiles on the boundaries where a float
// formula would round the wrong way, medians of odd, even and empty inputs, and means
// summed in order.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <vector>

#include "loom/analysis/stats.h"

using namespace loom::analysis;

class TestStats : public QObject {
  Q_OBJECT
 private slots:
  // The ceil(p*n/100)-th smallest: p95 of 20 values is the 19th (0.95*20 is exactly 19),
  // of 21 the 20th (19.95 rounds up), p50 of an even count the lower middle.
  void nearestRankTakesTheCeilingRank() {
    std::vector<std::int64_t> one_to_20;
    for (int v = 1; v <= 20; ++v) one_to_20.push_back(v);
    QCOMPARE(nearest_rank(one_to_20, 95), std::int64_t(19));
    QCOMPARE(nearest_rank(one_to_20, 50), std::int64_t(10));
    QCOMPARE(nearest_rank(one_to_20, 100), std::int64_t(20));
    QCOMPARE(nearest_rank(one_to_20, 0), std::int64_t(1));  // rank 0 is the smallest
    one_to_20.push_back(21);
    QCOMPARE(nearest_rank(one_to_20, 95), std::int64_t(20));
    QCOMPARE(nearest_rank(one_to_20, 10), std::int64_t(3));  // 2.1 rounds up, never to the nearest
    QCOMPARE(nearest_rank(std::vector<double>{7.5}, 99), 7.5);
  }

  void percentileSortsAndSaysWhenEmpty() {
    QCOMPARE(percentile({5, 1, 4, 2, 3}, 95), 5.0);
    QCOMPARE(percentile({5, 1, 4, 2, 3}, 40), 2.0);
    QVERIFY(std::isnan(percentile({}, 50)));
    QCOMPARE(percentile({}, 50, -1.0), -1.0);
  }

  // Odd: the middle; even: the mean of the middle two; empty: what the caller asks.
  void medianOfOddEvenAndEmpty() {
    QCOMPARE(median({9, 1, 5}), 5.0);
    QCOMPARE(median({4, 1, 3, 2}), 2.5);
    QCOMPARE(median({10, 0}), 5.0);
    QVERIFY(std::isnan(median({})));
    QCOMPARE(median({}, 0.0), 0.0);
  }

  void meanAndPercentiles() {
    QCOMPARE(mean(std::vector<std::int64_t>{1, 2, 6}), 3.0);
    QVERIFY(std::isnan(mean(std::vector<double>{})));
    std::vector<double> v;
    for (int i = 100; i >= 1; --i) v.push_back(i);
    const Percentiles p = percentiles_of(v);
    QCOMPARE(p.p50, 50.0);
    QCOMPARE(p.p95, 95.0);
    QCOMPARE(p.p99, 99.0);
    QCOMPARE(p.max, 100.0);
    QCOMPARE(p.mean, 50.5);
    QCOMPARE(percentiles_of({}).p99, 0.0);
  }
};

QTEST_GUILESS_MAIN(TestStats)
#include "test_stats.moc"
