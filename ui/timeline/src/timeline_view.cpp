// TimelineView (timeline_view.h): QCustomPlot supplies the axes, the layout and the paint
// buffers; LanePainter, one layerable on its own layer, paints the lanes straight from
// TimelineData. Per lane it asks fold_visible for at most one rectangle per span wide
// enough to see and one column per few pixels for the rest, so a paint costs O(visible
// spans) with a small constant, and O(lanes x width) rectangles, whatever the zoom.
#include "loom/ui/timeline/timeline_view.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QEvent>
#include <QMouseEvent>
#include <QTimer>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <qcustomplot.h>

#include "loom/ui/colors.h"
#include "loom/ui/timeline/concepts.h"
#include "loom/ui/span_kinds.h"
#include "loom/ui/timeline/kind_legend.h"
#include "loom/ui/timeline/step_navigator.h"

namespace loom::ui::timeline {

namespace {

const QString kTimeAxisLabel = QStringLiteral("time since start (ms)");

constexpr double kFoldPx = 3;           // spans narrower than this are summed into columns this wide
constexpr std::size_t kMaxArrows = 2000;  // more visible than this: skip them, say so
// Arrows pile into a solid mass well below kMaxArrows when they share a few pixels (a
// burst of setup probes in a whole-run view): a column this wide holding more than this
// many arrow midpoints is not drawn, and the notice says so.
constexpr double kArrowColumnPx = 12;
constexpr std::size_t kMaxArrowsPerColumn = 6;
constexpr double kRowHeight = 1.0, kDepthRowHeight = 0.7, kRankGap = 0.35;  // y-axis units
constexpr int kStripPx = 4;             // device colour strip at the left of each rank

// Black or white, whichever reads better on a span of this colour.
QColor label_color(const QColor& fill) {
  const double luma = 0.299 * fill.redF() + 0.587 * fill.greenF() + 0.114 * fill.blueF();
  return luma > 0.6 ? QColor(20, 20, 20) : QColor(Qt::white);
}

// The timeline's header: the step navigator at the top left and the legend of kinds beside
// it, each in its own rectangle (no widget draws over another: test_main_window checks the
// whole window for overlaps). If the navigator is moved elsewhere (a main window's toolbar),
// the legend takes the whole width.
class TimelineHeader : public QWidget {
 public:
  TimelineHeader(QWidget* parent) : QWidget(parent) {
    QSizePolicy policy(QSizePolicy::Preferred, QSizePolicy::Fixed);
    policy.setHeightForWidth(true);
    setSizePolicy(policy);
    setObjectName(QStringLiteral("timelineHeader"));
  }
  void set(StepNavigator* navigator, KindLegend* legend) {
    navigator_ = navigator, legend_ = legend;
    legend_->setFirstLine(0, 0);
  }
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override {
    return std::max(ownsNavigator() ? navigator_->sizeHint().height() : 0, legend_->heightForWidth(legendWidth(width)));
  }
  QSize sizeHint() const override { return QSize(legendX() + legend_->sizeHint().width(), heightForWidth(width())); }
  // As narrow as the compact navigator: the timeline must not widen a laptop's window.
  QSize minimumSizeHint() const override {
    const int nav = ownsNavigator() ? navigator_->widthHint(true) + kGap : 0;
    return QSize(nav + legend_->minimumSizeHint().width(), 0);
  }

 protected:
  void resizeEvent(QResizeEvent*) override {
    if (ownsNavigator()) navigator_->setCompact(width() < navigator_->widthHint(false) + 2 * kGap + 200);
    if (ownsNavigator()) navigator_->setGeometry(0, 0, navigatorWidth(), navigator_->sizeHint().height());
    const int w = legendWidth(width());
    legend_->setGeometry(legendX(), 0, w, legend_->heightForWidth(w));
  }
  bool event(QEvent* e) override {
    // The navigator's text grows with the step count: lay out again when it asks to.
    if (e->type() == QEvent::LayoutRequest) {
      resizeEvent(nullptr);
      updateGeometry();
    }
    return QWidget::event(e);
  }

