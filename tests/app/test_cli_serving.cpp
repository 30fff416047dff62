// The serving mode as a user runs it: `loom-cli run` on the serving example plan starts a
// real mpirun job (one inference server, two clients), and the stored run keeps what the
// serving guarantees are checked against, request by request:
// - every request is answered once, and batches never hold more than max_batch (B);
// - a request's latency (client clock) is never below its batch's compute time (server
//   clock; one host, one steady clock);
// - no request waits in the queue longer than T plus one batch's compute, counting the
//   wait without the time the server was runnable but had no core (queue_descheduled_ms:
//   three ranks share two cores here), with a tolerance of kWaitToleranceMs for the
//   server's 0.1 ms polling and timer slack.
// `show --json`'s serving section must agree with the same metrics.
#include <QJsonArray>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <map>

#include "cli_runner.h"
#include "loom/store/run_store.h"

namespace {

using loom::test::last_json_line;
using loom::test::read_json_file;
using loom::test::Result;
using loom::test::run_cli;

constexpr double kWaitToleranceMs = 2.0;

std::map<std::int64_t, double> by_step(const std::vector<loom::trace::MetricRecord>& metrics, const std::string& name) {
  std::map<std::int64_t, double> out;
  for (const auto& m : metrics)
    if (m.name == name) out[m.step] = m.value;
  return out;
}

}  // namespace

class CliServingTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private slots:
  void servedRequestsKeepTheGuarantees() {
    QJsonObject plan = read_json_file(LOOM_SOURCE_DIR "/resources/plans/serve_cnn_fashion.json");
    QJsonObject serve = plan["serve"].toObject();
    const std::int64_t B = 4, N = 300;
    const double T = 4.0;
    serve["max_batch"] = qint64(B);
    serve["timeout_ms"] = T;
    serve["requests"] = qint64(N);
    serve["rate"] = 300;
    plan["serve"] = serve;
    const QString db = dir_.filePath("runs.db");
    const Result run = loom::test::run_plan(plan, dir_.filePath("serve.json"), db);
    QCOMPARE(run.exit_code, 0);

    auto store = loom::store::RunStore::open(db.toStdString());
    QVERIFY(store.ok());
    auto metrics = store->load_metrics(1);
    QVERIFY(metrics.ok());
    const auto latency = by_step(*metrics, "latency_ms");
    const auto wait = by_step(*metrics, "queue_wait_ms");
    const auto batch_of = by_step(*metrics, "request_batch");
    const auto descheduled = by_step(*metrics, "queue_descheduled_ms");
    const auto sizes = by_step(*metrics, "batch_size");
    const auto compute = by_step(*metrics, "batch_compute_ms");
    QCOMPARE(std::int64_t(latency.size()), N);
    QCOMPARE(std::int64_t(wait.size()), N);
    double served = 0, longest_compute = 0;
    for (const auto& [b, size] : sizes) {
      QVERIFY2(size >= 1 && size <= double(B), qPrintable(QString("batch %1 has %2 requests").arg(b).arg(size)));
      served += size;
      longest_compute = std::max(longest_compute, compute.at(b));
    }
    QCOMPARE(served, double(N));
    double worst_wait = 0;
    for (const auto& [id, ms] : latency) {
      const double own_compute = compute.at(std::int64_t(batch_of.at(id)));
      QVERIFY2(ms >= own_compute, qPrintable(QString("request %1: latency %2 ms < compute %3 ms").arg(id).arg(ms).arg(own_compute)));
      worst_wait = std::max(worst_wait, wait.at(id) - descheduled.at(id));
    }
    QVERIFY2(worst_wait <= T + longest_compute + kWaitToleranceMs,
             qPrintable(QString("a request waited %1 ms with a core; T %2 + compute %3").arg(worst_wait).arg(T).arg(longest_compute)));

    const Result shown = run_cli({"show", "1", "--db", db, "--json"});
    QCOMPARE(shown.exit_code, 0);
    const QJsonObject serving = last_json_line(shown.out)["serving"].toObject();
    QCOMPARE(serving["requests"].toInteger(), qint64(N));
    QCOMPARE(serving["batches"].toInteger(), qint64(sizes.size()));
    const QJsonArray histogram = serving["batch_histogram"].toArray();
    QCOMPARE(histogram.size(), qsizetype(B + 1));
    QCOMPARE(histogram[0].toInteger(), qint64(0));
    const QJsonObject lat = serving["latency_ms"].toObject();
    QVERIFY(lat["p50"].toDouble() <= lat["p95"].toDouble() && lat["p95"].toDouble() <= lat["p99"].toDouble());
    QVERIFY(serving["throughput_per_s"].toDouble() > 0);
    const Result text = run_cli({"show", "1", "--db", db});
    QVERIFY2(text.out.contains("latency:") && text.out.contains("batch sizes:"), qPrintable(text.out));
  }

  void aServingPlanThatCannotRunNamesTheField() {
    QJsonObject plan = read_json_file(LOOM_SOURCE_DIR "/resources/plans/serve_cnn_fashion.json");
    QJsonObject serve = plan["serve"].toObject();
    serve["weights"] = dir_.filePath("no-such-params.bin");
    serve["max_batch"] = 0;
    plan["serve"] = serve;
    const Result run = loom::test::run_plan(plan, dir_.filePath("bad.json"), dir_.filePath("bad.db"));
    QCOMPARE(run.exit_code, 2);
    QVERIFY2(run.err.contains("/serve/weights") && run.err.contains("/serve/max_batch"), qPrintable(run.err));
  }
};

QTEST_GUILESS_MAIN(CliServingTest)
#include "test_cli_serving.moc"
