// Comparison of 2 to 6 stored runs, in a window of its own (opened from the Runs dock):
// a legend naming each run in its colour, the same colour in every tab, and four tabs:
//   Training   loss and test accuracy overlaid against step, training time or samples;
//   Timelines  one band per run, stacked, with one coupled zoom and pan, aligned so the
//              start of a chosen step coincides in every band (or each run's time zero);
//   Metrics    analysis::compare_runs side by side: each run's value, its ratio to the
//              first run (the baseline) and the better run marked; a target accuracy
//              adds the time and steps to reach it; below, where the step time went:
//              each run's critical path per step against A's, split into its parts;
//   Phases     the phase diff: median ms per step for each rank role and phase, and the
//              difference to the baseline.
// Each run is read by its own RunFeed (its own thread) and the comparison is computed on
// the thread pool with its own store connection, so the window stays responsive while
// large runs load.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <QWidget>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "loom/analysis/compare.h"
#include "loom/core/status.h"
#include "loom/ui/workbench/run_feed.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;
class QTabWidget;
class QTableView;

namespace loom::ui {

class CompareMetricsModel;
class ComparePhasesModel;

namespace timeline {
class KindLegend;
class TimelineView;
}  // namespace timeline
namespace charts {
class OverlayCharts;
}

class ComparisonWindow : public QWidget {
  Q_OBJECT

 public:
  enum class Align { StepStart, TimeZero };

  ComparisonWindow(const QString& dbPath, const QList<qint64>& runIds, QWidget* parent = nullptr);
  ~ComparisonWindow() override;

  const QList<qint64>& runIds() const { return ids_; }
  int bandCount() const { return static_cast<int>(bands_.size()); }
  timeline::TimelineView* band(int index) const { return bands_.at(std::size_t(index)).view; }
  charts::OverlayCharts* charts() const { return charts_; }
  QTableView* metricsTable() const { return metrics_; }
  QTableView* phaseTable() const { return phases_; }
  const CompareMetricsModel* metricsModel() const { return metric_model_; }
  const ComparePhasesModel* phaseModel() const { return phase_model_; }
  QTabWidget* tabs() const { return tabs_; }
  QString legendText() const;  // the runs as the legend names them, one per line

  // Aligns the bands: the start of `step` (in every run that has it) or each run's time
  // zero at the same place, band 0's window kept around it.
  void setAlignment(Align align, int step);
  Align alignment() const { return align_; }
  int alignStep() const;
  // Band `index`'s anchor under the current alignment, origin-relative ns; NaN while that
  // run has no such step.
  double anchorNs(int index) const;

  // Writes the comparison's report (.html or .pdf: report.h) with the current target
  // accuracy and alignment step; "" on success, else why not.
  QString saveReport(const QString& path);

  // Adds "time to target accuracy" rows (fraction 0..1); NaN removes them. Recomputes.
  void setTargetAccuracy(double fraction);

  bool runsLoaded() const;  // every feed delivered its whole run
  bool comparisonShown() const { return comparison_shown_; }
  QString comparisonError() const { return comparison_error_; }

 signals:
  void allRunsLoaded();
  void comparisonReady();  // the Metrics and Phases tabs were filled (or the error shown)

 private:
  struct Band {
    qint64 id = 0;
    RunFeed* feed = nullptr;
    timeline::TimelineView* view = nullptr;
    QLabel* title = nullptr;
    bool finished = false;
    std::map<int, bool> origin_set;  // per rank: its first Step start given to the charts
  };

  QWidget* createLegend();
  QWidget* createTimelinesTab();
  QLayout* createAlignControls();
  QWidget* createBand(int index);
  QWidget* createMetricsTab();
  void startFeeds(const QString& dbPath);
  void onBatch(int index, const FeedBatch& batch);
  void couple(int source);
  void fitBandHeights();
  void computeComparison();
  void showComparison(const loom::Expected<loom::analysis::Comparison>& result);
  void showMetricsNote(const loom::analysis::Comparison& c);
  QString stepTimeSplit(const loom::analysis::Comparison& c) const;

  QString db_path_;
  QList<qint64> ids_;
  std::vector<Band> bands_;
  charts::OverlayCharts* charts_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  CompareMetricsModel* metric_model_ = nullptr;  // the tables' contents (ui/models, tested headless)
  ComparePhasesModel* phase_model_ = nullptr;
  QTableView* metrics_ = nullptr;
  QTableView* phases_ = nullptr;
  QLabel* metrics_note_ = nullptr;
  QLabel* step_split_ = nullptr;  // where the step time went, per run against run A
  timeline::KindLegend* kinds_ = nullptr;
  QComboBox* align_choice_ = nullptr;
  QSpinBox* align_step_ = nullptr;
  QDoubleSpinBox* target_ = nullptr;
  QLabel* legend_ = nullptr;
  QStringList legend_html_, legend_lines_;  // per run: as drawn, and as legendText() says it
  Align align_ = Align::StepStart;
  bool coupling_ = false;  // a coupled move in progress: the bands it moves must not echo it
  bool aligned_once_ = false;
  bool comparison_shown_ = false;
  QString comparison_error_;
  quint64 compare_generation_ = 0;
  double target_accuracy_ = std::nan("");
};

}  // namespace loom::ui
