// TrainingCharts: loss/accuracy and throughput plots fed by a MetricAccumulator. Redraws
// are coalesced by a single-shot timer: the first append after a redraw starts it, later
// appends ride along, and nothing runs while no records arrive.
#include "loom/ui/charts/training_charts.h"
#include "loom/ui/charts/chart_export.h"

#include <QBoxLayout>
#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QResizeEvent>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include "plot_style.h"

namespace loom::ui::charts {

namespace {

constexpr int kRedrawDelayMs = 150;

struct GraphSpec {
  const char* metric;
  const char* legend;
  bool right_axis;  // accuracy axis
  bool markers;     // sparse metrics (evaluations) need markers to show single points
};

constexpr GraphSpec kLossGraphs[] = {
    {"loss", "train loss", false, false},
    {"test_loss", "test loss", false, true},
    {"train_accuracy", "train accuracy", true, false},
    {"test_accuracy", "test accuracy", true, true},
};

QCPGraph* add_graph(QCustomPlot* plot, const GraphSpec& spec) {
  QCPAxis* value_axis = spec.right_axis ? plot->yAxis2 : plot->yAxis;
  QCPGraph* graph = plot->addGraph(plot->xAxis, value_axis);
  graph->setName(spec.legend);
  graph->setProperty("metric", QString::fromLatin1(spec.metric));
  QPen pen(detail::metric_color(spec.metric), spec.markers ? 1.5 : 2.0);
  if (spec.markers) pen.setStyle(Qt::DashLine);
  graph->setPen(pen);
  if (spec.markers) graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 6));
  return graph;
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
  // A legend entry for a metric the run never reported (test_loss) would only confuse.
  if (points.isEmpty()) {
    graph->removeFromLegend();
  } else if (!graph->parentPlot()->legend->hasItemWithPlottable(graph)) {
    graph->addToLegend();
  }
}

QString x_label(XAxis x) { return x == XAxis::Step ? QStringLiteral("step") : QStringLiteral("time (s)"); }

}  // namespace

TrainingCharts::TrainingCharts(QWidget* parent) : QWidget(parent) {
  x_choice_ = new QComboBox(this);
  x_choice_->addItem(tr("Step"));
  x_choice_->addItem(tr("Time (s)"));
  x_choice_->setToolTip(tr("Time is seconds since each rank reported its first step (ranks' clocks differ)."));
  connect(x_choice_, &QComboBox::currentIndexChanged, this,
          [this](int index) { setXAxis(index == 1 ? XAxis::Time : XAxis::Step); });

  auto* controls = new QHBoxLayout;
  controls->setContentsMargins(6, 4, 6, 0);
  controls->addWidget(new QLabel(tr("X axis:"), this));
  controls->addWidget(x_choice_);
  controls->addStretch(1);

  buildPlots();
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(controls);
  plots_layout_ = new QBoxLayout(QBoxLayout::TopToBottom);
  plots_layout_->addWidget(loss_plot_, 3);
  plots_layout_->addWidget(throughput_plot_, 2);
  layout->addLayout(plots_layout_, 1);

  timer_.setSingleShot(true);
  timer_.setInterval(kRedrawDelayMs);
  connect(&timer_, &QTimer::timeout, this, &TrainingCharts::replotNow);
  applyPalette();
}

// A bottom dock is wide and low: one above the other, the throughput chart had about 20
// px of plot and its tick labels overlapped. Side by side each chart gets the height.
void TrainingCharts::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  const bool wide = width() >= 2 * height();
  const auto direction = wide ? QBoxLayout::LeftToRight : QBoxLayout::TopToBottom;
  if (plots_layout_->direction() != direction) {
    plots_layout_->setDirection(direction);
    plots_layout_->setStretch(0, wide ? 1 : 3);
    plots_layout_->setStretch(1, wide ? 1 : 2);
  }
  // The loss legend's four entries in one row need about 560 px; narrower, two rows under
  // the plot, or where the plot is low one column beside it: in a 1280x720 window's dock
  // (864x185) two rows left the plot 36 px high, its tick labels on top of each other.
  const int loss_width = wide ? width() / 2 : width(), loss_height = wide ? height() : height() * 3 / 5;
  const bool beside = loss_width < 560 && loss_height < 260;
  const int columns = beside ? 1 : loss_width >= 560 ? 4 : 2;
  detail::place_legend(loss_plot_, beside);
  if (loss_plot_->legend->wrap() != columns) {
    loss_plot_->legend->setWrap(columns);
    loss_plot_->legend->setFillOrder(QCPLegend::foColumnsFirst);  // rearranges with the new wrap
    loss_plot_->replot(QCustomPlot::rpQueuedReplot);
  }
}

bool TrainingCharts::sideBySide() const { return plots_layout_->direction() == QBoxLayout::LeftToRight; }

