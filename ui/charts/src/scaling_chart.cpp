// ScalingChart (see scaling_chart.h).
#include "loom/ui/charts/scaling_chart.h"

#include <QEvent>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include <algorithm>

#include "loom/ui/charts/chart_export.h"
#include "plot_style.h"

namespace loom::ui::charts {

ScalingChart::ScalingChart(QWidget* parent) : QWidget(parent) {
  plot_ = new QCustomPlot(this);
  add_save_menu(plot_);
  plot_->setMinimumHeight(100);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
  plot_->xAxis->setScaleType(QCPAxis::stLogarithmic);
  auto ticker = QSharedPointer<QCPAxisTickerLog>::create();
  ticker->setLogBase(2);
  plot_->xAxis->setTicker(ticker);
  plot_->xAxis->setNumberFormat("f");
  plot_->xAxis->setNumberPrecision(0);
  plot_->xAxis->setLabel(tr("devices"));
  plot_->yAxis->setLabel(tr("samples/s"));
  // Log-log: linear scaling is a straight line, and 1 and 1,024 devices both read.
  plot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
  plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  plot_->yAxis->setNumberFormat("gb");
  plot_->yAxis2->setVisible(true);
  plot_->yAxis2->setLabel(tr("efficiency %"));
  plot_->yAxis2->setRange(0, 105);
  QCPGraph* measured = plot_->addGraph();
  measured->setName(tr("predicted samples/s"));
  measured->setPen(QPen(detail::metric_color("samples_per_s"), 2));
  measured->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
  QCPGraph* ideal = plot_->addGraph();
  ideal->setName(tr("ideal (linear)"));
  ideal->setPen(QPen(Qt::gray, 1, Qt::DashLine));
  QCPGraph* efficiency = plot_->addGraph(plot_->xAxis, plot_->yAxis2);
  efficiency->setName(tr("efficiency"));
  efficiency->setPen(QPen(detail::metric_color("test_accuracy"), 1.5));
  // Inside the plot, top left where the curves start low: a low dock has no room beside it.
  plot_->legend->setVisible(true);
  QFont small = plot_->font();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  plot_->legend->setFont(small);
  plot_->legend->setRowSpacing(0);
  plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  detail::apply_palette(plot_, palette());
}

int ScalingChart::pointCount() const { return plot_->graph(0)->dataCount(); }

void ScalingChart::setPoints(const std::vector<ScalingPoint>& points, const QString& title) {
  QVector<double> devices, rate, ideal, efficiency;
  for (const ScalingPoint& p : points) {
    devices << p.devices;
    rate << p.samples_per_s;
    ideal << (points.front().samples_per_s * p.devices / std::max(1, points.front().devices));
    efficiency << 100 * p.efficiency;
  }
  plot_->graph(0)->setData(devices, rate, true);
  plot_->graph(1)->setData(devices, ideal, true);
  plot_->graph(2)->setData(devices, efficiency, true);
  setToolTip(title);
  const double last = devices.isEmpty() ? 2 : std::max(2.0, devices.back());
  plot_->xAxis->setRange(0.8, last * 1.25);
  double top = 1, bottom = 1;
  for (double v : rate) top = std::max(top, v);
  for (double v : ideal) top = std::max(top, v);
  if (!rate.isEmpty()) bottom = *std::min_element(rate.begin(), rate.end());
  plot_->yAxis->setRange(std::max(1e-3, bottom / 2), top * 1.5);
  plot_->replot();
}

void ScalingChart::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::StyleChange) {
    detail::apply_palette(plot_, palette());
    plot_->replot();
  }
}

}  // namespace loom::ui::charts
