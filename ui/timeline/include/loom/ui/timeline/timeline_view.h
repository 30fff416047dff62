// The per-device timeline: a QCustomPlot whose lanes (one row per rank, stream and
// nesting depth) are painted by one custom layerable from TimelineData, with arrows from
// each send to its matching receive, under a header with the step navigator and the
// legend of the span kinds the run holds. Colours and names come from the one table of
// span kinds (loom/ui/span_kinds.h) for the application's palette, light or dark; zoomed
// out, columns of narrow spans show the share of each kind (geometry.h, fold_visible).
// Interaction is the view's own (wheel zoom around the cursor on x only, drag to pan,
// double-click to fit) so that any user move can switch follow-latest off. Appends only
// mark the data dirty; a 100 ms timer replots when the revision changed, so a flowing run
// repaints a few times a second and an idle one never.
#pragma once

#include <QPoint>
#include <QRect>
#include <QString>
#include <QWidget>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "loom/trace/event.h"
#include "loom/trace/records.h"
#include "loom/ui/timeline/geometry.h"
#include "loom/ui/timeline/timeline_data.h"

class QCustomPlot;
class QMouseEvent;
class QTimer;
class QWheelEvent;

namespace loom::ui::timeline {

class KindLegend;
class LanePainter;
class StepNavigator;

// One piece of a critical path drawn over the lanes: on `rank`, over [start, end) in
// aligned ns (rank 0's clock, like TimelineData's events).
struct PathMark {
  int rank = 0;
  std::int64_t start_ns = 0, end_ns = 0;
};

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineView(QWidget* parent = nullptr);
  ~TimelineView() override;

  void setClocks(std::vector<loom::trace::RankRecord> ranks);
  void appendEvents(int rank, std::span<const loom::trace::Event> events);
  void clear();
  void setLayerNames(std::vector<std::string> names);
  // Parameter-server updates, for the staleness named on push spans (concepts.h).
  void appendUpdates(const std::vector<loom::trace::UpdateRecord>& updates);

  // While on, each data update moves the window (keeping its width) to end at the data's
  // end. A user zoom, pan or fit switches it off.
  void setFollowLatest(bool on);
  bool followLatest() const { return follow_; }

  void fitAll();
  // Shows [begin, end) (origin-relative ns) with a small margin, as a user move.
  void showRange(double begin_ns, double end_ns);
  // Spans of one micro-batch of one step drawn in full colour and every other span drawn
  // faded, to follow a micro-batch through the pipeline; microbatch < 0: none.
  void setHighlight(int step, int microbatch);
  int highlightStep() const { return highlight_step_; }
  int highlightMicrobatch() const { return highlight_microbatch_; }
  Viewport viewport() const;  // origin-relative ns over the plotting area's width
  void setViewport(const Viewport& v);
  const TimelineData& data() const { return data_; }

  double lastPaintMs() const;  // how long the last lane paint took
  void replotNow();            // synchronous replot
  QString toolTipAt(QPoint pos) const;
  // The event under pos (view coordinates), if any.
  std::optional<std::uint32_t> eventAt(QPoint pos) const;
  // The same as a wheel notch (factor > 1 zooms in) at pos, as a user action.
  void zoomAt(QPoint pos, double factor);
  QCustomPlot* plot() const { return plot_; }
  // A critical path over the lanes: each mark a gold band over its rank's rows, a line
  // where the path jumps from one rank to another. Empty: none.
  void setPathOverlay(std::vector<PathMark> marks);
  const std::vector<PathMark>& pathOverlay() const { return path_; }
  // Without the header (step navigator, legend) and the time axis's title: for views that
  // stack several timelines under one legend of their own (the run comparison).
  void setHeaderVisible(bool on);
  StepNavigator* stepNavigator() const { return navigator_; }
  KindLegend* legend() const { return legend_; }
  // The notice painted when arrows are hidden, too many in view or piled into a few
  // pixels ("" when every arrow is drawn), and where it was painted (plot coordinates).
  QString arrowNotice() const;
  QRect arrowNoticeRect() const;
  std::size_t arrowsDrawn() const;  // by the latest paint
  // Replay: with a cursor (origin-relative ns) the lanes show only what had started by
  // then, spans cut at the cursor, and arrows whose message had arrived; a line marks it.
  void setReplayCursor(std::optional<double> t_ns);
  std::optional<double> replayCursor() const { return cursor_ns_; }
  // The latest start (origin-relative ns) of any span or column the last paint drew;
  // -infinity when it drew none. What a replay test checks against the cursor.
  double lastPaintedStartNs() const;

 signals:
  void followLatestChanged(bool on);
  void viewportChanged();
  void dataChanged();  // new events were laid out (after the throttled tick)
  void eventHovered(quint32 index);

 protected:
  void changeEvent(QEvent* event) override;

 private:
  friend class LanePainter;
  void onTick();
  void onWheel(QWheelEvent* event);
  void onMousePress(QMouseEvent* event);
  void onMouseMove(QMouseEvent* event);
  void onMouseRelease(QMouseEvent* event);
  void onDoubleClick(QMouseEvent* event);
  void userMoved();                 // switches follow-latest off
  void applyViewport(const Viewport& v);
  void syncAxes();
  void rebuildRows();
  void applyPalette();
  int laneAtY(int y) const;
  double plotLeft() const;
  double plotWidth() const;

  TimelineData data_;
  std::vector<std::string> layer_names_;
  QCustomPlot* plot_ = nullptr;
  QWidget* header_ = nullptr;
  std::vector<PathMark> path_;
  LanePainter* painter_ = nullptr;  // owned by plot_
  StepNavigator* navigator_ = nullptr;
  KindLegend* legend_ = nullptr;
  QTimer* timer_ = nullptr;
  double t0_ns_ = 0, t1_ns_ = 1e6;
  bool follow_ = false;
  int highlight_step_ = -1, highlight_microbatch_ = -1;
  bool touched_ = false;  // the window was set by a user or caller; don't auto-fit
  std::optional<double> cursor_ns_;
  std::uint64_t painted_revision_ = ~std::uint64_t{0};
  std::vector<double> row_top_, row_bottom_;  // per lane, in y-axis units (0 at the top)
  bool dragging_ = false;
  QPoint drag_last_;
};

}  // namespace loom::ui::timeline
