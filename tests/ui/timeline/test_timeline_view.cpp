// TimelineView offscreen: hovering a known span gives its description, wheel zoom moves
// the window around the cursor and switches follow-latest off, follow-latest keeps the
// data's end in view as batches arrive, and a replot actually runs the lane painter.
#include <QSignalSpy>
#include <QWheelEvent>
#include <QtTest>
#include <qcustomplot.h>

#include "loom/ui/timeline/timeline_view.h"

using namespace loom::ui::timeline;
using loom::trace::Event;
using loom::trace::EventKind;
using loom::trace::Stream;

namespace {

Event ev(EventKind kind, std::int64_t start, std::int64_t end, int layer = -1) {
  Event e;
  e.kind = kind;
  e.start_ns = start;
  e.end_ns = end;
  e.layer = layer;
  e.step = 0;
  return e;
}

// Where the middle of time t (origin-relative) on lane `lane` is, in view coordinates.
QPoint point_at(const TimelineView& view, std::size_t lane_index, double t_ns) {
  const QCPAxisRect* rect = view.plot()->axisRect();
  const Viewport v = view.viewport();
  const int x = rect->left() + static_cast<int>(std::lround(time_to_px(v, t_ns)));
  // Scan rows for the lane: eventAt tells which lane a y belongs to through its hit.
  for (int y = rect->top(); y < rect->bottom(); ++y) {
    const auto hit = view.eventAt(QPoint(x, y));
    if (hit && view.data().event_lane(*hit) == static_cast<int>(lane_index)) return QPoint(x, y + 2);
  }
  return QPoint(-1, -1);
}

}  // namespace

class TestTimelineView : public QObject {
  Q_OBJECT
 private slots:
  void tooltipDescribesHoveredSpan();
  void wheelZoomMovesWindowAndStopsFollowing();
  void followLatestKeepsEndInView();
  void fitAllCoversData();
};

void TestTimelineView::tooltipDescribesHoveredSpan() {
  TimelineView view;
  view.resize(1000, 400);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  view.setLayerNames({"flatten", "fc1", "relu"});
  // Step [0, 10 ms) with Forward fc1 [1, 4) ms and Backward relu [5, 9) ms inside it.
  const std::vector<Event> events = {ev(EventKind::Forward, 1000000, 4000000, 1),
                                     ev(EventKind::Backward, 5000000, 9000000, 2),
                                     ev(EventKind::Step, 0, 10000000)};
  view.appendEvents(0, events);
  view.replotNow();
  QVERIFY(view.lastPaintMs() > 0);
  QCOMPARE(view.data().lanes().size(), std::size_t{2});
  const QPoint p = point_at(view, 1, 2500000);  // the middle of the forward span
  QVERIFY(p.x() > 0);
  const QString tip = view.toolTipAt(p);
  QVERIFY2(tip.startsWith(QStringLiteral("forward · rank 0 · compute\nlayer fc1 (#1)")), qPrintable(tip));
  QVERIFY(tip.contains(QStringLiteral("duration 3.00 ms")));
  const QPoint q = point_at(view, 1, 7000000);
  QVERIFY(view.toolTipAt(q).startsWith(QStringLiteral("backward")));
  // Between the two children on their row: nothing (the gap is 1 ms = 10% of the width).
  QCOMPARE(view.toolTipAt(QPoint(view.plot()->axisRect()->left() +
                                     static_cast<int>(time_to_px(view.viewport(), 4500000)), p.y())),
           QString());
  // The step row above it shows the Step.
  QVERIFY(view.toolTipAt(point_at(view, 0, 4500000)).startsWith(QStringLiteral("step · rank 0")));
}

