// The chart widgets rendered offscreen: what each plot holds after data arrives (graph
// points, bar values per rank, histogram bars), the redraw timer coalescing appends, the
// x-axis switch, the staleness chart's empty-state text and palette-driven colours.
// Set LOOM_CHARTS_PNG_DIR to also write each widget as a PNG for a look by eye.
#include <QTemporaryDir>
#include <QScrollArea>
#include <QScrollBar>
#include <QtTest>

#include <qcustomplot.h>

#include "loom/ui/charts/chart_export.h"
#include "loom/ui/charts/training_charts.h"
#include "loom/ui/colors.h"

using loom::trace::MetricRecord;
using loom::ui::charts::BreakdownChart;
using loom::ui::charts::ServingChart;
using loom::ui::charts::StalenessChart;
using loom::ui::charts::StalenessSample;
using loom::ui::charts::TrainingCharts;
using loom::ui::charts::XAxis;

namespace {

// Two ranks, 40 steps each 50 ms apart, clocks 1000 s apart; an evaluation every 10 steps.
std::vector<MetricRecord> training_records(int steps = 40) {
  std::vector<MetricRecord> out;
  for (int rank = 0; rank < 2; ++rank) {
    const std::int64_t origin = 1'000'000'000'000LL * (rank + 1);
    for (int step = 0; step < steps; ++step) {
      const std::int64_t t = origin + step * 50'000'000LL;
      const double loss = 2.3 * std::exp(-0.06 * step) + 0.2 + 0.1 * rank;
      out.push_back({rank, step, t, "loss", loss});
      out.push_back({rank, step, t, "train_accuracy", 1.0 - loss / 2.6});
      out.push_back({rank, step, t, "samples_per_s", 1200.0 + 20.0 * step + 100.0 * rank});
      if (step % 10 == 9) out.push_back({rank, step, t + 1'000'000, "test_accuracy", 0.9 - 0.5 * std::exp(-0.05 * step)});
    }
  }
  return out;
}

std::vector<loom::analysis::RankBreakdown> breakdowns() {
  std::vector<loom::analysis::RankBreakdown> out(3);
  for (int i = 0; i < 3; ++i) {
    auto& r = out[static_cast<std::size_t>(i)];
    r.rank = i;
    r.compute_s = 6.0 + i;
    r.comm_s = 3.0;
    r.exposed_comm_s = 1.0 + 0.5 * i;
    r.optimizer_s = 0.5;
    r.data_s = 0.25;
    r.idle_s = 0.75 * (i + 1);
  }
  return out;
}

std::vector<StalenessSample> staleness_samples() {
  std::vector<StalenessSample> out;
  for (int worker = 1; worker <= 3; ++worker) {
    for (int step = 0; step < 30; ++step) {
      out.push_back({worker, step, (step * worker) % (worker + 2), step * 10'000'000LL});
    }
  }
  return out;
}

QVector<QPointF> points(const QCPGraph* g) {
  QVector<QPointF> out;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) out.append(QPointF(it->key, it->value));
  return out;
}

QVector<QPointF> points(const QCPBars* b) {
  QVector<QPointF> out;
  for (auto it = b->data()->constBegin(); it != b->data()->constEnd(); ++it) out.append(QPointF(it->key, it->value));
  return out;
}

void save_png(QWidget& w, const char* name) {
  const QByteArray dir = qgetenv("LOOM_CHARTS_PNG_DIR");
  if (dir.isEmpty()) return;
  QVERIFY(w.grab().save(QString::fromLocal8Bit(dir) + "/" + name));
}

QPalette dark_palette() {
  QPalette p;
  p.setColor(QPalette::Window, QColor(53, 53, 53));
  p.setColor(QPalette::WindowText, QColor(230, 230, 230));
  p.setColor(QPalette::Base, QColor(35, 35, 35));
  p.setColor(QPalette::Text, QColor(230, 230, 230));
  p.setColor(QPalette::Mid, QColor(90, 90, 90));
  return p;
}

// How far `view` scrolls when docked as the window docks a view (a resizable scroll area
// without a frame, main_window_layout.cpp's scrollable) of `size`; the area owns `view`.
int docked_scroll(QWidget* view, QSize size) {
  QScrollArea dock;
  dock.setWidgetResizable(true);
  dock.setFrameShape(QFrame::NoFrame);
  dock.setWidget(view);
  dock.resize(size);
  dock.show();
  if (!QTest::qWaitForWindowExposed(&dock)) return -1;
  QCoreApplication::processEvents();
  return dock.verticalScrollBar()->maximum();
}

}  // namespace

