// A predicted scaling curve (the What-if dock): samples/s against devices on a log2 axis
// to 1,024, with the ideal line (the first point's samples/s times the devices ratio) and
// the parallel efficiency on the right axis.
#pragma once

#include <QWidget>

#include <vector>

class QCustomPlot;

namespace loom::ui::charts {

struct ScalingPoint {
  int devices = 0;
  double samples_per_s = 0;
  double efficiency = 0;  // 0..1
};

class ScalingChart : public QWidget {
  Q_OBJECT

 public:
  explicit ScalingChart(QWidget* parent = nullptr);
  // title: a tooltip (the dock's tab names the chart).
  void setPoints(const std::vector<ScalingPoint>& points, const QString& title);
  QCustomPlot* plot() const { return plot_; }
  int pointCount() const;

 protected:
  void changeEvent(QEvent* event) override;

 private:
  QCustomPlot* plot_ = nullptr;
};

}  // namespace loom::ui::charts
