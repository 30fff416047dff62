// The run view's charts, drawn with QCustomPlot:
//   TrainingCharts  loss and accuracy over step or time, and throughput; fed live.
//   BreakdownChart  per-rank stacked bars of where the wall time went.
//   StalenessChart  gradient staleness of asynchronous training (histogram and curve).
//   ServingChart    a serving run's batch sizes and request latencies.
// The data work lives in chart_series.h (tested without a display); these classes only
// move it into plots and keep them readable on light and dark palettes.
#pragma once

#include <QTimer>
#include <QWidget>

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "loom/analysis/breakdown.h"
#include "loom/analysis/stage_stats.h"
#include "loom/trace/records.h"
#include "loom/ui/charts/chart_series.h"

class QBoxLayout;
class QComboBox;
class QResizeEvent;
class QLabel;
class QCustomPlot;
class QCPGraph;
class QCPBars;
class QCPBarsGroup;
class QCPItemText;
class QCPTextElement;
class QMouseEvent;

namespace loom::ui::charts {

// Loss (left axis) with train/test accuracy (right axis, 0..1) and throughput
// (samples/s), both against step or seconds (a combo box): side by side where the widget
// is at least twice as wide as it is high (a bottom dock), else one above the other.
// appendMetrics only marks
// the charts dirty; a single-shot 150 ms timer redraws, so a live run redraws at most ~7
// times a second however often records arrive, and an idle one not at all.
class TrainingCharts : public QWidget {
  Q_OBJECT

 public:
  explicit TrainingCharts(QWidget* parent = nullptr);

  void appendMetrics(const std::vector<loom::trace::MetricRecord>& records);
  void clear();
  void setXAxis(XAxis x);
  XAxis xAxis() const { return x_; }
  // Replay: draw only steps up to max_step, in the frame of the whole run (nullopt: all).
  void setStepLimit(std::optional<std::int64_t> max_step);
  void replotNow();

  const MetricAccumulator& accumulator() const { return accumulator_; }
  MetricAccumulator& accumulator() { return accumulator_; }  // e.g. setOrigin before appending
  QCustomPlot* lossPlot() const { return loss_plot_; }
  QCustomPlot* throughputPlot() const { return throughput_plot_; }
  // The graph drawing a metric ("loss", "test_loss", "train_accuracy", "test_accuracy",
  // "samples_per_s"), nullptr for a metric these charts do not show.
  QCPGraph* graph(const QString& metric) const;

  bool sideBySide() const;

 protected:
  void changeEvent(QEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  void buildPlots();
  void updateGraphs(std::int64_t max_step = std::numeric_limits<std::int64_t>::max());
  void rescale();
  void applyPalette();

  MetricAccumulator accumulator_;
  XAxis x_ = XAxis::Step;
  std::uint64_t drawn_revision_ = ~std::uint64_t{0};
  bool axis_changed_ = true;
  std::optional<std::int64_t> step_limit_;
  QTimer timer_;
  QComboBox* x_choice_ = nullptr;
  QCustomPlot* loss_plot_ = nullptr;
  QCustomPlot* throughput_plot_ = nullptr;
  QBoxLayout* plots_layout_ = nullptr;
};

// One horizontal bar per rank ("rank N"), stacked from segments that do not overlap:
// compute, optimizer, data, exposed communication, idle/bubble; their sum is about the
// rank's wall time. Communication hidden behind work ran during the compute/optimizer/data
// segments, so stacking it would count that time twice: it is a thin separate bar just
// under each rank's bar, and the tooltip explains it. A pipelined run (more than one
// stage) also gets a line per stage under the plot with its measured bubble next to the
// theory for its schedule ("stage 1: bubble 31% (theory 33%, of wall time)"), so the
// idle segment can be read against what the schedule must leave idle.
class BreakdownChart : public QWidget {
  Q_OBJECT

 public:
  explicit BreakdownChart(QWidget* parent = nullptr);

