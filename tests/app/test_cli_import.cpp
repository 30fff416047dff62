// `loom-cli import --kineto` end to end: the real DDP fixture (tests/data/kineto) becomes
// a stored run that `show` and `compare` (against a real Loom run of the spirals plan)
// read; a truncated file is refused with exit code 2, naming it, and stores nothing.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include "cli_runner.h"

namespace {

using loom::test::Result;
using loom::test::last_json_line;
using loom::test::run_cli;

const QString kData = QString(LOOM_SOURCE_DIR) + "/tests/data/kineto/";

const char* kSpiralsPlan = R"({
  "format": "loom-plan/1", "name": "cli-spirals",
  "model": {"input": [2], "layers": [{"type": "linear", "out": 16}, {"type": "tanh"}, {"type": "linear", "out": 3}]},
  "data": {"source": "synthetic", "kind": "spirals", "classes": 3, "train_samples": 640, "test_samples": 128},
  "training": {"batch": 32, "steps": 20, "optimizer": {"type": "adam", "lr": 0.01}, "threads": 1}
})";

}  // namespace

class CliImportTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString db() const { return dir_.filePath("runs.db"); }
  QString write(const QString& name, const QByteArray& bytes) {
    QFile f(dir_.filePath(name));
    f.open(QIODevice::WriteOnly);
    f.write(bytes);
    return f.fileName();
  }
  int stored_runs() { return QJsonDocument::fromJson(run_cli({"runs", "--db", db(), "--json"}).out.toUtf8()).array().size(); }

 private slots:
  void importShowAndCompareWithALoomRun() {
    const Result imported = run_cli({"import", "--kineto", kData + "rank0.json", kData + "rank1.json.gz", "--name",
                                     "torch-ddp", "--db", db(), "--json"});
    QVERIFY2(imported.exit_code == 0, qPrintable(imported.err));
    const QJsonObject counts = last_json_line(imported.out);
    QCOMPARE(counts["ranks"].toInt(), 2);
    QCOMPARE(counts["steps"].toInt(), 4);        // ProfilerStep#1..#4, on each rank: steps are not per rank
    QCOMPARE(counts["collectives"].toInt(), 8);  // one gradient bucket per step and rank
    const QString id = QString::number(counts["id"].toInteger());

    // `runs` gives a 24 ms trace its milliseconds, as the Runs list does (it said 0.0s).
    const Result listed = run_cli({"runs", "--db", db()});
    QVERIFY2(QRegularExpression(R"(torch-ddp .* 2 +0\.0[1-9]\ds )").match(listed.out).hasMatch(), qPrintable(listed.out));

    const Result shown = run_cli({"show", id, "--db", db(), "--json"});
    QVERIFY2(shown.exit_code == 0, qPrintable(shown.err));
    const QJsonObject summary = last_json_line(shown.out);
    QCOMPARE(summary["name"].toString(), QString("torch-ddp"));
    QCOMPARE(summary["plan"].toObject()["imported"].toString(), QString("kineto"));
    QCOMPARE(summary["ranks"].toArray().size(), 2);
    QVERIFY(summary["ranks"].toArray()[0].toObject()["compute_s"].toDouble() > 0);
    QVERIFY(summary["ranks"].toArray()[0].toObject()["comm_s"].toDouble() > 0);
    QVERIFY(summary["samples_per_s"].isNull());  // unknown, not zero
    QVERIFY(summary["wall_samples_per_s"].isNull());
    // One step count in every view (it was 8 at import, 5 in show, 0 steady in JSON, 3 in
    // the critical path): 4 steps, the first the warm-up.
    QCOMPARE(summary["steps"].toInt(), 4);
    QCOMPARE(summary["steady_steps"].toInt(), 3);
    QCOMPARE(summary["critical_path"].toObject()["steps"].toInt(), 3);
    QVERIFY(summary["train_s"].toDouble() > 0);
    const Result text = run_cli({"show", id, "--db", db()});
    QVERIFY2(text.exit_code == 0 && text.out.contains("imported:"), qPrintable(text.out + text.err));
    QVERIFY2(text.out.contains("steps:         4 (1 warm-up, 3 steady)") && text.out.contains("profiled outside Loom") &&
                 !text.out.contains("samples/s ("),
             qPrintable(text.out));
    // PyTorch 1.13's files carry no deviceProperties: nothing is invented.
    QVERIFY2(text.out.contains("  device:        not recorded\n"), qPrintable(text.out));
    QVERIFY(summary["ranks"].toArray()[0].toObject()["device_info"].isNull());

    const Result loom = run_cli({"run", write("spirals.json", kSpiralsPlan), "--db", db(), "--json"});
    QVERIFY2(loom.exit_code == 0, qPrintable(loom.err));
    const QString loom_id = QString::number(last_json_line(loom.out)["id"].toInteger());
    const Result compared = run_cli({"compare", loom_id, id, "--db", db(), "--json"});
    QVERIFY2(compared.exit_code == 0, qPrintable(compared.err));
    const QJsonObject c = last_json_line(compared.out);
    QVERIFY(c["runs"].toArray()[1].toObject()["mode"].toString().startsWith("imported PyTorch trace"));
    QCOMPARE(c["runs"].toArray()[1].toObject()["steps"].toInt(), 4);
    bool step_time = false, whole_step = false;
    for (const auto& v : c["metrics"].toArray()) {
      const QJsonObject m = v.toObject();
      // PyTorch's profiler measures no descheduling: "not recorded", never 0, never best.
      if (m["key"] == "descheduled_ms" || m["key"] == "path_descheduled_ms") {
        QVERIFY2(m["values"][1].isNull() && m["best"].toInt() != 1, qPrintable(m["key"].toString()));
      }
      if (m["key"] != "step_time_median_ms") continue;
      step_time = m["values"][0].toDouble() > 0 && m["values"][1].toDouble() > 0;
    }
    for (const auto& v : c["phases"].toArray()) {
      const QJsonObject row = v.toObject();
      if (row["role"] != "worker" || row["phase"] != "whole step") continue;
      whole_step = row["median_ms"][1].toDouble() > 0;
      QCOMPARE(row["samples"][1].toInt(), 6);  // 2 ranks x 3 steady steps (ProfilerStep#1 is warm-up)
    }
    QVERIFY(step_time);
    QVERIFY(whole_step);
    const Result table = run_cli({"compare", loom_id, id, "--db", db()});
    QVERIFY2(table.exit_code == 0 && table.out.contains("imported PyTorch trace"), qPrintable(table.out));
  }

  void refusedImportStoresNothing() {
    const int before = stored_runs();
    QFile good(kData + "rank0.json");
    QVERIFY(good.open(QIODevice::ReadOnly));
    const QByteArray text = good.readAll();
    const QString cut = write("rank1.json", text.left(text.size() * 2 / 3));
    const Result r = run_cli({"import", "--kineto", kData + "rank0.json", cut, "--db", db()});
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.startsWith("loom-cli: ") && r.err.contains(cut) && r.err.contains("not valid JSON"), qPrintable(r.err));
    QCOMPARE(stored_runs(), before);
    const Result missing = run_cli({"import", "--kineto", dir_.filePath("nope.json"), "--db", db()});
    QCOMPARE(missing.exit_code, 2);
    QVERIFY(missing.err.contains("nope.json"));
    QCOMPARE(run_cli({"import", kData + "rank0.json", "--db", db()}).exit_code, 2);  // no format named
    QCOMPARE(stored_runs(), before);
  }
};

QTEST_GUILESS_MAIN(CliImportTest)
#include "test_cli_import.moc"
