// OverlayCharts: one MetricAccumulator per run, graph i of each plot drawing run i.
#include "loom/ui/charts/overlay_charts.h"
#include "loom/ui/charts/chart_export.h"

#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include <algorithm>

#include <qcustomplot.h>

#include "plot_style.h"

namespace loom::ui::charts {

namespace {

QString x_label(XAxis x) {
  switch (x) {
    case XAxis::Time: return QStringLiteral("training time (s, setup excluded)");
    case XAxis::Samples: return QStringLiteral("samples processed");
    case XAxis::Step: break;
  }
  return QStringLiteral("step");
}

void set_points(QCPGraph* graph, const QVector<QPointF>& points) {
  QVector<double> keys, values;
  keys.reserve(points.size());
  values.reserve(points.size());
  for (const QPointF& p : points) {
    keys.append(p.x());
    values.append(p.y());
  }
  graph->setData(keys, values, true);
}

}  // namespace

OverlayCharts::OverlayCharts(QWidget* parent) : QWidget(parent) {
  x_choice_ = new QComboBox(this);
  x_choice_->addItem(tr("Step"), int(XAxis::Step));
  x_choice_->addItem(tr("Training time (s)"), int(XAxis::Time));
  x_choice_->addItem(tr("Samples processed"), int(XAxis::Samples));
  x_choice_->setToolTip(
      tr("Training time: seconds since each rank's first step, setup left out.\n"
         "Samples: samples every replica processed together, so different batch sizes line up."));
  connect(x_choice_, &QComboBox::currentIndexChanged, this,
          [this](int index) { setXAxis(XAxis(x_choice_->itemData(index).toInt())); });
  auto* controls = new QHBoxLayout;
  controls->setContentsMargins(6, 4, 6, 0);
  controls->addWidget(new QLabel(tr("X axis:"), this));
  controls->addWidget(x_choice_);
  controls->addStretch(1);

  buildPlots();
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(controls);
  layout->addWidget(loss_plot_, 1);
  layout->addWidget(accuracy_plot_, 1);
  applyPalette();
}

void OverlayCharts::buildPlots() {
  loss_plot_ = new QCustomPlot(this);
  add_save_menu(loss_plot_);
  loss_plot_->setMinimumHeight(150);
  loss_plot_->yAxis->setLabel(tr("training loss"));
  detail::add_title(loss_plot_, tr("Training loss (mean over ranks)"));
  detail::put_legend_below(loss_plot_, 3);
  accuracy_plot_ = new QCustomPlot(this);
  add_save_menu(accuracy_plot_);
  accuracy_plot_->setMinimumHeight(150);
  accuracy_plot_->yAxis->setLabel(tr("test accuracy"));
  accuracy_plot_->yAxis->setRange(0, 1.02);  // a fraction: one fixed scale compares runs honestly
  accuracy_plot_->legend->setVisible(false);  // the runs' colours are named above
  detail::add_title(accuracy_plot_, tr("Test accuracy"));
  for (QCustomPlot* plot : {loss_plot_, accuracy_plot_}) plot->xAxis->setLabel(x_label(x_));
}

namespace {

// Runs that train the same maths (one process and its data-parallel twin, GPipe and 1F1B)
// give the same curve: each later run is drawn dashed over the earlier ones so that both
// stay visible where they coincide.
Qt::PenStyle run_pen_style(std::size_t index) {
  constexpr Qt::PenStyle styles[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine, Qt::DashDotDotLine};
  return styles[index % std::size(styles)];
}

}  // namespace

void OverlayCharts::setRuns(const std::vector<Run>& runs) {
  runs_.assign(runs.size(), MetricAccumulator{});
  loss_plot_->clearGraphs();
  accuracy_plot_->clearGraphs();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    runs_[i].setSamplesPerStep(runs[i].samples_per_step);
    QCPGraph* loss = loss_plot_->addGraph();
    loss->setName(runs[i].label);
    loss->setPen(QPen(runs[i].color, 2.0, run_pen_style(i)));
    QCPGraph* accuracy = accuracy_plot_->addGraph();
    accuracy->setName(runs[i].label);
    accuracy->setPen(QPen(runs[i].color, 1.5, run_pen_style(i)));
    accuracy->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));  // evaluations are sparse
  }
  replotNow();
}

void OverlayCharts::appendMetrics(int run, const std::vector<loom::trace::MetricRecord>& records) {
  if (run < 0 || run >= int(runs_.size())) return;
  runs_[std::size_t(run)].append(records);
}

void OverlayCharts::setOrigin(int run, int rank, std::int64_t t_ns) {
  if (run < 0 || run >= int(runs_.size())) return;
  runs_[std::size_t(run)].setOrigin(rank, t_ns);
}

void OverlayCharts::setXAxis(XAxis x) {
  if (x == x_) return;
  x_ = x;
  const int index = x_choice_->findData(int(x));
  if (x_choice_->currentIndex() != index) x_choice_->setCurrentIndex(index);  // re-enters, returns early
  for (QCustomPlot* plot : {loss_plot_, accuracy_plot_}) plot->xAxis->setLabel(x_label(x));
  replotNow();
}

QCPGraph* OverlayCharts::graph(int run, const QString& metric) const {
  QCustomPlot* plot = metric == QLatin1String("loss")            ? loss_plot_
                      : metric == QLatin1String("test_accuracy") ? accuracy_plot_
                                                                  : nullptr;
  if (!plot || run < 0 || run >= plot->graphCount()) return nullptr;
  return plot->graph(run);
}

void OverlayCharts::replotNow() {
  for (std::size_t i = 0; i < runs_.size(); ++i) {
    set_points(loss_plot_->graph(int(i)), runs_[i].series("loss", x_));
    set_points(accuracy_plot_->graph(int(i)), runs_[i].series("test_accuracy", x_));
  }
  rescale();
  loss_plot_->replot();
  accuracy_plot_->replot();
}

// x over every run's curves (the same range in both plots, so they read as one), loss from
// zero so its scale is honest, accuracy fixed at 0..1.
void OverlayCharts::rescale() {
  bool found = false;
  QCPRange keys;
  double top = 0;
  for (QCustomPlot* plot : {loss_plot_, accuracy_plot_}) {
    for (int i = 0; i < plot->graphCount(); ++i) {
      bool ok = false;
      const QCPRange k = plot->graph(i)->getKeyRange(ok);
      if (!ok) continue;
      keys = found ? QCPRange(std::min(keys.lower, k.lower), std::max(keys.upper, k.upper)) : k;
      found = true;
      if (plot != loss_plot_) continue;
      const QCPRange v = plot->graph(i)->getValueRange(ok);
      if (ok) top = std::max(top, v.upper);
    }
  }
  if (!found) return;
  if (keys.size() <= 0) keys = QCPRange(keys.lower - 0.5, keys.upper + 0.5);  // a single point
  for (QCustomPlot* plot : {loss_plot_, accuracy_plot_}) plot->xAxis->setRange(keys);
  loss_plot_->yAxis->setRange(0, top > 0 ? top * 1.05 : 1.0);
}

void OverlayCharts::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::StyleChange) {
    applyPalette();
    loss_plot_->replot();
    accuracy_plot_->replot();
  }
}

void OverlayCharts::applyPalette() {
  detail::apply_palette(loss_plot_, palette());
  detail::apply_palette(accuracy_plot_, palette());
}

}  // namespace loom::ui::charts
