// TimelineView (timeline_view.h): QCustomPlot supplies the axes, the layout and the paint
// buffers; LanePainter, one layerable on its own layer, paints the lanes straight from
// TimelineData. Per lane it asks fold_visible for at most about one rectangle per few
// pixel columns, so a paint costs O(lanes x width x log n) whatever the zoom.
#include "loom/ui/timeline/timeline_view.h"

#include <QElapsedTimer>
#include <QMouseEvent>
#include <QTimer>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <algorithm>
#include <array>
#include <cmath>
#include <qcustomplot.h>

#include "loom/ui/colors.h"

namespace loom::ui::timeline {

namespace {

constexpr double kFoldPx = 3;           // spans narrower than this fold into their neighbours
constexpr std::size_t kMaxArrows = 2000;  // more visible than this: skip them, say so
constexpr double kRowHeight = 1.0, kDepthRowHeight = 0.7, kRankGap = 0.35;  // y-axis units
constexpr int kStripPx = 4;             // device colour strip at the left of each rank

}  // namespace

// Paints lanes, device strips and message arrows for the view that owns it.
class LanePainter : public QCPLayerable {
 public:
  LanePainter(QCustomPlot* plot, const TimelineView* view) : QCPLayerable(plot, QStringLiteral("lanes")), view_(view) {
    for (int k = 0; k < loom::trace::kEventKindCount; ++k) {
      colors_[static_cast<std::size_t>(k)] = event_kind_color(static_cast<loom::trace::EventKind>(k));
      folded_[static_cast<std::size_t>(k)] = colors_[static_cast<std::size_t>(k)].darker(125);
    }
  }
  double last_ms = 0;

 protected:
  QRect clipRect() const override { return mParentPlot->axisRect()->rect(); }
  void applyDefaultAntialiasingHint(QCPPainter* p) const override { p->setAntialiasing(false); }
  void draw(QCPPainter* p) override;

 private:
  void drawLane(QCPPainter* p, const Lane& lane, const Viewport& v, const QRect& area, int y0, int y1);
  void drawStrips(QCPPainter* p, const QRect& area);
  void drawArrows(QCPPainter* p, const Viewport& v, const QRect& area);
  int rowY(double coord) const { return static_cast<int>(std::lround(mParentPlot->yAxis->coordToPixel(coord))); }

