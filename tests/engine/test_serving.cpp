// Serving (engine/serving.h, analysis/serving.h) without MPI: the batching rule, the
// arrival processes, the percentiles, and a server with two clients as threads over the
// in-process communicator, checked request by request against the serving guarantees:
// every request answered once, batches never above B, latency never below its batch's
// compute, and no request waiting longer than T plus one batch's compute. The wait is
// counted without the time the server thread was runnable but had no core (schedstat,
// queue_descheduled_ms): under a loaded `ctest -j2` that was 10 ms once, and no batching
// rule can beat it. kWaitToleranceMs covers the 0.1 ms polling and timer slack.
#include <QtTest>

#include <map>
#include <mutex>
#include <thread>

#include "loom/analysis/serving.h"
#include "loom/comm/threads.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/serving.h"
#include "loom/trace/recorder.h"

using namespace loom;

namespace {

constexpr double kWaitToleranceMs = 2.0;

Plan serving_plan(std::int64_t max_batch, double timeout_ms, double rate, std::int64_t requests) {
  const char* json = R"({"format": "loom-plan/1", "name": "serve-test",
    "model": {"input": [16], "layers": [{"type": "linear", "out": 256}, {"type": "relu"},
                                        {"type": "linear", "out": 3}]},
    "data": {"source": "synthetic", "kind": "blobs", "classes": 3, "features": 16, "train_samples": 60,
             "test_samples": 90},
    "training": {"seed": 5, "threads": 1},
    "serve": {"clients": 2}})";
  PlanResult parsed = parse_plan(json);
  if (!parsed.ok()) qFatal("plan: %s %s", parsed.errors[0].path.c_str(), parsed.errors[0].reason.c_str());
  Plan plan = *parsed.plan;
  plan.serve->max_batch = max_batch;
  plan.serve->timeout_ms = timeout_ms;
  plan.serve->rate = rate;
  plan.serve->requests = requests;
  return plan;
}