class TestChartsWidgets : public QObject {
  Q_OBJECT
 private slots:
  void lossGraphHoldsMeanPoints();
  void appendsAreCoalescedIntoOneRedraw();
  void timeAxisChangesKeys();
  void clearEmptiesGraphs();
  void chartsSitSideBySideInALowDock();
  void lossChartIsReadableInALowDock();
  void breakdownBarsPerRank();
  void breakdownShowsPipelineBubbles();
  void breakdownCategoriesExplainThemselves();
  void breakdownHoverGivesTheRanksFigures();
  void breakdownLegendFitsAShortDock();
  void stalenessEmptyShowsExplanation();
  void stalenessBarsAndLines();
  void stalenessFromUpdates();
  void paletteChangeRecoloursAxes();
  void chartsSaveAsPngSvgAndPdf();
  void servingChartDrawsBatchesAndLatencies();
  void renderForReview();
};

void TestChartsWidgets::lossGraphHoldsMeanPoints() {
  TrainingCharts charts;
  charts.appendMetrics(training_records());
  charts.replotNow();
  const QVector<QPointF> loss = points(charts.graph("loss"));
  QCOMPARE(loss.size(), 40);
  QCOMPARE(loss[0].x(), 0.0);
  QCOMPARE(loss[0].y(), 2.3 + 0.2 + 0.05);  // mean of rank 0 (+0) and rank 1 (+0.1)
  QCOMPARE(loss[39].x(), 39.0);
  QVERIFY(qFuzzyCompare(loss[39].y(), 2.3 * std::exp(-0.06 * 39) + 0.25));
  QCOMPARE(charts.graph("loss")->parentPlot(), charts.lossPlot());
  QCOMPARE(charts.graph("train_accuracy")->valueAxis(), charts.lossPlot()->yAxis2);
  const QVector<QPointF> test = points(charts.graph("test_accuracy"));
  QCOMPARE(test.size(), 4);
  QCOMPARE(test[0].x(), 9.0);
  const QVector<QPointF> throughput = points(charts.graph("samples_per_s"));
  QCOMPARE(charts.graph("samples_per_s")->parentPlot(), charts.throughputPlot());
  QCOMPARE(throughput[10], QPointF(10, 1200.0 + 200.0 + 50.0));
  // A metric the run never reported stays out of the legend.
  QVERIFY(points(charts.graph("test_loss")).isEmpty());
  QVERIFY(!charts.lossPlot()->legend->hasItemWithPlottable(charts.graph("test_loss")));
  QVERIFY(charts.lossPlot()->legend->hasItemWithPlottable(charts.graph("loss")));
  QCOMPARE(charts.lossPlot()->xAxis->range().upper, 39.0);
}

// A bottom dock (1100 x 260 at 1920x1080, 820 x 200 at 1280x720) put the throughput
// chart under the loss chart with about 20 px of plot: side by side, each keeps the
// height; a tall, narrow dock stacks them.
void TestChartsWidgets::chartsSitSideBySideInALowDock() {
  TrainingCharts charts;
  charts.appendMetrics(training_records());
  charts.replotNow();
  for (const QSize size : {QSize(1100, 260), QSize(820, 200)}) {
    charts.resize(size);
    charts.show();
    QVERIFY(QTest::qWaitForWindowExposed(&charts));
    QCoreApplication::processEvents();
    QVERIFY(charts.sideBySide());
    QCOMPARE(charts.lossPlot()->height(), charts.throughputPlot()->height());
    QVERIFY2(charts.throughputPlot()->axisRect()->height() >= 60,
             qPrintable(QString("plot area %1 px high at %2x%3").arg(charts.throughputPlot()->axisRect()->height())
                            .arg(size.width()).arg(size.height())));
  }
  // Docked as the window docks it (a resizable scroll area) in the Training dock of a
  // 1280x720 window, about 830 x 170 under its title: nothing to scroll.
  {
    auto* docked = new TrainingCharts;
    docked->appendMetrics(training_records());
    docked->replotNow();
    const int scroll = docked_scroll(docked, QSize(830, 170));
    QVERIFY2(scroll == 0, qPrintable(QString("scrolls by %1 px").arg(scroll)));
  }
  charts.resize(500, 700);
  QCoreApplication::processEvents();
  QVERIFY(!charts.sideBySide());
  QVERIFY(charts.throughputPlot()->y() > charts.lossPlot()->y());
}

