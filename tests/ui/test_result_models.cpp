// The tables of analysis results, without a display (QCoreApplication): the comparison's
// metrics (values, ratios to run A, the better run starred in bold, figures no run has
// left out and counted, headers with each run's letter, id and colour) and phase diff
// (medians, differences to A, sample counts), and a lesson's result (the student's,
// Loom's and the theory's answers beside the measurement, each with its error in words).
// QAbstractItemModelTester checks each model's contract while the test drives it.
#include <QAbstractItemModelTester>
#include <QFont>
#include <QIcon>
#include <QImage>
#include <QPainter>
#include <QRegularExpression>
#include <QtTest>

#include <cmath>
#include <limits>

#include "loom/analysis/compare.h"
#include "loom/lessons/lesson.h"
#include "loom/predict/lesson_answer.h"
#include "loom/ui/colors.h"
#include "loom/ui/compare_metrics_model.h"
#include "loom/ui/compare_phases_model.h"
#include "loom/ui/item_roles.h"
#include "loom/ui/lesson_result_model.h"

using loom::ui::CompareMetricsModel;
using loom::ui::ComparePhasesModel;
using loom::ui::LessonResultModel;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

QVariant cell(const QAbstractItemModel& m, int row, int column, int role = Qt::DisplayRole) {
  return m.data(m.index(row, column), role);
}

QString text(const QAbstractItemModel& m, int row, int column) { return cell(m, row, column).toString(); }

loom::analysis::CompareRow figure(const char* key, const char* label, const char* unit, loom::analysis::Better better,
                                  std::vector<double> values, int best) {
  return {key, label, unit, better, std::move(values), best};
}

// Runs #7, #5 and #3 (A, B, C): throughput, where B is best; a step time C lacks, where A
// is best; staleness that no run has.
loom::analysis::Comparison three_runs() {
  using loom::analysis::Better;
  loom::analysis::Comparison c;
  for (std::int64_t id : {7, 5, 3}) {
    c.runs.emplace_back();
    c.runs.back().id = id;
  }
  c.metrics = {figure("samples_per_s", "throughput", "samples/s", Better::Higher, {100, 250, 50}, 1),
               figure("staleness_mean", "staleness, mean", "", Better::Lower, {kNaN, kNaN, kNaN}, -1),
               figure("step_time_median_ms", "step time, median", "ms", Better::Lower, {10, 12.5, kNaN}, 0)};
  c.phases = {{"stage 0", "forward fc1", {4.14, 4.39, kNaN}, {60, 58, 0}},
              {"stage 1", "send", {0.5, 0.4998, 0.75}, {60, 58, 40}}};
  return c;
}

// The colour a header's swatch paints, read back from an image (no QPixmap, no display).
QColor swatch_color(const QVariant& decoration) {
  QImage image(12, 12, QImage::Format_ARGB32);
  image.fill(Qt::transparent);
  QPainter painter(&image);
  qvariant_cast<QIcon>(decoration).paint(&painter, image.rect());
  painter.end();
  return image.pixelColor(6, 6);
}

loom::lessons::Lesson pipeline_lesson() {
  loom::lessons::Lesson l;
  l.name = "gpipe_vs_1f1b";
  l.unit = "x";
  l.theory = 4.0;
  l.theory_why = "m / p = 8 / 2";
  return l;
}

}  // namespace

class TestResultModels : public QObject {
  Q_OBJECT
 private slots:
  // Any Qt warning (an invalid index from checkIndex, a model tester complaint) fails.
  void init() { QTest::failOnWarning(QRegularExpression(".*")); }
  void metricsSideBySideWithRatiosAndTheBetterRun();
  void metricsHeadersNameEachRunInItsColour();
  void metricsClearedAfterAFailedComparison();
  void phasesDifferToRunA();
  void lessonResultBesideEveryPrediction();
  void lessonResultWithoutTheStudentsPrediction();
};

