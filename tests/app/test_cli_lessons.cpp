// loom-cli lesson end to end: the lesson list, an unknown lesson, the GPipe-against-1F1B
// lesson shortened to a few steps of real mpirun jobs, whose measured answer (stage 0's
// micro-batches in flight, GPipe over 1F1B) is exactly its theory, m / p = 4, and every
// lesson shortened, each measuring its answer (exactly where the answer is exact).
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "cli_runner.h"

class CliLessonsTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  static QJsonObject last_json_line(const QString& out) {
    const QStringList lines = out.trimmed().split('\n');
    return QJsonDocument::fromJson(lines.last().toUtf8()).object();
  }

 private slots:
  void listsTheLessons() {
    const loom::test::Result r = loom::test::run_cli({"lesson", "--json"});
    QCOMPARE(r.exit_code, 0);
    const QJsonArray all = QJsonDocument::fromJson(r.out.toUtf8()).array();
    QVERIFY(all.size() >= 3);
    QCOMPARE(all[0].toObject()["name"].toString(), QString("data_parallel"));
  }

  void unknownLessonIsRefused() {
    const loom::test::Result r = loom::test::run_cli({"lesson", "no_such_lesson", "--db", dir_.filePath("runs.db")});
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("no lesson named 'no_such_lesson'") && r.err.contains("gpipe_vs_1f1b"), qPrintable(r.err));
  }

  // Every lesson compiled in, 12 steps per run: real runs, an answer measured. The bounds
  // hold on any machine; the figures that depend on the machine only need to exist.
  void everyLessonMeasuresItsAnswer() {
    const QJsonArray all = QJsonDocument::fromJson(loom::test::run_cli({"lesson", "--json"}).out.toUtf8()).array();
    for (const QJsonValue& entry : all) {
      const QString name = entry.toObject()["name"].toString();
      const loom::test::Result r =
          loom::test::run_cli({"lesson", name, "--steps", "12", "--json", "--db", dir_.filePath("all.db")});
      QVERIFY2(r.exit_code == 0, qPrintable(name + ": " + r.err));
      const QJsonObject out = last_json_line(r.out);
      const double measured = out["measured"].toDouble(-1);
      QVERIFY2(std::isfinite(measured) && measured >= 0, qPrintable(name + ": " + r.out));
      if (name == "straggler") QVERIFY2(measured <= 2, qPrintable(QString::number(measured)));  // SSP's bound
      if (name == "gradient_accumulation") QVERIFY2(std::fabs(measured - 1) < 1e-5, qPrintable(QString::number(measured)));
      if (name == "gpipe_vs_1f1b") QCOMPARE(measured, 4.0);
      // Exact by construction: the bucket rule, bytes split over stages, one join a step.
      if (name == "buckets_and_overlap") QCOMPARE(measured, 4.0);
      if (name == "hybrid") QCOMPARE(measured, 1.0);
      if (name == "branches") QCOMPARE(measured, 1.0);
      // The schedule's replay of measured times: 0.110 here against the textbook 1/9.
      if (name == "layer_split_vs_pipeline") QVERIFY2(measured > 0.08 && measured < 0.14, qPrintable(QString::number(measured)));
      // 1 + rate x T = 5 while the server keeps up; a busy machine lets the queue grow.
      if (name == "request_batching") QVERIFY2(measured > 3.5 && measured < 7.0, qPrintable(QString::number(measured)));
    }
  }

  void gpipeAgainst1f1bMeasuresTheTheory() {
    const loom::test::Result r = loom::test::run_cli(
        {"lesson", "gpipe_vs_1f1b", "--steps", "6", "--predict", "3", "--json", "--db", dir_.filePath("runs.db")});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonObject out = last_json_line(r.out);
    QCOMPARE(out["runs"].toArray().size(), 2);
    QCOMPARE(out["measured"].toDouble(), 4.0);
    QCOMPARE(out["theory"].toDouble(), 4.0);
    QCOMPARE(out["prediction"].toDouble(), 3.0);
    QCOMPARE(out["error"].toDouble(), -0.25);
    // The runs are stored like any other: `show` reads them back.
    const int gpipe = out["runs"].toArray()[0].toObject()["id"].toInt();
    const loom::test::Result shown =
        loom::test::run_cli({"show", QString::number(gpipe), "--json", "--db", dir_.filePath("runs.db")});
    QCOMPARE(last_json_line(shown.out)["steps"].toInt(), 6);
    // Loom's own prediction, made before the runs: none on an empty store (it says why);
    // the second time, calibrated by the first time's runs, the in-flight ratio 8 / 2.
    QVERIFY(out["loom_predicted"].isNull());
    QVERIFY2(out["loom_predicted_why_not"].toString().contains("no calibration"), qPrintable(r.out));
    const loom::test::Result again = loom::test::run_cli(
        {"lesson", "gpipe_vs_1f1b", "--steps", "6", "--predict", "3", "--json", "--db", dir_.filePath("runs.db")});
    QVERIFY2(again.exit_code == 0, qPrintable(again.err));
    QCOMPARE(last_json_line(again.out)["loom_predicted"].toDouble(), 4.0);
  }
};

QTEST_GUILESS_MAIN(CliLessonsTest)
#include "test_cli_lessons.moc"