// The Training dock of a 1280x720 window is 864x185 px (measured with loom-state-shots):
// the loss legend's two rows under the plot left it 36 px high, its tick labels on top of
// each other. There the legend stands beside the plot, one entry a row, and the plot keeps
// 60 px; in the 1920x1080 dock (1474x325) it stays under the plot in one row.
void TestChartsWidgets::lossChartIsReadableInALowDock() {
  for (const QSize size : {QSize(864, 185), QSize(1474, 325)}) {
    QScrollArea dock;  // as main_window_layout.cpp's scrollable() docks it
    dock.setWidgetResizable(true);
    dock.setFrameShape(QFrame::NoFrame);
    auto* charts = new TrainingCharts;
    charts->appendMetrics(training_records());
    dock.setWidget(charts);
    dock.resize(size);
    dock.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dock));
    QCoreApplication::processEvents();
    charts->replotNow();
    QCustomPlot* plot = charts->lossPlot();
    const QString where = QStringLiteral("at %1x%2").arg(size.width()).arg(size.height());
    QVERIFY2(plot->axisRect()->height() >= 60,
             qPrintable(QStringLiteral("plot area %1 px high %2").arg(plot->axisRect()->height()).arg(where)));
    QVERIFY2(plot->rect().contains(plot->legend->outerRect()), qPrintable(where));
    const bool beside = plot->legend->outerRect().left() > plot->axisRect()->outerRect().right();
    QCOMPARE(beside, size.width() < 1000);
    if (!beside) QCOMPARE(plot->legend->wrap(), 4);  // one row
  }
}

void TestChartsWidgets::appendsAreCoalescedIntoOneRedraw() {
  TrainingCharts charts;
  QSignalSpy redraws(charts.lossPlot(), &QCustomPlot::afterReplot);
  QCoreApplication::processEvents();  // QCustomPlot's own first (queued) replot
  redraws.clear();
  const auto records = training_records(10);
  for (std::size_t i = 0; i < records.size(); i += 6) {
    charts.appendMetrics({records.begin() + std::ptrdiff_t(i), records.begin() + std::ptrdiff_t(std::min(records.size(), i + 6))});
  }
  QVERIFY(points(charts.graph("loss")).isEmpty());  // nothing drawn synchronously
  QTRY_COMPARE_WITH_TIMEOUT(points(charts.graph("loss")).size(), 10, 2000);
  QCOMPARE(redraws.count(), 1);
  QTest::qWait(400);  // idle: no further redraws
  QCOMPARE(redraws.count(), 1);
  charts.appendMetrics({});  // no new records: still no redraw
  QTest::qWait(300);
  QCOMPARE(redraws.count(), 1);
}

void TestChartsWidgets::timeAxisChangesKeys() {
  TrainingCharts charts;
  charts.appendMetrics(training_records());
  charts.replotNow();
  QCOMPARE(points(charts.graph("loss"))[20].x(), 20.0);
  charts.setXAxis(XAxis::Time);
  QCOMPARE(charts.xAxis(), XAxis::Time);
  const QVector<QPointF> loss = points(charts.graph("loss"));
  QCOMPARE(loss.size(), 40);
  QCOMPARE(loss[0].x(), 0.0);
  QVERIFY(qFuzzyCompare(loss[20].x(), 1.0));  // 20 steps x 50 ms, each rank from its own origin
  QVERIFY(qFuzzyCompare(points(charts.graph("samples_per_s"))[39].x(), 1.95));
  QCOMPARE(charts.lossPlot()->xAxis->label(), QStringLiteral("time (s)"));
  charts.setXAxis(XAxis::Step);
  QCOMPARE(points(charts.graph("loss"))[20].x(), 20.0);
}

void TestChartsWidgets::clearEmptiesGraphs() {
  TrainingCharts charts;
  charts.appendMetrics(training_records());
  charts.replotNow();
  charts.clear();
  QVERIFY(points(charts.graph("loss")).isEmpty());
  QVERIFY(charts.accumulator().names().empty());
  // An empty legend must not squeeze the plot's layout column.
  charts.resize(900, 600);
  (void)charts.grab();
  QVERIFY(charts.lossPlot()->axisRect()->outerRect().width() > charts.lossPlot()->width() * 8 / 10);
}