void TestResultModels::metricsSideBySideWithRatiosAndTheBetterRun() {
  CompareMetricsModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  model.setComparison(three_runs());
  QCOMPARE(model.rowCount(), 2);  // staleness: no run has it
  QCOMPARE(model.hiddenCount(), 1);
  QCOMPARE(model.columnCount(), 4);
  QCOMPARE(model.rowForKey("staleness_mean"), -1);
  const int throughput = model.rowForKey("samples_per_s"), step = model.rowForKey("step_time_median_ms");
  QCOMPARE(throughput, 0);
  QCOMPARE(step, 1);
  QCOMPARE(cell(model, step, 2, loom::ui::FigureKeyRole).toString(), QString("step_time_median_ms"));

  QCOMPARE(text(model, throughput, 0), QString("throughput (samples/s)"));
  QCOMPARE(text(model, throughput, 1), QString("100"));  // the baseline: no ratio
  QCOMPARE(text(model, throughput, 2), QString("★ 250  (2.50×)"));
  QCOMPARE(text(model, throughput, 3), QString("50  (0.50×)"));
  QCOMPARE(text(model, step, 1), QString("★ 10"));
  QCOMPARE(text(model, step, 2), QString("12.50  (1.25×)"));
  QCOMPARE(text(model, step, 3), QString("-"));  // unknown: no ratio either

  // The better run in bold with a tooltip saying why; the others plain.
  QVERIFY(qvariant_cast<QFont>(cell(model, throughput, 2, Qt::FontRole)).bold());
  QVERIFY(!cell(model, throughput, 1, Qt::FontRole).isValid());
  QVERIFY(!cell(model, throughput, 0, Qt::FontRole).isValid());
  QCOMPARE(cell(model, throughput, 2, Qt::ToolTipRole).toString(), QString("The better value (higher is better)"));
  QVERIFY(!cell(model, throughput, 3, Qt::ToolTipRole).isValid());
  QCOMPARE(cell(model, step, 0, Qt::ToolTipRole).toString(), QString("step_time_median_ms — lower is better"));
  QCOMPARE(cell(model, throughput, 3, Qt::TextAlignmentRole).toInt(), int(Qt::AlignRight | Qt::AlignVCenter));
  QVERIFY(!cell(model, throughput, 0, Qt::TextAlignmentRole).isValid());
  QCOMPARE(cell(model, throughput, 2, loom::ui::SortRole).toDouble(), 250.0);
}

void TestResultModels::metricsHeadersNameEachRunInItsColour() {
  CompareMetricsModel model;
  model.setComparison(three_runs());
  QCOMPARE(model.headerData(0, Qt::Horizontal).toString(), QString("Figure"));
  QCOMPARE(model.headerData(1, Qt::Horizontal).toString(), QString("A #7"));
  QCOMPARE(model.headerData(3, Qt::Horizontal).toString(), QString("C #3"));
  QVERIFY(!model.headerData(0, Qt::Horizontal, Qt::DecorationRole).isValid());
  for (int run = 0; run < 3; ++run)
    QCOMPARE(swatch_color(model.headerData(1 + run, Qt::Horizontal, Qt::DecorationRole)), loom::ui::run_color(run));
}

void TestResultModels::metricsClearedAfterAFailedComparison() {
  CompareMetricsModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  model.setComparison(three_runs());
  model.clear();
  QCOMPARE(model.rowCount(), 0);
  QCOMPARE(model.columnCount(), 0);
  QCOMPARE(model.hiddenCount(), 0);
  QVERIFY(!model.headerData(0, Qt::Horizontal).isValid());
}