  const TimelineView* view_;
  std::array<QColor, loom::trace::kEventKindCount> colors_, folded_;
  std::vector<DrawItem> items_;  // reused between lanes and paints
};

void LanePainter::draw(QCPPainter* p) {
  QElapsedTimer timer;
  timer.start();
  p->setAntialiasing(false);
  const QRect area = mParentPlot->axisRect()->rect();
  const Viewport v = view_->viewport();
  const auto& lanes = view_->data_.lanes();
  for (std::size_t i = 0; i < lanes.size() && i < view_->row_top_.size(); ++i) {
    const int y0 = rowY(view_->row_top_[i]), y1 = rowY(view_->row_bottom_[i]);
    if (y1 < area.top() || y0 > area.bottom()) continue;
    drawLane(p, lanes[i], v, area, y0, y1);
  }
  drawStrips(p, area);
  drawArrows(p, v, area);
  last_ms = static_cast<double>(timer.nsecsElapsed()) / 1e6;
}

void LanePainter::drawLane(QCPPainter* p, const Lane& lane, const Viewport& v, const QRect& area, int y0, int y1) {
  items_.clear();
  fold_visible(lane.spans, v, kFoldPx, items_);
  const int h = std::max(1, y1 - y0 - 1);  // one pixel between rows
  const bool labels = h >= 12;
  for (const DrawItem& d : items_) {
    const int x0 = area.left() + static_cast<int>(std::floor(d.x0_px));
    int w = std::max(1, static_cast<int>(std::ceil(d.x1_px)) + area.left() - x0);
    if (w > 4 && d.count == 1) w -= 1;  // a hairline between touching spans of one kind
    const auto k = static_cast<std::size_t>(d.kind);
    const QRect r(x0, y0, w, h);
    p->fillRect(r, d.count > 1 ? folded_[k] : colors_[k]);
    if (labels && d.count == 1 && w > 60) {  // wide enough to say what it is
      const auto& e = view_->data_.event(d.first_event);
      QString text = QString::fromUtf8(loom::trace::event_kind_name(e.kind));
      const auto layer = static_cast<std::size_t>(e.layer);
      if (e.layer >= 0 && layer < view_->layer_names_.size())
        text += QLatin1Char(' ') + QString::fromStdString(view_->layer_names_[layer]);
      p->setPen(Qt::white);
      p->drawText(r.intersected(area).adjusted(kStripPx + 2, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft, text);
    }
  }
}

void LanePainter::drawStrips(QCPPainter* p, const QRect& area) {
  const auto& lanes = view_->data_.lanes();
  std::size_t i = 0;
  while (i < lanes.size() && i < view_->row_top_.size()) {
    std::size_t j = i;
    while (j + 1 < lanes.size() && lanes[j + 1].key.rank == lanes[i].key.rank) ++j;
    const int y0 = rowY(view_->row_top_[i]), y1 = rowY(view_->row_bottom_[j]);
    p->fillRect(QRect(area.left(), y0, kStripPx, std::max(1, y1 - y0 - 1)), device_color(lanes[i].key.rank));
    i = j + 1;
  }
}

void LanePainter::drawArrows(QCPPainter* p, const Viewport& v, const QRect& area) {
  const TimelineData& data = view_->data_;
  const double origin = static_cast<double>(data.origin_ns());
  std::vector<std::pair<QPointF, QPointF>> lines;
  std::size_t visible = 0;
  for (const Arrow& a : data.arrows()) {
    const double xs = time_to_px(v, static_cast<double>(data.event(a.send_event).end_ns) - origin);
    const double xr = time_to_px(v, static_cast<double>(data.event(a.recv_event).end_ns) - origin);
    if (std::max(xs, xr) < 0 || std::min(xs, xr) > v.width_px) continue;
    if (++visible > kMaxArrows) continue;  // only counting from here on
    const int ls = data.event_lane(a.send_event), lr = data.event_lane(a.recv_event);
    if (ls < 0 || lr < 0 || static_cast<std::size_t>(std::max(ls, lr)) >= view_->row_top_.size()) continue;
    auto mid = [&](int lane) {
      return 0.5 * (view_->row_top_[static_cast<std::size_t>(lane)] + view_->row_bottom_[static_cast<std::size_t>(lane)]);
    };
    lines.emplace_back(QPointF(area.left() + xs, mParentPlot->yAxis->coordToPixel(mid(ls))),
                       QPointF(area.left() + xr, mParentPlot->yAxis->coordToPixel(mid(lr))));
  }
  if (visible > kMaxArrows) {
    p->setPen(QColor(90, 90, 90));
    p->drawText(area.adjusted(kStripPx + 4, 2, -4, -2), Qt::AlignTop | Qt::AlignRight,
                QStringLiteral("%1 messages in view: arrows hidden, zoom in").arg(visible));
    return;
  }
  p->setPen(QPen(QColor(40, 40, 40, 170), 1));
  p->setBrush(QColor(40, 40, 40, 200));
  for (const auto& [from, to] : lines) {
    p->drawLine(from, to);
    const QPointF dir = to - from;
    const double len = std::hypot(dir.x(), dir.y());
    if (len < 8) continue;
    const QPointF u = dir / len, n(-u.y(), u.x());
    const QPointF head[3] = {to, to - 6 * u + 3 * n, to - 6 * u - 3 * n};
    p->drawPolygon(head, 3);
  }
}

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  plot_ = new QCustomPlot(this);
  layout->addWidget(plot_);
  plot_->setInteractions(QCP::Interactions());  // the view handles zoom and pan itself
  plot_->setMouseTracking(true);
  plot_->addLayer(QStringLiteral("lanes"), plot_->layer(QStringLiteral("main")), QCustomPlot::limBelow);
  painter_ = new LanePainter(plot_, this);
  plot_->xAxis->setLabel(QStringLiteral("time since start (ms)"));
  plot_->yAxis->setRangeReversed(true);
  plot_->yAxis->grid()->setVisible(false);
  plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerText>(new QCPAxisTickerText));
  plot_->yAxis->setSubTicks(false);
  plot_->yAxis->setTickLength(0, 0);
  connect(plot_, &QCustomPlot::mouseWheel, this, &TimelineView::onWheel);
  connect(plot_, &QCustomPlot::mousePress, this, &TimelineView::onMousePress);
  connect(plot_, &QCustomPlot::mouseMove, this, &TimelineView::onMouseMove);
  connect(plot_, &QCustomPlot::mouseRelease, this, &TimelineView::onMouseRelease);
  connect(plot_, &QCustomPlot::mouseDoubleClick, this, &TimelineView::onDoubleClick);
  timer_ = new QTimer(this);
  timer_->setInterval(100);
  connect(timer_, &QTimer::timeout, this, &TimelineView::onTick);
  timer_->start();
  syncAxes();
}