// Runs the plan's server and clients as threads; every metric they report.
std::vector<trace::MetricRecord> serve_over_threads(const Plan& plan) {
  std::vector<PlanError> errors;
  const ModelInfo info = infer_model(plan, &errors);
  const data::TrainTest data = data::make_synthetic(plan.data);
  const int world = world_size(plan);
  auto comms = comm::make_thread_group(world);
  std::vector<trace::Recorder> recorders(static_cast<std::size_t>(world));
  std::mutex mutex;
  std::vector<trace::MetricRecord> metrics;
  std::vector<Status> results(static_cast<std::size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      engine::ServeHooks hooks;
      hooks.on_metrics = [&](std::vector<trace::MetricRecord>&& m) {
        std::lock_guard lock(mutex);
        metrics.insert(metrics.end(), m.begin(), m.end());
      };
      comm::Communicator* c = comms[std::size_t(r)].get();
      // As in a rank, where setup is recorded first: a thread's first event allocates its
      // trace buffer (15 ms here), which must not land inside a request's wait.
      trace::record_setup(recorders[std::size_t(r)], trace::SetupPhase::BuildModel, trace::now_ns());
      if (r == 0) {
        engine::InferenceServer server(plan, info, data.test, &recorders[0], c);
        results[0] = server.serve(hooks);
      } else {
        results[std::size_t(r)] = engine::run_client(plan, data.test, &recorders[std::size_t(r)], c, hooks);
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (const Status& s : results) {
    if (!s.ok()) qFatal("rank failed: %s", s.error().describe().c_str());
  }
  return metrics;
}

std::map<std::int64_t, double> by_step(const std::vector<trace::MetricRecord>& metrics, const std::string& name) {
  std::map<std::int64_t, double> out;
  for (const auto& m : metrics) {
    if (m.name != name) continue;
    if (out.count(m.step)) qFatal("%s: step %lld reported twice", name.c_str(), static_cast<long long>(m.step));
    out[m.step] = m.value;
  }
  return out;
}

}  // namespace

class ServingTest : public QObject {
  Q_OBJECT

 private slots:
  void batchStartsWhenFullOrWhenTheOldestTimesOut() {
    ServeSpec s;
    s.max_batch = 4;
    s.timeout_ms = 5;
    QVERIFY(!engine::batch_due(s, 0, 100.0));  // nothing queued: nothing to run
    QVERIFY(!engine::batch_due(s, 3, 4.9));
    QVERIFY(engine::batch_due(s, 4, 0.0));      // full
    QVERIFY(engine::batch_due(s, 1, 5.0));      // timed out
    s.timeout_ms = 0;
    QVERIFY(engine::batch_due(s, 1, 0.0));      // T = 0: no batching at all
  }

  void requestsAreSplitOverClientsAndArriveAtTheRate() {
    ServeSpec s;
    s.clients = 3;
    s.requests = 3001;
    s.rate = 300;
    QCOMPARE(engine::client_request_count(s, 1) + engine::client_request_count(s, 2) +
                 engine::client_request_count(s, 3),
             std::int64_t(3001));
    QCOMPARE(engine::client_request_count(s, 1), std::int64_t(1001));
    s.arrivals = Arrivals::Constant;
    const auto constant = engine::arrival_times_s(s, 2, 7);
    QCOMPARE(constant.size(), std::size_t(1000));
    QCOMPARE(constant[10], 10.0 / 100.0);  // each client sends rate / clients per second
    s.arrivals = Arrivals::Poisson;
    const auto poisson = engine::arrival_times_s(s, 2, 7);
    const double mean_gap = poisson.back() / double(poisson.size() - 1);
    QVERIFY2(std::abs(mean_gap - 0.01) < 0.001, qPrintable(QString::number(mean_gap)));
    QCOMPARE(engine::arrival_times_s(s, 2, 7), poisson);   // reproducible
    QVERIFY(engine::arrival_times_s(s, 3, 7) != poisson);  // clients differ
  }

  void percentilesAreNearestRank() {
    std::vector<double> v;
    for (int i = 100; i >= 1; --i) v.push_back(i);
    const analysis::Percentiles p = analysis::percentiles_of(v);
    QCOMPARE(p.p50, 50.0);
    QCOMPARE(p.p95, 95.0);
    QCOMPARE(p.p99, 99.0);
    QCOMPARE(p.max, 100.0);
    QCOMPARE(p.mean, 50.5);
    QCOMPARE(analysis::percentiles_of({}).p99, 0.0);
  }

  void everyRequestIsServedWithinTheGuarantees() {
    const std::int64_t B = 4, N = 240;
    const double T = 4.0;
    const Plan plan = serving_plan(B, T, 1500, N);
    const auto metrics = serve_over_threads(plan);
    const auto latency = by_step(metrics, "latency_ms");
    const auto wait = by_step(metrics, "queue_wait_ms");
    const auto batch_of = by_step(metrics, "request_batch");
    const auto descheduled = by_step(metrics, "queue_descheduled_ms");
    const auto sizes = by_step(metrics, "batch_size");
    const auto compute = by_step(metrics, "batch_compute_ms");
    QCOMPARE(std::int64_t(latency.size()), N);
    QCOMPARE(std::int64_t(wait.size()), N);
    QCOMPARE(latency.begin()->first, std::int64_t(0));
    QCOMPARE(latency.rbegin()->first, N - 1);  // ids are dense over the clients
    double served = 0, longest_compute = 0;
    for (const auto& [b, size] : sizes) {
      QVERIFY2(size >= 1 && size <= double(B), qPrintable(QString("batch %1 has %2 requests").arg(b).arg(size)));
      served += size;
      longest_compute = std::max(longest_compute, compute.at(b));
    }
    QCOMPARE(served, double(N));
    for (const auto& [id, ms] : latency) {
      const auto b = std::int64_t(batch_of.at(id));
      QVERIFY2(ms >= compute.at(b),
               qPrintable(QString("request %1: latency %2 ms < its batch's compute %3 ms").arg(id).arg(ms).arg(compute.at(b))));
      const double waited = wait.at(id) - descheduled.at(id);
      QVERIFY2(waited <= T + longest_compute + kWaitToleranceMs,
               qPrintable(QString("request %1 waited %2 ms, %3 ms of it descheduled").arg(id).arg(wait.at(id)).arg(descheduled.at(id))));
    }
    const auto stats = analysis::serving_stats(plan, metrics);
    QVERIFY(stats.has_value());
    QCOMPARE(stats->requests, N);
    std::int64_t batches = 0;
    for (std::int64_t count : stats->batch_histogram) batches += count;
    QCOMPARE(batches, std::int64_t(sizes.size()));
    QVERIFY(stats->latency_ms.p50 <= stats->latency_ms.p95 && stats->latency_ms.p95 <= stats->latency_ms.p99);
    QVERIFY(stats->throughput_per_s > 0);
    QVERIFY(stats->busy_fraction > 0 && stats->busy_fraction < 1);
  }

  void timeoutZeroServesOneRequestAtATimeWhenArrivalsAreSparse() {
    // 200 requests/s against a forward pass well under a millisecond: each request finds
    // an idle server and, with T = 0, runs alone; three of these tests at once on two
    // cores left 34 of 40 alone, so the bound is three quarters.
    const Plan plan = serving_plan(8, 0.0, 200, 40);
    const auto stats = analysis::serving_stats(plan, serve_over_threads(plan));
    QVERIFY(stats.has_value());
    QCOMPARE(stats->requests, std::int64_t(40));
    QVERIFY2(stats->batch_histogram[1] >= 30, qPrintable(QString::number(stats->batch_histogram[1])));
  }
};

QTEST_GUILESS_MAIN(ServingTest)
#include "test_serving.moc"