void TestResultModels::phasesDifferToRunA() {
  ComparePhasesModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  model.setComparison(three_runs());
  QCOMPARE(model.rowCount(), 2);
  QCOMPARE(model.columnCount(), 5);
  QCOMPARE(model.headerData(0, Qt::Horizontal).toString(), QString("Role"));
  QCOMPARE(model.headerData(1, Qt::Horizontal).toString(), QString("Phase"));
  QCOMPARE(model.headerData(2, Qt::Horizontal).toString(), QString("A #7 ms"));
  QCOMPARE(model.headerData(3, Qt::Horizontal).toString(), QString("B #5 ms (− A)"));
  QCOMPARE(swatch_color(model.headerData(4, Qt::Horizontal, Qt::DecorationRole)), loom::ui::run_color(2));
  QCOMPARE(text(model, 0, 0), QString("stage 0"));
  QCOMPARE(text(model, 0, 1), QString("forward fc1"));
  QCOMPARE(text(model, 0, 2), QString("4.14"));
  QCOMPARE(text(model, 0, 3), QString("4.39  (+0.250)"));
  QCOMPARE(text(model, 0, 4), QString("-"));  // C has no such phase
  QCOMPARE(text(model, 1, 3), QString("0.500  (+0.000)"));  // -0.0002 is no "-0.000"
  QCOMPARE(text(model, 1, 4), QString("0.750  (+0.250)"));
  QCOMPARE(cell(model, 0, 3, Qt::ToolTipRole).toString(), QString("median over 58 (rank, step) pairs"));
  QVERIFY(!cell(model, 0, 1, Qt::ToolTipRole).isValid());
  QCOMPARE(cell(model, 1, 2, Qt::TextAlignmentRole).toInt(), int(Qt::AlignRight | Qt::AlignVCenter));
  QCOMPARE(cell(model, 1, 3, loom::ui::SortRole).toDouble(), 0.4998);
  model.clear();
  QCOMPARE(model.rowCount(), 0);
  QCOMPARE(model.columnCount(), 0);
}

// The dock's rows, in order: the student's guess and its error, the measurement, Loom's
// own prediction (here none, and why not), the theory with its formula.
void TestResultModels::lessonResultBesideEveryPrediction() {
  LessonResultModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  loom::predict::LessonAnswer loom;
  loom.why_not = "no calibration";
  model.setResult(pipeline_lesson(), 4.0, 3.0, loom);
  QCOMPARE(model.rowCount(), 4);
  QCOMPARE(model.columnCount(), 2);
  const QStringList sources{"You said", "Measured", "Loom predicted", "Theory"};
  for (int r = 0; r < 4; ++r) QCOMPARE(text(model, r, 0), sources[r]);
  QCOMPARE(text(model, 0, 1), QString("3.00 × (25% below the measured value)"));
  QCOMPARE(text(model, 1, 1), QString("4.00 ×"));
  QCOMPARE(text(model, 2, 1), QString("—"));
  QCOMPARE(cell(model, 2, 1, loom::ui::DetailRole).toString(), QString("(no calibration)"));
  QVERIFY(!cell(model, 1, 1, loom::ui::DetailRole).isValid());
  QVERIFY(std::isnan(cell(model, 2, 1, loom::ui::SortRole).toDouble()));
  QCOMPARE(text(model, 3, 1), QString("4.00 × — m / p = 8 / 2"));
  QCOMPARE(cell(model, 1, 1, Qt::TextAlignmentRole).toInt(), int(Qt::AlignRight | Qt::AlignVCenter));
  model.clear();
  QCOMPARE(model.rowCount(), 0);
}

// No guess typed: no "You said" row; Loom's prediction with its error; decimals by size.
void TestResultModels::lessonResultWithoutTheStudentsPrediction() {
  LessonResultModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  loom::lessons::Lesson lesson = pipeline_lesson();
  lesson.unit = "ms";
  lesson.theory.reset();
  loom::predict::LessonAnswer loom;
  loom.value = 137.6;
  model.setResult(lesson, 125.0, std::nullopt, loom);
  QCOMPARE(model.rowCount(), 2);
  QCOMPARE(text(model, 0, 0), QString("Measured"));
  QCOMPARE(text(model, 0, 1), QString("125 ms"));
  QCOMPARE(text(model, 1, 1), QString("138 ms (10% above the measured value)"));
  QCOMPARE(cell(model, 1, 1, loom::ui::SortRole).toDouble(), 137.6);
  QCOMPARE(loom::ui::lesson_number_text(12.345), QString("12.3"));
  QCOMPARE(loom::ui::lesson_number_text(1.2345), QString("1.23"));
}

QTEST_GUILESS_MAIN(TestResultModels)
#include "test_result_models.moc"