// Every category has a tooltip: its legend entry explains it (the glossary's words), and
// hovering a rank's bar names the category under the pointer.
void TestChartsWidgets::breakdownCategoriesExplainThemselves() {
  BreakdownChart chart;
  chart.resize(900, 400);
  chart.setBreakdown(breakdowns());
  chart.show();
  QVERIFY(QTest::qWaitForWindowExposed(&chart));
  chart.plot()->replot();
  QStringList explained;
  for (int i = 0; i < chart.plot()->legend->itemCount(); ++i) {
    auto* item = qobject_cast<QCPPlottableLegendItem*>(chart.plot()->legend->item(i));
    if (!item) continue;  // itemCount() counts grid cells: the last row may have empty ones
    const QString segment = item->plottable()->property("segment").toString();
    const QString tip = chart.toolTipAt(item->rect().center());
    QVERIFY2(tip.size() > 30 && tip == BreakdownChart::segmentExplanation(segment), qPrintable(segment + ": " + tip));
    explained << segment;
  }
  for (const char* segment : {"compute", "optimizer", "data", "exposed_comm", "idle", "descheduled", "hidden_comm"}) {
    QVERIFY2(explained.contains(segment), segment);
  }
  // Rank 1's compute segment spans 0..7 s: the pointer at 3 s over rank 1's bar.
  const QPoint over(int(chart.plot()->xAxis->coordToPixel(3.0)), int(chart.plot()->yAxis->coordToPixel(1.0)));
  const QString tip = chart.toolTipAt(over);
  QVERIFY2(tip.contains("rank 1") && tip.contains(BreakdownChart::segmentExplanation("compute").toHtmlEscaped()),
           qPrintable(tip));
}

// Resting the pointer on a bar shows that rank's seconds and shares of its window, and
// the category under the pointer; not one fixed sentence for the whole plot (Qt shows a
// widget's fixed tooltip over the one the mouse handler showed).
void TestChartsWidgets::breakdownHoverGivesTheRanksFigures() {
  BreakdownChart chart;
  chart.resize(900, 400);
  chart.setBreakdown(breakdowns());
  chart.show();
  QVERIFY(QTest::qWaitForWindowExposed(&chart));
  chart.plot()->replot();
  const QPoint over(int(chart.plot()->xAxis->coordToPixel(3.0)), int(chart.plot()->yAxis->coordToPixel(1.0)));
  QHelpEvent rest(QEvent::ToolTip, over, chart.plot()->mapToGlobal(over));
  QApplication::sendEvent(chart.plot(), &rest);
  const QString shown = QToolTip::text();
  QVERIFY2(shown.contains("rank 1") && shown.contains("7.000 s"), qPrintable(shown));
  // Rank 1 computes 7 s (breakdowns()); its share is of the rank's stacked window.
  const loom::ui::charts::BreakdownSegments s = loom::ui::charts::breakdown_segments(breakdowns()[1]);
  const QString share = QStringLiteral("%1%").arg(100.0 * 7.0 / s.stacked(), 0, 'f', 1);
  QVERIFY2(shown.contains(share), qPrintable(share + " in " + shown));
  QVERIFY(chart.plot()->toolTip().isEmpty());
  // Rank 0's bar says rank 0's figures.
  const QPoint rank0(int(chart.plot()->xAxis->coordToPixel(3.0)), int(chart.plot()->yAxis->coordToPixel(0.0)));
  QHelpEvent rest0(QEvent::ToolTip, rank0, chart.plot()->mapToGlobal(rank0));
  QApplication::sendEvent(chart.plot(), &rest0);
  QVERIFY2(QToolTip::text().contains("rank 0") && QToolTip::text().contains("6.000 s"), qPrintable(QToolTip::text()));
}

