// The pipeline example plans, each run to completion by loom-cli as a real mpirun job
// (shortened to a few steps), and what `show --json` reports for them: one entry per
// stage, the theoretical bubble of the schedule, and in-flight micro-batches as the
// schedule dictates (GPipe holds all M, 1F1B at most p - stage), with peak activation
// memory following the in-flight count; the bubble in one convention for both schedules,
// and the unbalanced example called out.
#include <algorithm>
#include <map>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "cli_runner.h"

namespace {

using loom::test::last_json_line;
using loom::test::read_json_file;

}  // namespace

class CliPipelineTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  // The example plan shortened to `steps` steps on part of the data, run and shown.
  QJsonObject run_example(const QString& name, int steps = 12) {
    QJsonObject plan = read_json_file(QString(LOOM_SOURCE_DIR "/resources/plans/%1.json").arg(name));
    QJsonObject training = plan["training"].toObject();
    training["steps"] = steps;
    training["eval_every"] = steps;
    training["threads"] = 1;
    plan["training"] = training;
    QJsonObject data = plan["data"].toObject();
    data["train_limit"] = 3200;
    data["test_limit"] = 500;
    plan["data"] = data;
    return last_json_line(loom::test::run_plan(plan, dir_.filePath(name + ".json"), dir_.filePath("runs.db")).out);
  }

  static QList<int> in_flight(const QJsonObject& shown) {
    QList<int> out;
    for (const QJsonValue& s : shown["stages"].toArray()) out << s.toObject()["max_in_flight"].toInt();
    return out;
  }

 private slots:
  void everyExampleRunsToCompletion_data() {
    QTest::addColumn<QString>("plan");
    QTest::addColumn<QString>("schedule");
    QTest::addColumn<int>("microbatches");
    QTest::addColumn<QList<int>>("in_flight");
    QTest::newRow("layer split") << "layer_split_mlp" << "gpipe" << 1 << QList<int>{1, 1};
    QTest::newRow("gpipe") << "gpipe_mlp" << "gpipe" << 8 << QList<int>{8, 8};
    QTest::newRow("1f1b") << "onefoneb_mlp" << "1f1b" << 8 << QList<int>{2, 1};
    QTest::newRow("branches") << "branches_two_devices" << "gpipe" << 1 << QList<int>{1, 1};
    QTest::newRow("hybrid") << "hybrid_mlp" << "1f1b" << 4 << QList<int>{2, 1};
  }

  void everyExampleRunsToCompletion() {
    QFETCH(QString, plan);
    QFETCH(QString, schedule);
    QFETCH(int, microbatches);
    QFETCH(QList<int>, in_flight);
    const QJsonObject shown = run_example(plan);
    QCOMPARE(shown["status"].toString(), QString("completed"));
    QCOMPARE(shown["steps"].toInt(), 12);
    QCOMPARE(shown["schedule"].toString(), schedule);
    QCOMPARE(shown["microbatches"].toInt(), microbatches);
    QCOMPARE(CliPipelineTest::in_flight(shown), in_flight);
    const QJsonArray stages = shown["stages"].toArray();
    // One convention for both schedules (docs/figures.md): idle over the stage's step time.
    QCOMPARE(shown["bubble_convention"].toString(), QString("of stage step time"));
    const double textbook = 1.0 / (microbatches + 1);  // p = 2
    for (const QJsonValue& s : stages) {
      QCOMPARE(s.toObject()["bubble_textbook"].toDouble(), textbook);
      const double measured = s.toObject()["bubble_fraction"].toDouble();
      QVERIFY2(measured >= 0 && measured <= 1, qPrintable(QString::number(measured)));
      // The replay models a chain of stages; branches on two stages are not one.
      if (plan == "branches_two_devices") {
        QVERIFY(s.toObject()["bubble_theory"].isNull());
      } else {
        const double theory = s.toObject()["bubble_theory"].toDouble(-1);
        QVERIFY2(theory >= 0 && theory <= 1, qPrintable(QString::number(theory)));
      }
      QVERIFY(s.toObject()["busy_s"].toDouble() > 0);
      QVERIFY(s.toObject()["peak_activation_bytes"].toDouble() > 0);
    }
    if (plan == "hybrid_mlp") QCOMPARE(stages[0].toObject()["ranks"].toArray().size(), 2);
  }

  // The same model and micro-batches: GPipe keeps four times the activations 1F1B keeps
  // on the first stage (8 micro-batches against 2).
  void gpipeHoldsMoreActivationsThanOneFOneB() {
    const QJsonObject gpipe = run_example("gpipe_mlp", 4);
    const QJsonObject one_f_one_b = run_example("onefoneb_mlp", 4);
    const double g = gpipe["stages"].toArray()[0].toObject()["peak_activation_bytes"].toDouble();
    const double o = one_f_one_b["stages"].toArray()[0].toObject()["peak_activation_bytes"].toDouble();
    QCOMPARE(g, 4 * o);
  }

  // A pipeline's critical path carries its fill and drain: compare splits it off the path's
  // work as the pipeline bubble, for both schedules, and the parts of where the step time
  // went name it. 8 micro-batches on 2 stages leave a bubble of about 1/9 of the path's
  // work; under a half of it allows for noise.
  void compareSplitsThePipelineBubbleOffThePath() {
    const QJsonObject gpipe = run_example("gpipe_mlp", 8);
    const QJsonObject one_f_one_b = run_example("onefoneb_mlp", 8);
    const loom::test::Result r =
        loom::test::run_cli({"compare", QString::number(gpipe["id"].toInteger()),
                             QString::number(one_f_one_b["id"].toInteger()), "--db", dir_.filePath("runs.db"), "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    std::map<QString, QJsonArray> values;
    for (const QJsonValue& m : last_json_line(r.out)["metrics"].toArray())
      values[m.toObject()["key"].toString()] = m.toObject()["values"].toArray();
    QVERIFY(values.count("path_bubble_ms") && values.count("path_work_ms"));
    for (int run = 0; run < 2; ++run) {
      const double bubble = values["path_bubble_ms"][run].toDouble(-1), work = values["path_work_ms"][run].toDouble();
      QVERIFY2(bubble >= 0 && bubble < 0.5 * work,
               qPrintable(QString("run %1: bubble %2 of work %3").arg(run).arg(bubble).arg(work)));
    }
    // Not asserted: that GPipe's bubble is above 0. Over 7 steady steps on 2 loaded cores
    // its path's work fell below its busiest rank's mean work once (a fresh-clone run,
    // 2026-11-26), which clamps the bubble to 0; test_profiles_compare checks the figure
    // on constructed runs.
    const loom::test::Result text =
        loom::test::run_cli({"compare", QString::number(gpipe["id"].toInteger()),
                             QString::number(one_f_one_b["id"].toInteger()), "--db", dir_.filePath("runs.db")});
    QVERIFY2(text.out.contains("pipeline bubble") && text.out.contains("exposed communication"), qPrintable(text.out));
  }

  // The unbalanced example (784->256 on stage 0, the small rest on stage 1) is called out:
  // its second stage idles mostly because the first is slower, which the replay with the
  // stages' own op times explains and the equal-stage schedule does not.
  void unbalancedExampleIsCalledOut() {
    const QJsonObject shown = run_example("pipeline_unbalanced_mlp", 40);
    QVERIFY2(shown["stage_imbalance"].toDouble() > 0.25, qPrintable(QString::number(shown["stage_imbalance"].toDouble())));
    // Any of the warnings: a busy machine adds one about the bandwidth probe before it.
    const QJsonArray warnings = shown["warnings"].toArray();
    const bool called_out = std::any_of(warnings.begin(), warnings.end(),
                                        [](const QJsonValue& w) { return w.toString().contains("unbalanced"); });
    QVERIFY2(called_out, qPrintable(QJsonDocument(warnings).toJson()));
    const QJsonObject stage1 = shown["stages"].toArray()[1].toObject();
    const double imbalance_part = stage1["bubble_theory"].toDouble() - stage1["bubble_schedule"].toDouble();
    QVERIFY2(imbalance_part > 0.2, qPrintable(QString::number(imbalance_part)));
  }
};

QTEST_GUILESS_MAIN(CliPipelineTest)
#include "test_cli_pipeline.moc"
