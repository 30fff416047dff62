// Serving predicted by the event simulation on hand-set costs, with constant arrivals so
// that every latency is worked out by hand: requests that meet nobody within the timeout
// go alone; a burst fills the batch before the timeout.
#include <QtTest>

#include <cmath>

#include "loom/predict/serving_prediction.h"
#include "predict_fixtures.h"

namespace {

// The tiny model served by one client at `rate` requests/s, constant arrivals.
Plan serving_plan(double rate, std::int64_t max_batch, double timeout_ms, std::int64_t requests) {
  Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}");
  plan.parallel.devices.assign(2, loom::DeviceSpec{});  // the server and its client
  loom::ServeSpec serve;
  serve.clients = 1;
  serve.rate = rate;
  serve.max_batch = max_batch;
  serve.timeout_ms = timeout_ms;
  serve.requests = requests;
  serve.arrivals = loom::Arrivals::Constant;
  plan.serve = serve;
  return plan;
}

// A batch of b takes 0.5 + 0.25 b ms; a request's overhead is 0.5 ms at every percentile.
Calibration serving_costs(const Plan& plan) {
  const std::string device = "cpu 1t";  // 2 ranks, 1 thread each, on 2 cores
  Calibration c;
  c.costs[loom::predict::serve_batch_key(plan, device)].points = {{1, 0.75}, {8, 2.5}};
  c.costs[loom::predict::serve_overhead_key(device)].points = {{1, 0.5}, {99, 0.5}};
  return c;
}

bool near(double a, double b) { return std::abs(a - b) < 1e-9; }

}  // namespace

class TestPredictServing : public QObject {
  Q_OBJECT

 private slots:
  // Every 10 ms a request, timeout 2 ms: each waits out the timeout alone, then a 0.75 ms
  // batch of one and 0.5 ms overhead: 3.25 ms each; the server busy 0.75 ms in 10.
  void loneRequestsWaitTheTimeout() {
    const Plan plan = serving_plan(100, 8, 2.0, 50);
    const auto p = must(loom::predict::predict_serving(plan, serving_costs(plan), {2}));
    QCOMPARE(p.requests, std::int64_t(50));
    QCOMPARE(p.batches, std::int64_t(50));
    QVERIFY(near(p.latency_ms.p50, 3.25) && near(p.latency_ms.p99, 3.25));
    QVERIFY(near(p.queue_wait_ms.p50, 2.0));
    // 50 batches of 0.75 ms from the first arrival (0) to the last batch's end (490 + 2.75).
    QVERIFY(near(p.busy_fraction, 50 * 0.75 / (490 + 2.75)));
  }

  // Every 1 ms, B 4, timeout 10: a batch starts when its 4th request arrives, 3 ms after
  // its 1st; the batch takes 1.5 ms. Latencies 3, 2, 1, 0 ms of wait + 1.5 + 0.5: the
  // median of {5, 4, 3, 2} repeated is 3 (nearest rank), the largest 5.
  void aBurstFillsTheBatch() {
    const Plan plan = serving_plan(1000, 4, 10.0, 40);
    const auto p = must(loom::predict::predict_serving(plan, serving_costs(plan), {2}));
    QCOMPARE(p.batches, std::int64_t(10));
    QVERIFY(near(p.mean_batch, 4.0));
    QVERIFY(near(p.latency_ms.max, 5.0));
    QVERIFY(near(p.latency_ms.p50, 3.0));
    QVERIFY(near(p.batch_compute_ms, 1.5));
  }

  // Without serving runs or forward costs, the missing forward is named.
  void missingCostsAreNamed() {
    const Plan plan = serving_plan(100, 8, 2.0, 10);
    auto p = loom::predict::predict_serving(plan, Calibration{}, {2});
    QVERIFY(!p.ok());
    QVERIFY2(p.error().message.find("forward linear") != std::string::npos, p.error().message.c_str());
  }
};

QTEST_GUILESS_MAIN(TestPredictServing)
#include "test_predict_serving.moc"