// In a dock as short as the 1280x720 layout's, every legend entry is drawn whole inside
// the plot: the legend wraps into columns instead of being cut at its top and bottom.
void TestChartsWidgets::breakdownLegendFitsAShortDock() {
  for (const int height : {150, 400}) {
    BreakdownChart chart;
    chart.resize(900, height);
    chart.setBreakdown(breakdowns());
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    chart.plot()->replot();
    const QRect inside = chart.plot()->rect();
    int entries = 0;
    for (int i = 0; i < chart.plot()->legend->itemCount(); ++i) {
      QCPAbstractLegendItem* item = chart.plot()->legend->item(i);
      if (!item) continue;
      ++entries;
      QVERIFY2(inside.contains(item->outerRect()), qPrintable(QStringLiteral("height %1: %2 at y %3..%4")
                                                                 .arg(height)
                                                                 .arg(i)
                                                                 .arg(item->outerRect().top())
                                                                 .arg(item->outerRect().bottom())));
      QVERIFY2(item->outerRect().height() <= item->minimumOuterSizeHint().height() + 2, "entries are not spread apart");
    }
    QCOMPARE(entries, 7);
    QCOMPARE(chart.legendColumns() > 1, height < 200);
  }
}

void TestChartsWidgets::breakdownBarsPerRank() {
  BreakdownChart chart;
  chart.setBreakdown(breakdowns());
  QCOMPARE(points(chart.bars("compute")), (QVector<QPointF>{{0, 6.0}, {1, 7.0}, {2, 8.0}}));
  QCOMPARE(points(chart.bars("exposed_comm")), (QVector<QPointF>{{0, 1.0}, {1, 1.5}, {2, 2.0}}));
  QCOMPARE(points(chart.bars("idle")), (QVector<QPointF>{{0, 0.75}, {1, 1.5}, {2, 2.25}}));
  QCOMPARE(points(chart.bars("optimizer"))[1].y(), 0.5);
  QCOMPARE(points(chart.bars("data"))[2].y(), 0.25);
  // Hidden communication is its own bar, not part of the stack.
  const QVector<QPointF> hidden = points(chart.bars("hidden_comm"));
  QCOMPARE(hidden.size(), 3);
  QCOMPARE(hidden[0].y(), 2.0);
  QCOMPARE(hidden[2].y(), 1.0);
  QVERIFY(hidden[1].x() > 1.25 && hidden[1].x() < 1.5);
  QCOMPARE(chart.bars("hidden_comm")->barAbove(), nullptr);
  QCOMPARE(chart.bars("hidden_comm")->barBelow(), nullptr);
  QCOMPARE(chart.bars("idle")->barBelow(), chart.bars("exposed_comm"));
  QCOMPARE(chart.bars("optimizer")->barBelow(), chart.bars("compute"));
  auto ticker = chart.plot()->yAxis->ticker().dynamicCast<QCPAxisTickerText>();
  QVERIFY(ticker);
  QCOMPARE(ticker->ticks().value(2), QStringLiteral("rank 2"));
  QVERIFY(chart.toolTipForRank(1).contains(QStringLiteral("rank 1")));
  QVERIFY(chart.toolTipForRank(1).contains(QStringLiteral("1.500 s")));  // hidden comm of rank 1
  QVERIFY(chart.toolTipForRank(5).isEmpty());
  // Longest stacked bar (rank 2: 8 + 0.5 + 0.25 + 2 + 2.25 = 13 s) fits the x range.
  QVERIFY(chart.plot()->xAxis->range().upper >= 13.0);
  chart.clear();
  QVERIFY(points(chart.bars("compute")).isEmpty());
}

namespace {
loom::analysis::PipelineStats two_stages() {
  loom::analysis::PipelineStats p;
  p.schedule = "gpipe";
  p.stages = 2;
  p.microbatches = 2;
  p.bubble_convention = "of stage step time";
  p.stages_stats.resize(2);
  p.stages_stats[0].stage = 0;
  p.stages_stats[0].busy_s = 1.25;
  p.stages_stats[0].bubble_fraction = 0.42;
  p.stages_stats[0].bubble_schedule = 0.30;
  p.stages_stats[0].bubble_theory = 0.40;
  p.stages_stats[0].bubble_textbook = 1.0 / 3.0;
  p.stages_stats[1].stage = 1;
  p.stages_stats[1].bubble_textbook = 1.0 / 3.0;  // nothing measured yet (NaN)
  p.warning = "stages are unbalanced";
  return p;
}
}  // namespace