  void setBreakdown(const std::vector<loom::analysis::RankBreakdown>& ranks);
  // Hidden for a single stage: its theory is 0 and the idle segment already tells it.
  void setPipeline(const loom::analysis::PipelineStats& stats);
  void clear();  // both the bars and the stage lines
  QString pipelineText() const;  // the stage lines as shown, "" when hidden
  QCustomPlot* plot() const { return plot_; }
  // The bars of one segment: "compute", "optimizer", "data", "exposed_comm", "idle",
  // "hidden_comm"; nullptr for another name. Keys are ranks (hidden_comm: rank + offset).
  QCPBars* bars(const QString& segment) const;
  QString toolTipForRank(int rank) const;  // empty for a rank not shown
  // The tooltip at a point of the plot: a legend entry explains its category (from the
  // glossary); a bar gives the rank's figures and explains the category under the point.
  QString toolTipAt(const QPoint& pos) const;
  // What a segment ("compute", ..., "hidden_comm") counts; "" for an unknown name.
  static QString segmentExplanation(const QString& segment);
  int legendColumns() const;  // more than one where the plot is too short for one column

 protected:
  void changeEvent(QEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void buildPlot();
  void fitLegend(int height);
  void applyPalette();
  void showToolTip(QMouseEvent* event);
  QString segmentAt(int rank, double seconds, bool hiddenBar) const;

  std::vector<loom::analysis::RankBreakdown> ranks_;
  QCustomPlot* plot_ = nullptr;
  QLabel* pipeline_label_ = nullptr;
};

// Left: histogram of staleness per worker (grouped bars in device colours); right:
// staleness over time per worker (lines; x = seconds since the first update, see
// staleness_over_time). Without samples (synchronous training) the plot says why instead
// of showing empty axes. Fed with a run's parameter-server updates (setUpdates for a
// whole run, appendUpdates live) or with samples directly.
class StalenessChart : public QWidget {
  Q_OBJECT

 public:
  // The text shown without samples (the plot breaks it into lines).
  static const QString kNoStalenessText;

  explicit StalenessChart(QWidget* parent = nullptr);

  void setSamples(std::vector<StalenessSample> samples);     // redraws now
  void appendSamples(const std::vector<StalenessSample>& samples);  // redraws within 150 ms
  void setUpdates(const std::vector<loom::trace::UpdateRecord>& updates);     // redraws now
  void appendUpdates(const std::vector<loom::trace::UpdateRecord>& updates);  // within 150 ms
  void clear();
  bool hasData() const { return !samples_.empty(); }
  void replotNow();

  QCustomPlot* plot() const { return plot_; }
  QString shownText() const;  // the explanatory text when visible (single-spaced), else ""
  int workerCount() const { return static_cast<int>(hist_bars_.size()); }
  QCPBars* histogramBars(int index) const;  // index into the workers, ascending
  QCPGraph* stalenessGraph(int index) const;

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void buildPlot();
  void rebuild();
  void addWorkerPlottables();
  void setEmptyState(bool empty);
  void applyPalette();

  std::vector<StalenessSample> samples_;
  QTimer timer_;
  QCustomPlot* plot_ = nullptr;
  QCPItemText* empty_text_ = nullptr;
  QCPBarsGroup* group_ = nullptr;  // places the workers' bars side by side
  std::vector<QCPBars*> hist_bars_;
  std::vector<QCPGraph*> lines_;
};

// A serving run (plan section "serve"): the batch-size histogram on the left, each
// request's latency over time on the right with the p50/p95/p99 in the title. Fed the
// run's metrics like TrainingCharts; redraws within 150 ms of new ones.
class ServingChart : public QWidget {
  Q_OBJECT

 public:
  static const QString kNotServingText;

  explicit ServingChart(QWidget* parent = nullptr);
  void appendMetrics(const std::vector<loom::trace::MetricRecord>& records);
  void clear();
  void replotNow();
  bool hasData() const { return !series_.empty(); }
  const ServingSeries& series() const { return series_; }
  QCustomPlot* plot() const { return plot_; }
  QString titleText() const;

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void buildPlot();
  void rebuild();

  ServingSeries series_;
  QTimer timer_;
  QCustomPlot* plot_ = nullptr;
  QCPBars* bars_ = nullptr;
  QCPGraph* latency_ = nullptr;
  QCPTextElement* title_ = nullptr;
  QCPItemText* empty_text_ = nullptr;
};

}  // namespace loom::ui::charts