 private:
  static constexpr int kGap = 8;
  bool ownsNavigator() const { return navigator_ && navigator_->parentWidget() == this; }
  int navigatorWidth() const {
    if (!ownsNavigator()) return 0;
    return std::max(navigator_->widthHint(navigator_->compact()), navigator_->minimumSizeHint().width());
  }
  int legendX() const { return ownsNavigator() ? navigatorWidth() + kGap : 0; }
  int legendWidth(int width) const { return std::max(1, width - legendX()); }
  StepNavigator* navigator_ = nullptr;
  KindLegend* legend_ = nullptr;
};

}  // namespace

// Paints lanes, device strips and message arrows for the view that owns it.
class LanePainter : public QCPLayerable {
 public:
  LanePainter(QCustomPlot* plot, const TimelineView* view) : QCPLayerable(plot, QStringLiteral("lanes")), view_(view) {}
  double last_ms = 0;
  double latest_start_ns = 0;  // of what the last paint drew (lastPaintedStartNs)
  QString notice;     // painted when arrows are hidden
  QRect notice_rect;  // where, in plot coordinates
  std::size_t arrows_drawn = 0;

 protected:
  QRect clipRect() const override { return mParentPlot->axisRect()->rect(); }
  void applyDefaultAntialiasingHint(QCPPainter* p) const override { p->setAntialiasing(false); }
  void draw(QCPPainter* p) override;

 private:
  void takeColors();
  void drawLane(QCPPainter* p, const Lane& lane, const Viewport& v, const QRect& area, int y0, int y1);
  void drawColumn(QCPPainter* p, const DrawItem& d, const QRect& area, int y0, int h);
  void drawLabel(QCPPainter* p, const DrawItem& d, const QRect& r, const QColor& color);
  void drawStrips(QCPPainter* p, const QRect& area);
  void drawArrows(QCPPainter* p, const Viewport& v, const QRect& area);
  static std::size_t dropPiledArrows(std::vector<std::pair<QPointF, QPointF>>& lines);
  void drawPath(QCPPainter* p, const Viewport& v, const QRect& area);
  void drawCursor(QCPPainter* p, const Viewport& v, const QRect& area);
  // Pixel rows [top, bottom) of a rank's lanes; empty when the rank has none.
  std::pair<int, int> rankRows(int rank) const;
  void drawNotice(QCPPainter* p, const QRect& area, const QString& text);
  int rowY(double coord) const { return static_cast<int>(std::lround(mParentPlot->yAxis->coordToPixel(coord))); }