// Two stages: each line has the measured bubble split into schedule, imbalance and the
// rest, with the textbook figure, and the imbalance warning follows; a single-stage run
// shows nothing.
void TestChartsWidgets::breakdownShowsPipelineBubbles() {
  BreakdownChart chart;
  loom::analysis::PipelineStats p = two_stages();
  chart.setPipeline(p);
  const QString text = chart.pipelineText();
  QVERIFY2(text.contains(QStringLiteral("stage 0: busy 1.250 s, bubble 42% of stage step time = schedule 30% + "
                                        "imbalance 10% + comm/jitter 2% (textbook 33%)")),
           qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("stage 1: busy 0.000 s, bubble n/a of stage step time = schedule n/a")),
           qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("Warning: stages are unbalanced")), qPrintable(text));
  QVERIFY2(!text.contains(QStringLiteral("negative")), qPrintable(text));  // none shown, none explained
  // A negative part is in the same unit and says what it means.
  p.stages_stats[0].bubble_theory = 0.27;
  p.stages_stats[0].bubble_fraction = 0.20;
  chart.setPipeline(p);
  const QString negative = chart.pipelineText();
  QVERIFY2(negative.contains(QStringLiteral("= schedule 30% + imbalance -3% + comm/jitter -7%")), qPrintable(negative));
  QVERIFY2(negative.contains(QStringLiteral("Negative imbalance: ")) && negative.contains("; comm/jitter: "),
           qPrintable(negative));
  // Five lines (two stages, the note, the warning) under the bars fit the Breakdown dock of
  // a 1280x720 window (850 x 195, in a resizable scroll area as the window docks it):
  // nothing to scroll.
  {
    auto* docked = new BreakdownChart;
    docked->setPipeline(p);
    const int scroll = docked_scroll(docked, QSize(850, 195));
    QVERIFY2(scroll == 0, qPrintable(QString("scrolls by %1 px").arg(scroll)));
  }
  p.stages = 1;
  p.stages_stats.resize(1);
  chart.setPipeline(p);
  QVERIFY(chart.pipelineText().isEmpty());
  p.stages = 2;
  p.stages_stats.resize(2);
  chart.setPipeline(p);
  chart.clear();
  QVERIFY(chart.pipelineText().isEmpty());
}

void TestChartsWidgets::stalenessEmptyShowsExplanation() {
  StalenessChart chart;
  QVERIFY(!chart.hasData());
  QCOMPARE(chart.shownText(), StalenessChart::kNoStalenessText);
  QCOMPARE(StalenessChart::kNoStalenessText,
           QStringLiteral("No gradient staleness: synchronous all-reduce applies every gradient to the parameters "
                          "it was computed from."));
  QCOMPARE(chart.workerCount(), 0);
  QVERIFY(!chart.plot()->axisRect(0)->axis(QCPAxis::atBottom)->visible());
  // The text must really be painted: count text-coloured pixels in the middle of the plot.
  chart.resize(900, 340);
  const QImage image = chart.grab().toImage();
  const QColor ink = chart.palette().color(QPalette::WindowText);
  int inked = 0;
  for (int y = 120; y < 220; ++y) {
    for (int x = 250; x < 650; ++x) {
      const QColor c = image.pixelColor(x, y);
      inked += std::abs(c.lightness() - ink.lightness()) < 60 ? 1 : 0;
    }
  }
  QVERIFY2(inked > 200, qPrintable(QStringLiteral("only %1 text pixels").arg(inked)));
  auto* title = qobject_cast<QCPTextElement*>(chart.plot()->plotLayout()->element(0, 0));
  QVERIFY(title);
  QCOMPARE(title->outerRect().width(), chart.plot()->width());  // centred over the whole plot
  chart.setSamples(staleness_samples());
  QVERIFY(chart.shownText().isEmpty());
  chart.clear();
  QCOMPARE(chart.shownText(), StalenessChart::kNoStalenessText);
}

