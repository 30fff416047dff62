// The comparison's training curves: training loss (top) and test accuracy (below) of 2 to 6
// runs overlaid, each run in its own colour (run_color), against step, training time
// (seconds since each rank's first step: setup is left out) or samples processed (every
// replica's, so runs of different batch sizes line up on the data they saw). One legend
// names the runs; both plots share it since a run has the same colour in each. The first
// run's lines are solid, later ones dashed or dotted, so curves that coincide (runs that
// compute the same maths) both stay visible.
#pragma once

#include <QColor>
#include <QString>
#include <QWidget>

#include <cstdint>
#include <vector>

#include "loom/trace/records.h"
#include "loom/ui/charts/chart_series.h"

class QComboBox;
class QCustomPlot;
class QCPGraph;

namespace loom::ui::charts {

class OverlayCharts : public QWidget {
  Q_OBJECT

 public:
  struct Run {
    QString label;  // "#12 mlp-gpipe"
    QColor color;
    double samples_per_step = 1;  // global batch (XAxis::Samples)
  };

  explicit OverlayCharts(QWidget* parent = nullptr);

  // Replaces the runs (and drops every curve).
  void setRuns(const std::vector<Run>& runs);
  void appendMetrics(int run, const std::vector<loom::trace::MetricRecord>& records);
  // Where training time starts for one rank of one run (its first Step span's start).
  void setOrigin(int run, int rank, std::int64_t t_ns);
  void setXAxis(XAxis x);
  XAxis xAxis() const { return x_; }
  void replotNow();

  QCustomPlot* lossPlot() const { return loss_plot_; }
  QCustomPlot* accuracyPlot() const { return accuracy_plot_; }
  // metric: "loss" or "test_accuracy"; nullptr for an unknown run or metric.
  QCPGraph* graph(int run, const QString& metric) const;

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void buildPlots();
  void applyPalette();
  void rescale();

  std::vector<MetricAccumulator> runs_;
  XAxis x_ = XAxis::Step;
  QComboBox* x_choice_ = nullptr;
  QCustomPlot* loss_plot_ = nullptr;
  QCustomPlot* accuracy_plot_ = nullptr;
};

}  // namespace loom::ui::charts