  const TimelineView* view_;
  std::array<QColor, loom::trace::kEventKindCount> colors_, labels_, faded_;
  Fold fold_;  // reused between lanes and paints
};

// The table's colours for the palette the view has now (light or dark).
void LanePainter::takeColors() {
  const bool dark = is_dark(view_->palette());
  for (int k = 0; k < loom::trace::kEventKindCount; ++k) {
    const auto i = static_cast<std::size_t>(k);
    colors_[i] = event_kind_color(static_cast<loom::trace::EventKind>(k), dark);
    labels_[i] = label_color(colors_[i]);
    // A quarter of the colour over the background: still the same hue, clearly behind.
    const QColor base = view_->palette().color(QPalette::Base);
    faded_[i] = QColor::fromRgbF(0.25f * colors_[i].redF() + 0.75f * base.redF(),
                                 0.25f * colors_[i].greenF() + 0.75f * base.greenF(),
                                 0.25f * colors_[i].blueF() + 0.75f * base.blueF());
  }
}

void LanePainter::draw(QCPPainter* p) {
  QElapsedTimer timer;
  timer.start();
  p->setAntialiasing(false);
  takeColors();
  const QRect area = mParentPlot->axisRect()->rect();
  const Viewport v = view_->viewport();
  // In replay, lanes are folded over the part of the window before the cursor only.
  const Viewport lanes_v = view_->cursor_ns_ ? clip_at_cursor(v, *view_->cursor_ns_) : v;
  latest_start_ns = -std::numeric_limits<double>::infinity();
  const auto& lanes = view_->data_.lanes();
  for (std::size_t i = 0; i < lanes.size() && i < view_->row_top_.size(); ++i) {
    const int y0 = rowY(view_->row_top_[i]), y1 = rowY(view_->row_bottom_[i]);
    if (y1 < area.top() || y0 > area.bottom()) continue;
    drawLane(p, lanes[i], lanes_v, area, y0, y1);
  }
  drawStrips(p, area);
  drawArrows(p, v, area);
  drawPath(p, v, area);
  drawCursor(p, v, area);
  last_ms = static_cast<double>(timer.nsecsElapsed()) / 1e6;
}

void LanePainter::drawLane(QCPPainter* p, const Lane& lane, const Viewport& v, const QRect& area, int y0, int y1) {
  fold_.clear();
  fold_visible(lane.spans, v, kFoldPx, fold_);
  const int h = std::max(1, y1 - y0 - 1);  // one pixel between rows
  const bool labels = h >= 12;
  for (const DrawItem& d : fold_.items) {
    latest_start_ns = std::max(latest_start_ns, px_to_time(v, d.x0_px));
    if (d.folded()) {
      drawColumn(p, d, area, y0, h);
      continue;
    }
    const int x0 = area.left() + static_cast<int>(std::floor(d.x0_px));
    int w = std::max(1, static_cast<int>(std::ceil(d.x1_px)) + area.left() - x0);
    if (w > 4) w -= 1;  // a hairline between touching spans of one kind
    const auto k = static_cast<std::size_t>(d.kind);
    const QRect r(x0, y0, w, h);
    if (view_->highlight_microbatch_ >= 0) {
      const auto& e = view_->data_.event(d.first_event);
      if (e.step != view_->highlight_step_ || e.microbatch != view_->highlight_microbatch_) {
        p->fillRect(r, faded_[k]);
        continue;
      }
    }
    p->fillRect(r, colors_[k]);
    if (labels && w > 40) drawLabel(p, d, r.intersected(area).adjusted(kStripPx + 2, 0, -2, 0), labels_[k]);
  }
}

// What a span is, elided to its width: the kind, then the layer, the step number of a
// Step or the phase of a Setup.
void LanePainter::drawLabel(QCPPainter* p, const DrawItem& d, const QRect& r, const QColor& color) {
  const auto& e = view_->data_.event(d.first_event);
  QString text = event_kind_display_name(e.kind);
  const auto layer = static_cast<std::size_t>(e.layer);
  if (e.layer >= 0 && layer < view_->layer_names_.size())
    text += QLatin1Char(' ') + QString::fromStdString(view_->layer_names_[layer]);
  else if (e.kind == loom::trace::EventKind::Step && e.step >= 0)
    text += QLatin1Char(' ') + QString::number(e.step);
  else if (e.kind == loom::trace::EventKind::Setup && e.message >= 0)
    text += QStringLiteral(": ") + QString::fromUtf8(loom::trace::setup_phase_name(e.message));
  // The concept it stands for (concepts.h): a wait or idle span by that alone, since it
  // says more than the kind; others by their kind and then the concept.
  if (const QString meaning = concept_label(view_->data_, d.first_event); !meaning.isEmpty()) {
    const bool alone = e.kind == loom::trace::EventKind::Wait || e.kind == loom::trace::EventKind::Idle;
    text = alone ? meaning : text + QStringLiteral(" \u00b7 ") + meaning;
  }
  const QString shown = p->fontMetrics().elidedText(text, Qt::ElideRight, r.width());
  if (shown.size() < 3 || shown == QStringLiteral("…")) return;  // too narrow to say anything
  p->setPen(color);
  p->drawText(r, Qt::AlignVCenter | Qt::AlignLeft, shown);
}

// A column of narrow spans: each kind's share of the column's time as a stacked bar from
// the bottom of the row, in a fixed kind order so neighbouring columns line up; the empty
// height above is time in which nothing ran. Cumulative rounding: no pixel gaps or overlaps.
void LanePainter::drawColumn(QCPPainter* p, const DrawItem& d, const QRect& area, int y0, int h) {
  const int x0 = area.left() + static_cast<int>(std::lround(d.x0_px));
  const int x1 = std::max(x0 + 1, area.left() + static_cast<int>(std::lround(d.x1_px)));
  const int bottom = y0 + h;
  double cumulative = 0;
  int done = 0;
  for (const KindTime& k : fold_.mix_of(d)) {
    cumulative += d.extent_ns > 0 ? k.ns / d.extent_ns : 1.0;
    const int top = static_cast<int>(std::lround(h * std::min(cumulative, 1.0)));
    if (top > done) p->fillRect(QRect(x0, bottom - top, x1 - x0, top - done), colors_[static_cast<std::size_t>(k.kind)]);
    done = std::max(done, top);
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

std::pair<int, int> LanePainter::rankRows(int rank) const {
  const auto& lanes = view_->data_.lanes();
  int top = -1, bottom = -1;
  for (std::size_t i = 0; i < lanes.size() && i < view_->row_top_.size(); ++i) {
    if (lanes[i].key.rank != rank) continue;
    if (top < 0) top = rowY(view_->row_top_[i]);
    bottom = rowY(view_->row_bottom_[i]);
  }
  return {top, bottom};
}

// Gold: not a span kind's colour, so the path reads as an overlay in both palettes.
void LanePainter::drawPath(QCPPainter* p, const Viewport& v, const QRect& area) {
  if (view_->path_.empty()) return;
  const double origin = static_cast<double>(view_->data_.origin_ns());
  const QColor gold(232, 170, 20);
  QColor wash = gold;
  wash.setAlpha(70);
  QPoint last_end(-1, -1);
  int last_rank = -1;
  p->setAntialiasing(true);
  for (const PathMark& m : view_->path_) {
    const auto [top, bottom] = rankRows(m.rank);
    if (top < 0) continue;
    const int x0 = int(std::floor(time_to_px(v, double(m.start_ns) - origin))) + area.left();
    const int x1 = std::max(x0 + 1, int(std::ceil(time_to_px(v, double(m.end_ns) - origin))) + area.left());
    p->fillRect(QRect(x0, top, x1 - x0, bottom - top), wash);
    p->fillRect(QRect(x0, top, x1 - x0, 3), gold);
    if (last_rank >= 0 && last_rank != m.rank) {
      p->setPen(QPen(gold, 2));
      p->drawLine(last_end, QPoint(x0, top + 1));
    }
    last_end = QPoint(x1, top + 1);
    last_rank = m.rank;
  }
  p->setAntialiasing(false);
}

void LanePainter::drawArrows(QCPPainter* p, const Viewport& v, const QRect& area) {
  const TimelineData& data = view_->data_;
  const double origin = static_cast<double>(data.origin_ns());
  std::vector<std::pair<QPointF, QPointF>> lines;
  std::size_t visible = 0;
  notice.clear();
  notice_rect = QRect();
  arrows_drawn = 0;
  for (const Arrow& a : data.arrows()) {
    // In replay, a message shows once it has arrived.
    if (view_->cursor_ns_ && double(data.event(a.recv_event).end_ns) - origin > *view_->cursor_ns_) continue;
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
    drawNotice(p, area, QStringLiteral("Arrows hidden: %L1 messages in view. Zoom in to see them.").arg(visible));
    return;
  }
  const std::size_t piled = dropPiledArrows(lines);
  arrows_drawn = lines.size();
  // The palette's text colour, translucent: dark on the light palette, light on the dark.
  QColor ink = view_->palette().color(QPalette::WindowText);
  ink.setAlpha(180);
  p->setPen(QPen(ink, 1));
  ink.setAlpha(210);
  p->setBrush(ink);
  for (const auto& [from, to] : lines) {
    p->drawLine(from, to);
    const QPointF dir = to - from;
    const double len = std::hypot(dir.x(), dir.y());
    if (len < 8) continue;
    const QPointF u = dir / len, n(-u.y(), u.x());
    const QPointF head[3] = {to, to - 6 * u + 3 * n, to - 6 * u - 3 * n};
    p->drawPolygon(head, 3);
  }
  if (piled > 0)  // over the arrows drawn, so that none crosses it
    drawNotice(p, area, QStringLiteral("Arrows hidden where they pile up: %L1 of %L2 messages in view. Zoom in to see them.")
                            .arg(piled)
                            .arg(visible));
}

// Removes the arrows whose midpoints crowd one column (kArrowColumnPx, kMaxArrowsPerColumn):
// drawn, they would be one solid block. Returns how many it removed.
std::size_t LanePainter::dropPiledArrows(std::vector<std::pair<QPointF, QPointF>>& lines) {
  std::map<long, std::size_t> per_column;
  auto column = [](const std::pair<QPointF, QPointF>& line) {
    return static_cast<long>(std::floor(0.5 * (line.first.x() + line.second.x()) / kArrowColumnPx));
  };
  for (const auto& line : lines) ++per_column[column(line)];
  const std::size_t before = lines.size();
  std::erase_if(lines, [&](const auto& line) { return per_column[column(line)] > kMaxArrowsPerColumn; });
  return before - lines.size();
}

// The replay cursor: the palette's text colour (no span kind's), with a head at the top.
void LanePainter::drawCursor(QCPPainter* p, const Viewport& v, const QRect& area) {
  if (!view_->cursor_ns_) return;
  const double x = time_to_px(v, *view_->cursor_ns_);
  if (x < 0 || x > v.width_px) return;
  const int px = area.left() + static_cast<int>(std::lround(x));
  const QColor ink = view_->palette().color(QPalette::WindowText);
  p->fillRect(QRect(px - 1, area.top(), 2, area.height()), ink);
  const QPoint head[3] = {QPoint(px - 6, area.top()), QPoint(px + 6, area.top()), QPoint(px, area.top() + 8)};
  p->setPen(Qt::NoPen);
  p->setBrush(ink);
  p->drawPolygon(head, 3);
}

// A boxed note at the top right of the lanes, wrapped to the plotting area's width so that
// it is never cut off, on the palette's base colour so that it reads over the spans.
void LanePainter::drawNotice(QCPPainter* p, const QRect& area, const QString& text) {
  const QFontMetrics fm(mParentPlot->font());
  const int max_w = std::max(40, area.width() - kStripPx - 16);
  const QRect text_rect = fm.boundingRect(QRect(0, 0, max_w, 10000), Qt::TextWordWrap | Qt::AlignLeft, text);
  QRect box(0, 0, text_rect.width() + 12, text_rect.height() + 6);
  box.moveTopRight(QPoint(area.right() - 4, area.top() + 4));
  QColor fill = view_->palette().color(QPalette::Base);
  fill.setAlpha(235);
  p->setPen(QPen(view_->palette().color(QPalette::Mid), 1));
  p->setBrush(fill);
  p->drawRect(box);
  p->setPen(view_->palette().color(QPalette::Text));
  p->drawText(box.adjusted(6, 3, -6, -3), Qt::TextWordWrap | Qt::AlignLeft | Qt::AlignVCenter, text);
  notice = text;
  notice_rect = box;
}

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  plot_ = new QCustomPlot(this);
  auto* header = new TimelineHeader(this);
  header_ = header;
  navigator_ = new StepNavigator(this, header);
  legend_ = new KindLegend(header);
  header->set(navigator_, legend_);
  layout->addWidget(header);
  layout->addWidget(plot_, 1);
  plot_->setInteractions(QCP::Interactions());  // the view handles zoom and pan itself
  plot_->setMouseTracking(true);
  plot_->addLayer(QStringLiteral("lanes"), plot_->layer(QStringLiteral("main")), QCustomPlot::limBelow);
  painter_ = new LanePainter(plot_, this);
  plot_->xAxis->setLabel(kTimeAxisLabel);
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
  applyPalette();
}

TimelineView::~TimelineView() = default;

void TimelineView::setClocks(std::vector<loom::trace::RankRecord> ranks) { data_.set_clocks(std::move(ranks)); }

void TimelineView::appendEvents(int rank, std::span<const loom::trace::Event> events) {
  data_.append(rank, events);  // the timer notices the new revision and replots
}

void TimelineView::clear() {
  data_.clear();
  setHighlight(-1, -1);
  path_.clear();
  touched_ = false;
  legend_->setKinds(0);
  navigator_->refresh();
}

void TimelineView::setReplayCursor(std::optional<double> t_ns) {
  if (t_ns == cursor_ns_) return;
  cursor_ns_ = t_ns;
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

double TimelineView::lastPaintedStartNs() const { return painter_->latest_start_ns; }

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

void TimelineView::showRange(double begin_ns, double end_ns) {
  userMoved();
  const double span = std::max(end_ns - begin_ns, 1000.0);
  const double margin = 0.03 * span;  // the range's edges stay visible
  applyViewport(Viewport{begin_ns - margin, begin_ns + span + margin, plotWidth()});
}

void TimelineView::setHighlight(int step, int microbatch) {
  if (step == highlight_step_ && microbatch == highlight_microbatch_) return;
  highlight_step_ = microbatch >= 0 ? step : -1;
  highlight_microbatch_ = microbatch >= 0 ? microbatch : -1;
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString TimelineView::arrowNotice() const { return painter_->notice; }
std::size_t TimelineView::arrowsDrawn() const { return painter_->arrows_drawn; }

QRect TimelineView::arrowNoticeRect() const { return painter_->notice_rect; }

Viewport TimelineView::viewport() const { return Viewport{t0_ns_, t1_ns_, plotWidth()}; }

void TimelineView::setPathOverlay(std::vector<PathMark> marks) {
  path_ = std::move(marks);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void TimelineView::setHeaderVisible(bool on) {
  header_->setVisible(on);
  plot_->xAxis->setLabel(on ? kTimeAxisLabel : QString());
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

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

void TimelineView::syncAxes() {
  plot_->xAxis->setRange(t0_ns_ / 1e6, t1_ns_ / 1e6);
  // About one time label per 110 px, so that labels like "1190.5" never run together.
  plot_->xAxis->ticker()->setTickCount(std::clamp(static_cast<int>(plotWidth() / 110), 2, 10));
}

// Background, axes, tick labels and grid from the application's palette; the lanes take
// the table's light or dark colours at paint time (LanePainter::takeColors).
void TimelineView::applyPalette() {
  const QPalette& pal = palette();
  const QColor text = pal.color(QPalette::WindowText);
  QColor grid = text;
  grid.setAlpha(45);  // visible in the gaps between spans, quiet behind them
  plot_->setBackground(pal.brush(QPalette::Window));
  plot_->axisRect()->setBackground(pal.brush(QPalette::Base));
  for (QCPAxis* axis : plot_->axisRect()->axes()) {
    axis->setBasePen(QPen(text, 0));
    axis->setTickPen(QPen(text, 0));
    axis->setSubTickPen(QPen(text, 0));
    axis->setTickLabelColor(text);
    axis->setLabelColor(text);
    axis->grid()->setPen(QPen(grid, 0, Qt::DotLine));
    axis->grid()->setZeroLinePen(Qt::NoPen);
  }
}

void TimelineView::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::StyleChange) {
    applyPalette();
    plot_->replot(QCustomPlot::rpQueuedReplot);
  }
}

// Row heights in y-axis units: a full row for each stream's top level, compact rows for
// deeper levels (spans that lie inside or across a span of the row above), and a gap
// between ranks. A deeper row says what it is, so no row is left unnamed.
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
    if (k.depth == 0) {
      // A gpu rank says so (its compute spans are GPU work: docs/figures.md, GPU ranks).
      const QString gpu = data_.gpu_device(k.rank);
      const QString rank = gpu.isEmpty() ? QStringLiteral("rank %1").arg(k.rank)
                                         : QStringLiteral("rank %1 (%2)").arg(k.rank).arg(gpu);
      ticks.insert(y + h / 2, QStringLiteral("%1 · %2").arg(rank, stream_label(k.stream)));
    } else {
      ticks.insert(y + h / 2, QStringLiteral("↳ spans inside the row above"));
    }
    y += h;
  }
  qSharedPointerCast<QCPAxisTickerText>(plot_->yAxis->ticker())->setTicks(ticks);
  plot_->yAxis->setRange(0, std::max(y, 1.0));
}

void TimelineView::onTick() {
  if (data_.revision() == painted_revision_) return;  // idle: no repaint at all
  painted_revision_ = data_.revision();
  rebuildRows();
  legend_->setKinds(data_.kinds_present());
  if (follow_) {
    const double span = t1_ns_ - t0_ns_, end = static_cast<double>(data_.end_ns());
    t0_ns_ = end - span;
    t1_ns_ = end;
    syncAxes();
    emit viewportChanged();
  } else if (!touched_) {
    fitAll();
  }
  emit dataChanged();
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void TimelineView::replotNow() {
  onTick();
  // The header's texts may have changed size (step count, legend): lay out now, as the
  // event loop would before the next paint, so the replot sees the final plot size.
  for (int i = 0; i < 3; ++i) QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
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
  const QString meaning = concept_label(data_, *hit);
  const QString text = describe_event(data_.event(*hit), data_.event_rank(*hit), layer_names_);
  return meaning.isEmpty() ? text : text + QLatin1Char('\n') + meaning;
}

void TimelineView::appendUpdates(const std::vector<loom::trace::UpdateRecord>& updates) {
  data_.append_updates(updates);  // the revision bump replots
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