void TestChartsWidgets::stalenessBarsAndLines() {
  StalenessChart chart;
  chart.setSamples(staleness_samples());
  QVERIFY(chart.hasData());
  QCOMPARE(chart.workerCount(), 3);
  // Worker 1: staleness step % 3 over 30 steps -> 10 each of 0, 1, 2.
  QCOMPARE(points(chart.histogramBars(0)), (QVector<QPointF>{{0, 10}, {1, 10}, {2, 10}}));
  QCOMPARE(chart.histogramBars(0)->brush().color(), loom::ui::device_color(1));
  QCOMPARE(points(chart.histogramBars(2)).size(), 5);  // worker 3: 3*step % 5 -> 0..4
  QCOMPARE(chart.stalenessGraph(1)->data()->size(), 30);
  QCOMPARE(points(chart.stalenessGraph(1))[3], QPointF(0.03, 2));  // worker 2, step 3 at 30 ms: 6 % 4
  QCOMPARE(chart.stalenessGraph(1)->keyAxis()->axisRect(), chart.plot()->axisRect(1));
  // Live appends arrive within the redraw delay.
  chart.appendSamples({{4, 0, 7, 0}});
  QTRY_COMPARE_WITH_TIMEOUT(chart.workerCount(), 4, 2000);
  QCOMPARE(points(chart.histogramBars(3)), (QVector<QPointF>{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {7, 1}}));
}