void TrainingCharts::buildPlots() {
  loss_plot_ = new QCustomPlot(this);
  add_save_menu(loss_plot_);
  // The Training dock of a 1280x720 window holds about 170 px under its title: with the
  // axis choice above, 160 made it scroll 22 px.
  loss_plot_->setMinimumHeight(130);
  loss_plot_->yAxis->setLabel(tr("loss"));
  loss_plot_->yAxis2->setVisible(true);
  loss_plot_->yAxis2->setLabel(tr("accuracy"));
  loss_plot_->yAxis2->setRange(0, 1.02);  // accuracy is a fraction; a fixed scale compares runs
  for (const GraphSpec& spec : kLossGraphs) add_graph(loss_plot_, spec);
  detail::add_title(loss_plot_, tr("Loss and accuracy (mean over ranks)"));
  detail::put_legend_below(loss_plot_, 4);

  throughput_plot_ = new QCustomPlot(this);

  add_save_menu(throughput_plot_);
  throughput_plot_->setMinimumHeight(120);
  throughput_plot_->yAxis->setLabel(tr("samples/s"));
  QCPGraph* throughput = add_graph(throughput_plot_, {"samples_per_s", "samples/s since start", false, false});
  throughput->setBrush(QColor(0x00, 0x9e, 0x73, 40));
  detail::add_title(throughput_plot_, tr("Throughput (mean over ranks)"));
  detail::put_legend_below(throughput_plot_, 1);
  for (QCustomPlot* plot : {loss_plot_, throughput_plot_}) plot->xAxis->setLabel(x_label(x_));
}

QCPGraph* TrainingCharts::graph(const QString& metric) const {
  for (QCustomPlot* plot : {loss_plot_, throughput_plot_}) {
    for (int i = 0; i < plot->graphCount(); ++i) {
      if (plot->graph(i)->property("metric").toString() == metric) return plot->graph(i);
    }
  }
  return nullptr;
}

void TrainingCharts::appendMetrics(const std::vector<loom::trace::MetricRecord>& records) {
  accumulator_.append(records);
  if (accumulator_.revision() != drawn_revision_ && !timer_.isActive()) timer_.start();
}

void TrainingCharts::clear() {
  accumulator_.clear();
  replotNow();
}

void TrainingCharts::setXAxis(XAxis x) {
  if (x == x_) return;
  x_ = x;
  axis_changed_ = true;
  const int index = x == XAxis::Time ? 1 : 0;
  if (x_choice_->currentIndex() != index) x_choice_->setCurrentIndex(index);  // re-enters, returns early
  for (QCustomPlot* plot : {loss_plot_, throughput_plot_}) plot->xAxis->setLabel(x_label(x));
  replotNow();
}

void TrainingCharts::setStepLimit(std::optional<std::int64_t> max_step) {
  if (max_step == step_limit_) return;
  step_limit_ = max_step;
  axis_changed_ = true;  // redraw the curves, in the same frame
  if (!timer_.isActive()) timer_.start();
}

void TrainingCharts::replotNow() {
  timer_.stop();
  if (accumulator_.revision() != drawn_revision_ || axis_changed_) {
    updateGraphs();
    rescale();  // over the whole run, so a replay's curves grow into a fixed frame
    if (step_limit_) updateGraphs(*step_limit_);
    drawn_revision_ = accumulator_.revision();
    axis_changed_ = false;
  }
  loss_plot_->replot();
  throughput_plot_->replot();
}

void TrainingCharts::updateGraphs(std::int64_t max_step) {
  for (QCustomPlot* plot : {loss_plot_, throughput_plot_}) {
    for (int i = 0; i < plot->graphCount(); ++i) {
      QCPGraph* g = plot->graph(i);
      set_points(g, accumulator_.series(g->property("metric").toString().toStdString(), x_, max_step));
    }
  }
}

// Axes follow the data (no interactive zoom to preserve): x over every curve, loss and
// throughput from zero so their scale is honest, accuracy fixed at 0..1.
void TrainingCharts::rescale() {
  for (QCustomPlot* plot : {loss_plot_, throughput_plot_}) {
    bool found = false;
    QCPRange keys, values;
    for (int i = 0; i < plot->graphCount(); ++i) {
      QCPGraph* g = plot->graph(i);
      bool ok = false;
      const QCPRange k = g->getKeyRange(ok);
      if (!ok) continue;
      keys = found ? QCPRange(std::min(keys.lower, k.lower), std::max(keys.upper, k.upper)) : k;
      found = true;
      if (g->valueAxis() != plot->yAxis) continue;
      const QCPRange v = g->getValueRange(ok);
      if (ok) values.upper = std::max(values.upper, v.upper);
    }
    if (!found) continue;
    if (keys.size() <= 0) keys = QCPRange(keys.lower - 0.5, keys.upper + 0.5);  // a single point
    plot->xAxis->setRange(keys);
    plot->yAxis->setRange(0, values.upper > 0 ? values.upper * 1.05 : 1.0);
  }
}

void TrainingCharts::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::StyleChange) {
    applyPalette();
    loss_plot_->replot();
    throughput_plot_->replot();
  }
}

void TrainingCharts::applyPalette() {
  detail::apply_palette(loss_plot_, palette());
  detail::apply_palette(throughput_plot_, palette());
}

}  // namespace loom::ui::charts
