// StalenessChart: one QCustomPlot with two axis rects (histogram left, staleness over
// time right), one bar set and one line per worker in its device colour. Plottables are
// rebuilt from the samples on each redraw; workers are few and samples a few per step, so
// rebuilding is cheaper to reason about than patching.
#include "loom/ui/charts/training_charts.h"

#include <QEvent>
#include <QVBoxLayout>

#include <qcustomplot.h>

#include "loom/ui/charts/chart_export.h"
#include "loom/ui/colors.h"
#include "plot_style.h"

namespace loom::ui::charts {

const QString StalenessChart::kNoStalenessText = QStringLiteral(
    "No gradient staleness: synchronous all-reduce applies every gradient to the parameters it was computed from.");

namespace {

constexpr int kRedrawDelayMs = 150;

// The empty-state text, broken where a reader pauses so it fits a narrow plot.
QString wrapped_empty_text() {
  return QStringLiteral(
      "No gradient staleness:\nsynchronous all-reduce applies every gradient\nto the parameters it was computed from.");
}

void set_points(QCPAbstractPlottable* plottable, const QVector<double>& keys, const QVector<double>& values) {
  if (auto* bars = qobject_cast<QCPBars*>(plottable)) bars->setData(keys, values, true);
  if (auto* graph = qobject_cast<QCPGraph*>(plottable)) graph->setData(keys, values, true);
}

}  // namespace

StalenessChart::StalenessChart(QWidget* parent) : QWidget(parent) {
  buildPlot();
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
  timer_.setSingleShot(true);
  timer_.setInterval(kRedrawDelayMs);
  connect(&timer_, &QTimer::timeout, this, &StalenessChart::replotNow);
  rebuild();
  applyPalette();
}

void StalenessChart::buildPlot() {
  plot_ = new QCustomPlot(this);
  add_save_menu(plot_);
  plot_->setMinimumHeight(140);
  QCPAxisRect* left = plot_->axisRect();
  left->axis(QCPAxis::atBottom)->setLabel(tr("staleness (parameter versions)"));
  left->axis(QCPAxis::atLeft)->setLabel(tr("gradients"));
  left->axis(QCPAxis::atBottom)->ticker()->setTickStepStrategy(QCPAxisTicker::tssReadability);
  auto* right = new QCPAxisRect(plot_);
  right->axis(QCPAxis::atBottom)->setLabel(tr("seconds since first update"));
  right->axis(QCPAxis::atLeft)->setLabel(tr("staleness"));
  // Both rects go into a nested grid so the title row above spans them (grids have no
  // column spans).
  plot_->plotLayout()->take(left);
  plot_->plotLayout()->simplify();
  auto* rects = new QCPLayoutGrid;
  plot_->plotLayout()->addElement(0, 0, rects);
  rects->addElement(0, 0, left);
  rects->addElement(0, 1, right);
  detail::add_title(plot_, tr("Gradient staleness per worker"));
  detail::put_legend_below(plot_, 8);
  group_ = new QCPBarsGroup(plot_);
  empty_text_ = new QCPItemText(plot_);
  empty_text_->setClipToAxisRect(false);
  empty_text_->position->setType(QCPItemPosition::ptViewportRatio);
  empty_text_->position->setCoords(0.5, 0.5);
  empty_text_->setPositionAlignment(Qt::AlignCenter);
  empty_text_->setTextAlignment(Qt::AlignCenter);
  empty_text_->setText(wrapped_empty_text());
}

QCPBars* StalenessChart::histogramBars(int index) const {
  return index >= 0 && index < workerCount() ? hist_bars_[static_cast<std::size_t>(index)] : nullptr;
}

QCPGraph* StalenessChart::stalenessGraph(int index) const {
  return index >= 0 && index < static_cast<int>(lines_.size()) ? lines_[static_cast<std::size_t>(index)] : nullptr;
}

void StalenessChart::setSamples(std::vector<StalenessSample> samples) {
  samples_ = std::move(samples);
  replotNow();
}

void StalenessChart::appendSamples(const std::vector<StalenessSample>& samples) {
  if (samples.empty()) return;
  samples_.insert(samples_.end(), samples.begin(), samples.end());
  if (!timer_.isActive()) timer_.start();
}

void StalenessChart::setUpdates(const std::vector<loom::trace::UpdateRecord>& updates) {
  setSamples(staleness_samples(updates));
}

void StalenessChart::appendUpdates(const std::vector<loom::trace::UpdateRecord>& updates) {
  appendSamples(staleness_samples(updates));
}

void StalenessChart::clear() { setSamples({}); }

void StalenessChart::replotNow() {
  timer_.stop();
  rebuild();
  plot_->replot();
}

// Drops every plottable and makes one bar set (left) and one line (right) per worker.
void StalenessChart::rebuild() {
  plot_->clearPlottables();
  hist_bars_.clear();
  lines_.clear();
  setEmptyState(samples_.empty());
  if (!samples_.empty()) addWorkerPlottables();
  applyPalette();  // new legend items take the legend's colour only when styled
}

// Per worker: histogram bars on the left rect, staleness over time on the right (means of
// time buckets, so a long run stays a readable line rather than thousands of integer
// jumps); axes fitted to the data with the histogram counted from zero.
void StalenessChart::addWorkerPlottables() {
  QCPAxisRect* left = plot_->axisRect(0);
  QCPAxisRect* right = plot_->axisRect(1);
  const std::vector<int> workers = staleness_workers(samples_);
  const double width = 0.8 / static_cast<double>(workers.size());
  int max_bin = 0, max_count = 0;
  for (int worker : workers) {
    const Histogram h = staleness_histogram(samples_, worker);
    QVector<double> keys, counts;
    for (std::size_t s = 0; s < h.bins.size(); ++s) {
      keys.append(static_cast<double>(s));
      counts.append(h.bins[s]);
      max_count = std::max(max_count, h.bins[s]);
    }
    max_bin = std::max(max_bin, static_cast<int>(h.bins.size()) - 1);
    auto* bars = new QCPBars(left->axis(QCPAxis::atBottom), left->axis(QCPAxis::atLeft));
    bars->setName(tr("worker %1").arg(worker));
    bars->setWidth(width);
    bars->setBrush(device_color(worker));
    bars->setPen(QPen(device_color(worker).darker(130), 0));
    bars->setBarsGroup(group_);
    set_points(bars, keys, counts);
    hist_bars_.push_back(bars);

    QCPGraph* line = plot_->addGraph(right->axis(QCPAxis::atBottom), right->axis(QCPAxis::atLeft));
    line->setPen(QPen(device_color(worker), 1.5));
    line->removeFromLegend();  // the bar's entry already names the worker's colour
    QVector<double> seconds, means;
    for (const QPointF& p : staleness_over_time(samples_, worker, XAxis::Time)) {
      seconds.append(p.x());
      means.append(p.y());
    }
    set_points(line, seconds, means);
    lines_.push_back(line);
  }
  left->axis(QCPAxis::atBottom)->setRange(-0.6, max_bin + 0.6);
  left->axis(QCPAxis::atLeft)->setRange(0, std::max(1, max_count) * 1.08);
  right->axis(QCPAxis::atBottom)->rescale();
  right->axis(QCPAxis::atLeft)->setRange(0, std::max(1.0, static_cast<double>(max_bin)) * 1.1);
}

// Without samples the axes would frame nothing: hide them and show why instead. The axis
// rects themselves stay visible (their backgrounds are cleared in applyPalette) because
// QCustomPlot parents the text item to the first rect: hiding it would hide the text.
void StalenessChart::setEmptyState(bool empty) {
  empty_text_->setVisible(empty);
  plot_->legend->setVisible(!empty);
  for (QCPAxisRect* rect : plot_->axisRects()) {
    for (QCPAxis* axis : rect->axes()) {
      const bool shown = axis->axisType() == QCPAxis::atBottom || axis->axisType() == QCPAxis::atLeft;
      axis->setVisible(!empty && shown);
      axis->grid()->setVisible(!empty && shown);
    }
  }
}

QString StalenessChart::shownText() const {
  if (!empty_text_->realVisibility()) return {};
  return empty_text_->text().replace(QLatin1Char('\n'), QLatin1Char(' '));
}

void StalenessChart::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::StyleChange) {
    applyPalette();
    plot_->replot();
  }
}

void StalenessChart::applyPalette() {
  detail::apply_palette(plot_, palette());
  if (hasData()) return;
  for (QCPAxisRect* rect : plot_->axisRects()) rect->setBackground(Qt::NoBrush);
}

}  // namespace loom::ui::charts