// A parameter-server run's updates as the store returns them: two workers on two servers
// whose clocks are 500 s apart. Worker 0 pushes 6 gradients (staleness 0,1,1,2,2,2),
// worker 2 pushes 4 (staleness 3 each), one gradient every 0.1 s.
void TestChartsWidgets::stalenessFromUpdates() {
  std::vector<loom::trace::UpdateRecord> updates;
  const int w0[] = {0, 1, 1, 2, 2, 2};
  for (int i = 0; i < 6; ++i) updates.push_back({0, 0, i, 0, 0, w0[i], 1'000'000'000 + i * 100'000'000LL});
  for (int i = 0; i < 4; ++i) updates.push_back({2, 1, i, 0, 0, 3, 500'000'000'000 + i * 100'000'000LL});
  StalenessChart chart;
  chart.setUpdates(updates);
  QCOMPARE(chart.workerCount(), 2);  // one bar series and one graph per worker rank
  QCOMPARE(chart.histogramBars(0)->name(), QString("worker 0"));
  QCOMPARE(chart.histogramBars(1)->name(), QString("worker 2"));
  QCOMPARE(points(chart.histogramBars(0)), (QVector<QPointF>{{0, 1}, {1, 2}, {2, 3}}));
  QCOMPARE(points(chart.histogramBars(1)), (QVector<QPointF>{{0, 0}, {1, 0}, {2, 0}, {3, 4}}));
  QCOMPARE(chart.stalenessGraph(0)->data()->size(), 6);
  QCOMPARE(chart.stalenessGraph(1)->data()->size(), 4);
  // Each server's clock counts from its first update, so the 500 s offset disappears.
  QCOMPARE(points(chart.stalenessGraph(1)).front(), QPointF(0, 3));
  QCOMPARE(points(chart.stalenessGraph(1)).back(), QPointF(0.3, 3));
  QCOMPARE(points(chart.stalenessGraph(0)).back(), QPointF(0.5, 2));
  // Live: a later batch of updates adds to the same series within the redraw delay.
  chart.appendUpdates({{2, 1, 4, 0, 0, 1, 500'400'000'000}});
  QTRY_COMPARE_WITH_TIMEOUT(chart.stalenessGraph(1)->data()->size(), 5, 2000);
  QCOMPARE(points(chart.histogramBars(1)), (QVector<QPointF>{{0, 0}, {1, 1}, {2, 0}, {3, 4}}));
}

void TestChartsWidgets::paletteChangeRecoloursAxes() {
  TrainingCharts charts;
  BreakdownChart breakdown;
  const QPalette dark = dark_palette();
  charts.setPalette(dark);
  breakdown.setPalette(dark);
  QCOMPARE(charts.lossPlot()->xAxis->tickLabelColor(), dark.color(QPalette::WindowText));
  QCOMPARE(charts.throughputPlot()->yAxis->labelColor(), dark.color(QPalette::WindowText));
  QCOMPARE(breakdown.plot()->axisRect()->backgroundBrush().color(), dark.color(QPalette::Base));
  QCOMPARE(breakdown.plot()->legend->textColor(), dark.color(QPalette::Text));
}

// Each format's file starts with its magic bytes; the PNG is twice the chart's size; an
// unknown extension is refused naming the ones that work, and nothing is written.
void TestChartsWidgets::chartsSaveAsPngSvgAndPdf() {
  TrainingCharts charts;
  charts.resize(700, 400);
  charts.appendMetrics(training_records());
  charts.replotNow();
  QTemporaryDir dir;
  const QMap<QString, QByteArray> magic{{"png", "\x89PNG"}, {"svg", "<?xml"}, {"pdf", "%PDF"}};
  QCOMPARE(loom::ui::charts::chart_formats(), (QStringList{"png", "svg", "pdf"}));
  for (const QString& format : loom::ui::charts::chart_formats()) {
    const QString path = dir.filePath("loss." + format);
    QCOMPARE(loom::ui::charts::save_chart(charts.lossPlot(), path), QString());
    QFile file(path);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QByteArray head = file.read(4096);
    QVERIFY2(head.startsWith(magic[format]), qPrintable(format + ": " + head.left(16).toHex()));
    if (format == "svg") QVERIFY(head.contains("<svg"));
  }
  const QImage png(dir.filePath("loss.png"));
  QCOMPARE(png.size(), charts.lossPlot()->size() * 2);
  const QString refused = loom::ui::charts::save_chart(charts.lossPlot(), dir.filePath("loss.gif"));
  QVERIFY2(refused.contains("unknown picture format") && refused.contains(".png, .svg, .pdf"), qPrintable(refused));
  QVERIFY(!QFile::exists(dir.filePath("loss.gif")));
  QVERIFY(!loom::ui::charts::save_chart(charts.lossPlot(), "/nonexistent-dir/loss.pdf").isEmpty());
}

namespace {
// 30 batches of 1..3 requests (10 of each size); every request 2 ms + 0.1 ms per id.
std::vector<MetricRecord> serving_records() {
  std::vector<MetricRecord> out;
  std::int64_t id = 0;
  for (int batch = 0; batch < 30; ++batch) {
    const int size = batch % 3 + 1;
    out.push_back({0, batch, batch * 10'000'000LL, "batch_size", double(size)});
    out.push_back({0, batch, batch * 10'000'000LL, "batch_compute_ms", 0.5});
    for (int i = 0; i < size; ++i, ++id)
      out.push_back({1, id, 5'000'000'000LL + batch * 10'000'000LL, "latency_ms", 2.0 + 0.1 * double(id)});
  }
  return out;
}
}  // namespace

void TestChartsWidgets::servingChartDrawsBatchesAndLatencies() {
  ServingChart chart;
  chart.resize(900, 340);
  chart.appendMetrics(training_records());  // a training run's metrics draw nothing here
  chart.replotNow();
  QVERIFY(!chart.hasData());
  chart.appendMetrics(serving_records());
  chart.replotNow();
  const std::vector<int> bins = chart.series().batch_histogram();
  QCOMPARE(bins, (std::vector<int>{0, 10, 10, 10}));
  QCOMPARE(chart.series().requests(), std::int64_t(60));
  // Nearest-rank over 2.0, 2.1, ... 7.9: the 30th and 57th values.
  QVERIFY2(chart.titleText().contains("60 requests") && chart.titleText().contains("p50 4.90 ms") &&
               chart.titleText().contains("p95 7.60 ms"),
           qPrintable(chart.titleText()));
  const QVector<QPointF> points = chart.series().latency_over_time();
  QCOMPARE(points.size(), qsizetype(60));
  QCOMPARE(points.front().x(), 0.0);  // seconds since the first reply
  QCOMPARE(points.back().x(), 0.29);
  save_png(chart, "charts-serving.png");
  chart.clear();
  QVERIFY(!chart.hasData());
}

void TestChartsWidgets::renderForReview() {
  TrainingCharts charts;
  charts.resize(900, 600);
  charts.appendMetrics(training_records());
  charts.replotNow();
  save_png(charts, "charts-training.png");
  charts.setXAxis(XAxis::Time);
  charts.setPalette(dark_palette());
  save_png(charts, "charts-training-dark-time.png");
  BreakdownChart breakdown;
  breakdown.resize(800, 320);
  breakdown.setBreakdown(breakdowns());
  breakdown.setPipeline(two_stages());
  save_png(breakdown, "charts-breakdown.png");
  breakdown.setPalette(dark_palette());
  save_png(breakdown, "charts-breakdown-dark.png");
  StalenessChart staleness;
  staleness.resize(900, 340);
  save_png(staleness, "charts-staleness-empty.png");
  staleness.setSamples(staleness_samples());
  save_png(staleness, "charts-staleness.png");
  QVERIFY(!charts.grab().isNull());
}

QTEST_MAIN(TestChartsWidgets)
#include "test_charts_widgets.moc"