TimelineView::~TimelineView() = default;

void TimelineView::setClocks(std::vector<loom::store::RankRecord> ranks) { data_.set_clocks(std::move(ranks)); }

void TimelineView::appendEvents(int rank, std::span<const loom::trace::Event> events) {
  data_.append(rank, events);  // the timer notices the new revision and replots
}

void TimelineView::clear() {
  data_.clear();
  touched_ = false;
}

void TimelineView::setLayerNames(std::vector<std::string> names) {
  layer_names_ = std::move(names);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void TimelineView::setFollowLatest(bool on) {
  if (on == follow_) return;
  follow_ = on;
  if (on) {
    const double span = t1_ns_ - t0_ns_;
    const double end = static_cast<double>(data_.end_ns());
    applyViewport(Viewport{end - span, end, plotWidth()});
  }
  emit followLatestChanged(on);
}

void TimelineView::fitAll() {
  const double b = static_cast<double>(data_.begin_ns()), e = static_cast<double>(data_.end_ns());
  const double span = std::max(e - b, 1000.0);
  applyViewport(Viewport{b - 0.01 * span, e + 0.01 * span, plotWidth()});
}

Viewport TimelineView::viewport() const { return Viewport{t0_ns_, t1_ns_, plotWidth()}; }

void TimelineView::setViewport(const Viewport& v) {
  touched_ = true;
  applyViewport(v);
}

double TimelineView::lastPaintMs() const { return painter_->last_ms; }

void TimelineView::applyViewport(const Viewport& v) {
  if (!(v.t1_ns > v.t0_ns)) return;
  t0_ns_ = v.t0_ns;
  t1_ns_ = v.t1_ns;
  syncAxes();
  emit viewportChanged();
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void TimelineView::syncAxes() { plot_->xAxis->setRange(t0_ns_ / 1e6, t1_ns_ / 1e6); }

// Row heights in y-axis units: a full row for each stream's top level, compact rows for
// deeper levels, and a gap between ranks. Labels go on the top-level rows only.
void TimelineView::rebuildRows() {
  const auto& lanes = data_.lanes();
  row_top_.assign(lanes.size(), 0);
  row_bottom_.assign(lanes.size(), 0);
  QMap<double, QString> ticks;
  double y = 0;
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    const LaneKey& k = lanes[i].key;
    if (i > 0 && lanes[i - 1].key.rank != k.rank) y += kRankGap;
    const double h = k.depth == 0 ? kRowHeight : kDepthRowHeight;
    row_top_[i] = y;
    row_bottom_[i] = y + h;
    // A lane whose depth 0 is missing (not possible today) would simply go unlabelled.
    if (k.depth == 0)
      ticks.insert(y + h / 2, QStringLiteral("rank %1 · %2").arg(k.rank).arg(QString::fromUtf8(loom::trace::stream_name(k.stream))));
    y += h;
  }
  qSharedPointerCast<QCPAxisTickerText>(plot_->yAxis->ticker())->setTicks(ticks);
  plot_->yAxis->setRange(0, std::max(y, 1.0));
}

void TimelineView::onTick() {
  if (data_.revision() == painted_revision_) return;  // idle: no repaint at all
  painted_revision_ = data_.revision();
  rebuildRows();
  if (follow_) {
    const double span = t1_ns_ - t0_ns_, end = static_cast<double>(data_.end_ns());
    t0_ns_ = end - span;
    t1_ns_ = end;
    syncAxes();
    emit viewportChanged();
  } else if (!touched_) {
    fitAll();
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void TimelineView::replotNow() {
  onTick();
  syncAxes();
  plot_->replot(QCustomPlot::rpImmediateRefresh);
}

double TimelineView::plotLeft() const { return plot_->axisRect()->left(); }

double TimelineView::plotWidth() const {
  const int w = plot_->axisRect()->width();
  return w > 1 ? w : std::max(1, width());
}

int TimelineView::laneAtY(int y) const {
  const QPoint in_plot = plot_->mapFrom(this, QPoint(0, y));
  const double c = plot_->yAxis->pixelToCoord(in_plot.y());
  for (std::size_t i = 0; i < row_top_.size(); ++i)
    if (c >= row_top_[i] && c < row_bottom_[i]) return static_cast<int>(i);
  return -1;
}

std::optional<std::uint32_t> TimelineView::eventAt(QPoint pos) const {
  const int lane = laneAtY(pos.y());
  if (lane < 0 || static_cast<std::size_t>(lane) >= data_.lanes().size()) return std::nullopt;
  const double x = plot_->mapFrom(this, pos).x() - plotLeft();
  if (x < 0 || x > plotWidth()) return std::nullopt;
  return hit_test(data_.lanes()[static_cast<std::size_t>(lane)].spans, viewport(), x, 3);
}

QString TimelineView::toolTipAt(QPoint pos) const {
  const auto hit = eventAt(pos);
  if (!hit) return {};
  return describe_event(data_.event(*hit), data_.event_rank(*hit), layer_names_);
}

void TimelineView::userMoved() {
  touched_ = true;
  setFollowLatest(false);
}

void TimelineView::zoomAt(QPoint pos, double factor) {
  userMoved();
  const double anchor = plot_->mapFrom(this, pos).x() - plotLeft();
  applyViewport(zoom_at(viewport(), anchor, factor));
}

void TimelineView::onWheel(QWheelEvent* event) {
  // 1.2x per notch of 120 units; trackpads send smaller deltas for smooth zoom.
  const double factor = std::pow(1.2, event->angleDelta().y() / 120.0);
  zoomAt(plot_->mapTo(this, event->position().toPoint()), factor);
  event->accept();
}

void TimelineView::onMousePress(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton) return;
  dragging_ = true;
  drag_last_ = event->pos();
}

void TimelineView::onMouseMove(QMouseEvent* event) {
  if (dragging_) {
    const int dx = event->pos().x() - drag_last_.x();
    drag_last_ = event->pos();
    if (dx != 0) {
      userMoved();
      applyViewport(pan_by(viewport(), dx));
    }
    return;
  }
  const QPoint pos = plot_->mapTo(this, event->pos());
  const auto hit = eventAt(pos);
  if (!hit) {
    QToolTip::hideText();
    return;
  }
  QToolTip::showText(event->globalPosition().toPoint(), toolTipAt(pos), plot_);
  emit eventHovered(*hit);
}

void TimelineView::onMouseRelease(QMouseEvent*) { dragging_ = false; }

void TimelineView::onDoubleClick(QMouseEvent*) {
  userMoved();
  fitAll();
}

}  // namespace loom::ui::timeline
