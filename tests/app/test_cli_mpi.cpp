// loom-cli with a data-parallel plan: a real mpirun job from `run`, its figures in
// `show --json` (per-rank exposed communication, all-reduce bandwidths, clock offsets,
// scaling efficiency against the stored single-rank run of the same plan), the Chrome
// export with every rank, nested slices and causally ordered messages, and Ctrl-C.
#include <signal.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "cli_runner.h"

#include <map>

namespace {

using loom::test::Result;
using loom::test::run_cli;

// The same MLP on Fashion-MNIST, on `ranks` ranks; small buckets so several are in flight.
QByteArray plan(int ranks, int steps) {
  QString devices;
  for (int r = 0; r < ranks; ++r) devices += QString(r ? "," : "") + R"({"kind": "cpu", "host": "localhost"})";
  return QString(R"({
    "format": "loom-plan/1", "name": "cli-dp",
    "model": {"input": [1, 28, 28], "layers": [{"type": "flatten"}, {"type": "linear", "out": 128},
              {"type": "relu"}, {"type": "linear", "out": 64}, {"type": "relu"}, {"type": "linear", "out": 10}]},
    "data": {"source": "fashion-mnist", "path": "/usr/share/datasets/fashion-mnist", "train_limit": 6400, "test_limit": 500},
    "training": {"batch": 64, "steps": %1, "threads": 1, "optimizer": {"type": "adam", "lr": 0.001}},
    "parallel": {"devices": [%2], "data_parallel": %3, "bucket_mb": 0.1}
  })").arg(steps).arg(devices).arg(ranks).toUtf8();
}

double us_to_ns(const QJsonValue& v) { return v.toDouble() * 1e3; }

}  // namespace

class CliMpiTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString db() const { return dir_.filePath("runs.db"); }
  QString write(const QString& name, const QByteArray& text) {
    QFile f(dir_.filePath(name));
    f.open(QIODevice::WriteOnly);
    f.write(text);
    return f.fileName();
  }
  QJsonObject shown_;  // `show --json` of the two-rank run

 private slots:
  void runShowsRanksBandwidthClockAndScaling() {
    const Result single = run_cli({"run", write("one.json", plan(1, 200)), "--db", db()});
    QVERIFY2(single.exit_code == 0, qPrintable(single.err));
    const Result r = run_cli({"run", write("two.json", plan(2, 200)), "--db", db(), "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err + r.out));
    shown_ = loom::test::last_json_line(r.out);
    QCOMPARE(shown_["status"].toString(), QString("completed"));
    QCOMPARE(shown_["world_size"].toInt(), 2);
    const QJsonArray ranks = shown_["ranks"].toArray();
    QCOMPARE(ranks.size(), 2);
    for (const auto& v : ranks) {
      const QJsonObject rank = v.toObject();
      QVERIFY(rank["events_recorded"].toInteger() > 0);
      QCOMPARE(rank["events_stored"].toInteger(), rank["events_recorded"].toInteger());
      QVERIFY(rank["exposed_comm_s"].toDouble() >= 0);
      QVERIFY(rank["exposed_comm_s"].toDouble() <= rank["comm_s"].toDouble() + 1e-9);
      // Each rank sent what it ran on (the Device frame) once its device was open.
      const QJsonObject device = rank["device_info"].toObject();
      QCOMPARE(device["kind"].toString(), QString("cpu"));
      QVERIFY(device["logical_cores"].toInt() >= 1 && device["blas_threads"].toInt() >= 1);
    }
    // Two ranks on one machine: one identity, grouped.
    QCOMPARE(shown_["devices"].toArray().size(), 1);
    QCOMPARE(shown_["devices"][0]["ranks"].toArray().size(), 2);
    const QJsonObject allreduce = shown_["allreduce"].toObject();
    QVERIFY(allreduce["algbw_gbs"].toDouble() > 0);
    QCOMPARE(allreduce["busbw_gbs"].toDouble(), allreduce["algbw_gbs"].toDouble());  // 2(n-1)/n = 1 for n = 2
    QVERIFY(allreduce["p2p_gbs"].toDouble() > 0);
    QVERIFY(allreduce["hidden_fraction"].isDouble());
    const QJsonArray clock = shown_["clock"].toArray();
    QCOMPARE(clock.size(), 2);
    // One machine, one steady clock: the estimate must be within its own uncertainty of 0.
    const QJsonObject rank1 = clock[1].toObject();
    QVERIFY(std::abs(rank1["offset_ns"].toDouble()) <= rank1["uncertainty_ns"].toDouble() + 1000);
    QVERIFY(shown_["scaling"].isObject());
    QVERIFY(shown_["scaling"].toObject()["efficiency"].toDouble() > 0);
    // The text view carries the same figures.
    const Result text = run_cli({"show", QString::number(shown_["id"].toInteger()), "--db", db()});
    QVERIFY(text.out.contains("busbw"));
    QVERIFY(text.out.contains("scaling"));
    QVERIFY2(text.out.contains("  device:        ranks 0-1: cpu"), qPrintable(text.out));
  }

  void exportHasEveryRankNestedAndCausal() {
    QVERIFY(!shown_.isEmpty());
    const QString file = dir_.filePath("trace.json");
    const Result r = run_cli({"export", QString::number(shown_["id"].toInteger()), "--chrome", file, "--db", db()});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QFile f(file);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QJsonObject trace = QJsonDocument::fromJson(f.readAll()).object();
    QCOMPARE(trace["distributedInfo"].toObject()["world_size"].toInt(), 2);
    std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> threads;
    std::map<int, std::pair<double, double>> sends, recvs;  // message id -> [start, end) ns
    for (const auto& v : trace["traceEvents"].toArray()) {
      const QJsonObject e = v.toObject();
      if (e["ph"].toString() != "X") continue;
      const double start = us_to_ns(e["ts"]), end = start + us_to_ns(e["dur"]);
      threads[{e["pid"].toInt(), e["tid"].toInt()}].push_back({start, end});
      const QString cat = e["cat"].toString();
      const int message = e["args"].toObject()["message"].toInt(-1);
      if (cat == "send" && message >= 0) sends[message] = {start, end};
      if (cat == "recv" && message >= 0) recvs[message] = {start, end};
    }
    QVERIFY(threads.count({0, 0}) && threads.count({1, 0}));  // both ranks' compute
    for (auto& [thread, slices] : threads) {
      std::sort(slices.begin(), slices.end(), [](auto a, auto b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
      std::vector<double> open;
      for (const auto& [start, end] : slices) {
        // Chained layer spans abut (one clock read ends one and starts the next); the
        // microsecond doubles of the export put that boundary a rounding error apart.
        while (!open.empty() && open.back() <= start + 1e-3) open.pop_back();
        QVERIFY2(open.empty() || end <= open.back() + 1e-3, "a slice crosses its parent");
        open.push_back(end);
      }
    }
    // Clock probe and bandwidth probe messages: after alignment no receive ends before
    // its send starts, beyond the alignment's own error. On one machine the ranks share one
    // steady clock, so that error is the estimated offset itself (start or end estimate,
    // interpolated between them); on a loaded machine it reached a few hundred us.
    const QJsonObject rank1 = shown_["clock"].toArray()[1].toObject();
    const double alignment_error_ns =
        std::max(std::abs(rank1["offset_ns"].toDouble()), std::abs(rank1["offset_end_ns"].toDouble())) + 1000;
    int pairs = 0;
    for (const auto& [message, recv] : recvs) {
      auto send = sends.find(message);
      if (send == sends.end()) continue;
      ++pairs;
      QVERIFY2(recv.second >= send->second.first - alignment_error_ns,
               qPrintable(QString("message %1 received %2 ns before sent; the alignment's error is %3 ns")
                              .arg(message)
                              .arg(send->second.first - recv.second)
                              .arg(alignment_error_ns)));
    }
    QVERIFY(pairs >= 16);
  }

  void ctrlCStoresAStoppedRun() {
    QProcess p;
    p.start(LOOM_CLI, {"run", write("long.json", plan(2, 100000)), "--db", db()});
    QVERIFY(p.waitForStarted());
    QTest::qWait(4000);  // MPI start-up, data loading, some steps
    ::kill(pid_t(p.processId()), SIGINT);
    QVERIFY(p.waitForFinished(30000));
    QCOMPARE(p.exitCode(), 130);
    const Result runs = run_cli({"runs", "--db", db(), "--json"});
    const QJsonArray list = QJsonDocument::fromJson(runs.out.toUtf8()).array();
    QCOMPARE(list.first().toObject()["status"].toString(), QString("stopped"));
    const Result shown = run_cli({"show", QString::number(list.first().toObject()["id"].toInteger()), "--db", db(), "--json"});
    const QJsonObject run = loom::test::last_json_line(shown.out);
    for (const auto& v : run["ranks"].toArray())
      QCOMPARE(v.toObject()["events_stored"].toInteger(), v.toObject()["events_recorded"].toInteger());
  }
};

QTEST_GUILESS_MAIN(CliMpiTest)
#include "test_cli_mpi.moc"