void TestTimelineView::wheelZoomMovesWindowAndStopsFollowing() {
  TimelineView view;
  view.resize(1000, 400);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  view.appendEvents(0, std::vector<Event>{ev(EventKind::Forward, 0, 100000000)});
  view.replotNow();
  view.setViewport(Viewport{0, 100000000, 1});
  view.setFollowLatest(true);
  QSignalSpy follow(&view, &TimelineView::followLatestChanged);
  QSignalSpy moved(&view, &TimelineView::viewportChanged);
  const QCPAxisRect* rect = view.plot()->axisRect();
  const QPointF at(rect->left() + rect->width() / 4, rect->top() + 10);  // whole pixels
  const Viewport before = view.viewport();
  const double anchor_t = px_to_time(before, at.x() - rect->left());
  QWheelEvent wheel(at, view.plot()->mapToGlobal(at), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
                    Qt::NoScrollPhase, false);
  QApplication::sendEvent(view.plot(), &wheel);
  const Viewport after = view.viewport();
  QVERIFY(moved.count() >= 1);
  QVERIFY(qAbs((after.t1_ns - after.t0_ns) - (before.t1_ns - before.t0_ns) / 1.2) < 1.0);
  QVERIFY(qAbs(px_to_time(after, at.x() - rect->left()) - anchor_t) < 1.0);
  QVERIFY(!view.followLatest());
  QCOMPARE(follow.count(), 1);
  QCOMPARE(follow.at(0).at(0).toBool(), false);
  // The x axis shows the same window in ms.
  QVERIFY(qAbs(view.plot()->xAxis->range().lower - after.t0_ns / 1e6) < 1e-9);
}

void TestTimelineView::followLatestKeepsEndInView() {
  TimelineView view;
  view.resize(800, 300);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  view.appendEvents(0, std::vector<Event>{ev(EventKind::Forward, 0, 1000000)});
  view.replotNow();
  view.setViewport(Viewport{0, 2000000, 1});  // a 2 ms window
  view.setFollowLatest(true);
  QVERIFY(view.followLatest());
  for (int i = 1; i <= 5; ++i) {
    const std::int64_t t = i * 10000000LL;
    view.appendEvents(0, std::vector<Event>{ev(EventKind::Backward, t, t + 1000000)});
    view.replotNow();
    const Viewport v = view.viewport();
    QCOMPARE(v.t1_ns, static_cast<double>(t + 1000000));  // ends at the data's end
    QCOMPARE(v.t1_ns - v.t0_ns, 2000000.0);               // the width the user chose
  }
  // The throttle timer does the same without replotNow.
  view.appendEvents(0, std::vector<Event>{ev(EventKind::Backward, 90000000, 91000000)});
  QTRY_COMPARE_WITH_TIMEOUT(view.viewport().t1_ns, 91000000.0, 2000);
  // A pan turns following off; new data then leaves the window alone.
  view.zoomAt(QPoint(view.plot()->axisRect()->left() + 10, 50), 1.0);
  QVERIFY(!view.followLatest());
  const Viewport fixed = view.viewport();
  view.appendEvents(0, std::vector<Event>{ev(EventKind::Backward, 95000000, 96000000)});
  view.replotNow();
  QCOMPARE(view.viewport().t1_ns, fixed.t1_ns);
}

void TestTimelineView::fitAllCoversData() {
  TimelineView view;
  view.resize(800, 300);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  view.appendEvents(1, std::vector<Event>{ev(EventKind::Forward, 5000000, 6000000)});
  view.appendEvents(0, std::vector<Event>{ev(EventKind::Forward, 2000000, 9000000)});
  view.replotNow();  // untouched view: fits by itself
  const Viewport v = view.viewport();
  QVERIFY(v.t0_ns <= -3000000 && v.t0_ns > -3200000);  // rank 0 starts 3 ms before the origin
  QVERIFY(v.t1_ns >= 4000000 && v.t1_ns < 4200000);
  view.setViewport(Viewport{0, 1000, 1});
  view.fitAll();
  QCOMPARE(view.viewport().t0_ns, v.t0_ns);
}

QTEST_MAIN(TestTimelineView)
#include "test_timeline_view.moc"
