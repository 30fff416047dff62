// ServingChart (training_charts.h): two axis rects side by side under one title row, the
// batch-size bars left and the latency dots right. Rebuilt from ServingSeries on each
// redraw; a run serves a few thousand requests at most, so redrawing all is cheap.
#include <QEvent>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include "loom/ui/charts/chart_export.h"
#include "loom/ui/charts/training_charts.h"
#include "plot_style.h"

namespace loom::ui::charts {

const QString ServingChart::kNotServingText =
    QStringLiteral("Serving figures appear for a plan with a \"serve\" section\n(try Examples > Serving).");

namespace {
constexpr int kRedrawDelayMs = 150;
const QColor kBatchColor(0x00, 0x72, 0xb2);
const QColor kLatencyColor(0xd5, 0x5e, 0x00);
}  // namespace

ServingChart::ServingChart(QWidget* parent) : QWidget(parent) {
  buildPlot();
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
  timer_.setSingleShot(true);
  timer_.setInterval(kRedrawDelayMs);
  connect(&timer_, &QTimer::timeout, this, &ServingChart::replotNow);
  replotNow();
}

void ServingChart::buildPlot() {
  plot_ = new QCustomPlot(this);
  add_save_menu(plot_);
  plot_->setMinimumHeight(140);
  QCPAxisRect* left = plot_->axisRect();
  left->axis(QCPAxis::atBottom)->setLabel(tr("requests in a batch"));
  left->axis(QCPAxis::atLeft)->setLabel(tr("batches"));
  QSharedPointer<QCPAxisTickerFixed> whole(new QCPAxisTickerFixed);  // batch sizes are whole requests
  whole->setTickStep(1.0);
  whole->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  left->axis(QCPAxis::atBottom)->setTicker(whole);
  auto* right = new QCPAxisRect(plot_);
  right->axis(QCPAxis::atBottom)->setLabel(tr("seconds since the first reply"));
  right->axis(QCPAxis::atLeft)->setLabel(tr("latency (ms)"));
  plot_->plotLayout()->take(left);
  plot_->plotLayout()->simplify();
  auto* rects = new QCPLayoutGrid;
  plot_->plotLayout()->addElement(0, 0, rects);
  rects->addElement(0, 0, left);
  rects->addElement(0, 1, right);
  plot_->plotLayout()->insertRow(0);
  QFont bold = plot_->font();
  bold.setBold(true);
  title_ = new QCPTextElement(plot_, tr("Serving"), bold);
  plot_->plotLayout()->addElement(0, 0, title_);
  bars_ = new QCPBars(left->axis(QCPAxis::atBottom), left->axis(QCPAxis::atLeft));
  bars_->setBrush(kBatchColor);
  bars_->setPen(QPen(kBatchColor.darker(130), 0));
  bars_->setWidth(0.8);
  latency_ = plot_->addGraph(right->axis(QCPAxis::atBottom), right->axis(QCPAxis::atLeft));
  latency_->setLineStyle(QCPGraph::lsNone);
  latency_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, kLatencyColor, 3));
  empty_text_ = new QCPItemText(plot_);
  empty_text_->setClipToAxisRect(false);
  empty_text_->position->setType(QCPItemPosition::ptViewportRatio);
  empty_text_->position->setCoords(0.5, 0.5);
  empty_text_->setPositionAlignment(Qt::AlignCenter);
  empty_text_->setTextAlignment(Qt::AlignCenter);
  empty_text_->setText(kNotServingText);
}

void ServingChart::appendMetrics(const std::vector<loom::trace::MetricRecord>& records) {
  const bool was_empty = series_.empty();
  series_.append(records);
  if (series_.empty() == was_empty && was_empty) return;  // a training run's metrics: nothing to draw
  if (!timer_.isActive()) timer_.start();
}

void ServingChart::clear() {
  series_.clear();
  replotNow();
}

void ServingChart::replotNow() {
  timer_.stop();
  rebuild();
  detail::apply_palette(plot_, palette());
  plot_->replot();
}

QString ServingChart::titleText() const { return title_->text(); }

void ServingChart::rebuild() {
  const bool empty = series_.empty();
  empty_text_->setVisible(empty);
  for (QCPAxisRect* rect : plot_->axisRects())
    for (QCPAxis* axis : rect->axes())
      axis->setVisible(!empty && (axis->axisType() == QCPAxis::atBottom || axis->axisType() == QCPAxis::atLeft));
  QVector<double> sizes, counts;
  const std::vector<int> bins = series_.batch_histogram();
  int most = 1;
  for (std::size_t b = 1; b < bins.size(); ++b) {
    sizes.append(double(b));
    counts.append(bins[b]);
    most = std::max(most, bins[b]);
  }
  bars_->setData(sizes, counts, true);
  QVector<double> seconds, ms;
  for (const QPointF& p : series_.latency_over_time()) {
    seconds.append(p.x());
    ms.append(p.y());
  }
  latency_->setData(seconds, ms);
  plot_->axisRect(0)->axis(QCPAxis::atBottom)->setRange(0.4, std::max<double>(2, double(bins.size())) - 0.4);
  plot_->axisRect(0)->axis(QCPAxis::atLeft)->setRange(0, most * 1.08);
  latency_->rescaleAxes();
  QCPAxis* latency_axis = plot_->axisRect(1)->axis(QCPAxis::atLeft);
  latency_axis->setRange(0, std::max(1.0, latency_axis->range().upper * 1.08));  // the slowest stays visible
  const auto p = series_.latency_ms();
  title_->setText(empty ? tr("Serving")
                        : tr("Serving: %1 requests, latency p50 %2 ms \u00b7 p95 %3 ms \u00b7 p99 %4 ms")
                              .arg(series_.requests())
                              .arg(p.p50, 0, 'f', 2)
                              .arg(p.p95, 0, 'f', 2)
                              .arg(p.p99, 0, 'f', 2));
}

void ServingChart::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::StyleChange) replotNow();
}

}  // namespace loom::ui::charts
