// TimelineView offscreen: hovering a known span gives its description, wheel zoom moves
// the window around the cursor and switches follow-latest off, follow-latest keeps the
// data's end in view as batches arrive, and a replot actually runs the lane painter.
// Zoomed out, a column of mixed narrow spans is painted in the colours of its kinds in
// proportion to their time; the step navigator names and zooms to steps and micro-batches
// (buttons and [ ] { } keys); the dark palette reaches background, axes and legend; the
// arrows-hidden notice fits inside the plotting area of a narrow view.
#include <QLabel>
#include <QSignalSpy>
#include <QSpinBox>
#include <QToolButton>
#include <QWheelEvent>
#include <QtTest>
#include <map>
#include <qcustomplot.h>

#include "loom/test/events.h"
#include "loom/test/palette.h"
#include "loom/ui/span_kinds.h"
#include "loom/ui/timeline/kind_legend.h"
#include "loom/ui/timeline/replay_bar.h"
#include "loom/ui/timeline/step_navigator.h"
#include "loom/ui/timeline/timeline_view.h"

using namespace loom::ui::timeline;
using loom::trace::Event;
using loom::trace::EventKind;
using loom::trace::Stream;
using loom::testing::dark_palette;

namespace {

// Step 0 on the compute stream.
Event ev(EventKind kind, std::int64_t start, std::int64_t end, int layer = -1) {
  return loom::testing::span_ns(kind, Stream::Compute, start, end, 0, layer);
}

// Pixels of each colour inside a rectangle of an image.
std::map<QRgb, int> color_counts(const QImage& image, const QRect& r) {
  std::map<QRgb, int> out;
  for (int y = r.top(); y <= r.bottom(); ++y)
    for (int x = r.left(); x <= r.right(); ++x) ++out[image.pixel(x, y)];
  return out;
}

// Three steps on two ranks: per step a Step span [s, s + 9 ms) holding two micro-batches
// of Forward spans (1 ms each, at s+1 and s+4 ms) and a Backward [s+6, s+8) ms.
std::vector<Event> three_steps(int rank) {
  std::vector<Event> out;
  for (int step = 0; step < 3; ++step) {
    const std::int64_t s = step * 10000000LL + rank * 200000;
    for (int m = 0; m < 2; ++m) {
      Event f = ev(EventKind::Forward, s + 1000000 + m * 3000000, s + 2000000 + m * 3000000);
      f.step = step, f.microbatch = static_cast<std::int16_t>(m);
      out.push_back(f);
    }
    Event b = ev(EventKind::Backward, s + 6000000, s + 8000000);
    b.step = step;
    out.push_back(b);
    Event st = ev(EventKind::Step, s, s + 9000000);
    st.step = step;
    out.push_back(st);
  }
  return out;
}

// A point on lane `lane` at time t (origin-relative), in view coordinates, found by hit
// testing down the plot (the timeline's header sits above the plot).
QPoint point_at(const TimelineView& view, std::size_t lane_index, double t_ns) {
  const QCPAxisRect* rect = view.plot()->axisRect();
  const Viewport v = view.viewport();
  const int x = rect->left() + static_cast<int>(std::lround(time_to_px(v, t_ns)));
  // Scan rows for the lane: eventAt tells which lane a y belongs to through its hit.
  for (int y = 0; y < view.height(); ++y) {
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
  void foldedColumnsPaintTheirMix();
  void stepNavigatorZoomsToStepsAndMicrobatches();
  void darkPaletteReachesPlotAndLegend();
  void arrowNoticeFitsNarrowView();
  void piledArrowsAreHiddenWhereTheyPile();
  void replayIconsFollowThePalette();
  void replayLabelFollowsTheRunOnScreen();
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

void TestTimelineView::foldedColumnsPaintTheirMix() {
  // One lane, zoomed out over 100 ms in ~1000 px: a first half of alternating forward
  // (20 µs) and wait (60 µs) spans, far too narrow to draw one by one, and a second half
  // of forwards only, then a gap. Folded columns must show both kinds, wait about three
  // times as tall as forward, and the solid half only forward.
  TimelineView view;
  view.resize(1100, 300);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  std::vector<Event> events;
  for (std::int64_t t = 0; t < 50000000; t += 80000) {
    events.push_back(ev(EventKind::Forward, t, t + 20000));
    events.push_back(ev(EventKind::Wait, t + 20000, t + 80000));
  }
  for (std::int64_t t = 50000000; t < 80000000; t += 40000) events.push_back(ev(EventKind::Forward, t, t + 40000));
  view.appendEvents(0, events);
  view.replotNow();
  view.setViewport(Viewport{0, 100000000, 1});
  view.replotNow();
  const QImage image = view.grab().toImage();
  const QCPAxisRect* rect = view.plot()->axisRect();
  auto view_x = [&](double t) {
    return view.plot()->mapTo(&view, QPoint(rect->left() + static_cast<int>(time_to_px(view.viewport(), t)), 0)).x();
  };
  const QPoint top = view.plot()->mapTo(&view, rect->topLeft());
  const QRect mixed(view_x(10e6), top.y(), view_x(40e6) - view_x(10e6), rect->height());
  const QRect solid(view_x(55e6), top.y(), view_x(75e6) - view_x(55e6), rect->height());
  const QRgb forward = loom::ui::event_kind_color(EventKind::Forward).rgb();
  const QRgb wait = loom::ui::event_kind_color(EventKind::Wait).rgb();
  auto mix = color_counts(image, mixed);
  QVERIFY2(mix[forward] > 0 && mix[wait] > 0, qPrintable(QStringLiteral("%1 %2").arg(mix[forward]).arg(mix[wait])));
  const double ratio = static_cast<double>(mix[wait]) / mix[forward];
  QVERIFY2(ratio > 2.4 && ratio < 3.6, qPrintable(QString::number(ratio)));  // 60 µs : 20 µs
  auto one = color_counts(image, solid);
  QVERIFY(one[forward] > 0);
  QCOMPARE(one[wait], 0);
}

void TestTimelineView::stepNavigatorZoomsToStepsAndMicrobatches() {
  TimelineView view;
  view.resize(1000, 300);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  view.activateWindow();
  QVERIFY(QTest::qWaitForWindowActive(&view));
  StepNavigator* nav = view.stepNavigator();
  QCOMPARE(nav->text(), QStringLiteral("no steps yet"));
  view.appendEvents(0, three_steps(0));
  view.appendEvents(1, three_steps(1));
  view.replotNow();
  view.fitAll();
  QCOMPARE(nav->stepCount(), 3);
  QCOMPARE(nav->text(), QStringLiteral("steps 0–2 of 3"));
  QCOMPARE(nav->currentStep(), 1);  // under the middle of the window
  // ] : the next step, whole (over both ranks: rank 1 runs 0.2 ms behind), with a margin.
  QTest::keyClick(&view, Qt::Key_BracketRight);
  QCOMPARE(nav->currentStep(), 2);
  QCOMPARE(nav->text(), QStringLiteral("step 2 of 3"));
  Viewport v = view.viewport();
  QVERIFY(v.t0_ns < 20000000 && v.t0_ns > 19000000);
  QVERIFY(v.t1_ns > 29200000 && v.t1_ns < 30000000);
  QVERIFY(!view.followLatest());
  QTest::keyClick(&view, Qt::Key_BracketLeft);
  QCOMPARE(nav->currentStep(), 1);
  // } : micro-batch 0 of step 1, then 1: their forwards on both ranks only.
  QTest::keyClick(&view, Qt::Key_BraceRight, Qt::ShiftModifier);
  v = view.viewport();
  QVERIFY2(v.t0_ns > 10900000 && v.t0_ns < 11000000, qPrintable(QString::number(v.t0_ns)));
  QVERIFY(v.t1_ns > 12200000 && v.t1_ns < 12300000);
  QVERIFY(nav->nextMicrobatchAction()->isEnabled());
  QCOMPARE(view.highlightStep(), 1);
  QCOMPARE(view.highlightMicrobatch(), 0);
  nav->nextMicrobatch();
  QVERIFY(view.viewport().t0_ns > 13900000 && view.viewport().t0_ns < 14000000);
  QCOMPARE(nav->currentStep(), 1);
  QCOMPARE(view.highlightMicrobatch(), 1);
  // Micro-batch 1's forward in its colour; step 1's backward (no micro-batch) faded.
  view.setViewport(Viewport{9000000, 21000000, 1});  // the whole step, highlight kept
  view.replotNow();
  QCOMPARE(view.highlightMicrobatch(), 1);
  {
    const QImage image = view.grab().toImage();
    const QPoint fwd = point_at(view, 1, 14500000), bwd = point_at(view, 1, 17000000);
    QVERIFY(fwd.x() > 0 && bwd.x() > 0);
    QCOMPARE(image.pixelColor(fwd).rgb(), loom::ui::event_kind_color(EventKind::Forward).rgb());
    QVERIFY(image.pixelColor(bwd).rgb() != loom::ui::event_kind_color(EventKind::Backward).rgb());
  }
  QTest::keyClick(&view, Qt::Key_BraceLeft);  // a layout that sends the brace without Shift
  QVERIFY(view.viewport().t0_ns > 10900000 && view.viewport().t0_ns < 11000000);
  QVERIFY(!nav->zoomToMicrobatch(1, 2));  // there is no third
  // Zoomed out, nothing stays faded.
  QCOMPARE(view.highlightMicrobatch(), 0);
  view.fitAll();
  QCOMPARE(view.highlightMicrobatch(), -1);
  // The spin box jumps on a typed step number.
  auto* spin = nav->findChild<QSpinBox*>(QStringLiteral("stepSpin"));
  QVERIFY(spin);
  spin->setValue(0);
  QCOMPARE(nav->currentStep(), 0);
  QCOMPARE(view.highlightMicrobatch(), -1);  // a whole step: nothing faded
  QVERIFY(view.viewport().t1_ns < 10000000);
}

void TestTimelineView::darkPaletteReachesPlotAndLegend() {
  TimelineView view;
  view.resize(800, 300);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  view.appendEvents(0, three_steps(0));
  view.replotNow();
  const QPalette dark = dark_palette();
  view.setPalette(dark);
  view.replotNow();
  QCOMPARE(view.plot()->axisRect()->backgroundBrush().color(), dark.color(QPalette::Base));
  QCOMPARE(view.plot()->xAxis->tickLabelColor(), dark.color(QPalette::WindowText));
  QCOMPARE(view.plot()->yAxis->tickLabelColor(), dark.color(QPalette::WindowText));
  // Empty plot area reads as the dark base, not white.
  const QImage image = view.grab().toImage();
  const QPoint corner = view.plot()->mapTo(&view, view.plot()->axisRect()->bottomRight() - QPoint(3, 3));
  QCOMPARE(image.pixelColor(corner).rgb(), dark.color(QPalette::Base).rgb());
  for (const auto& entry : view.legend()->entries()) QCOMPARE(entry.color, loom::ui::event_kind_color(entry.kind, true));
  QCOMPARE(view.legend()->entries().size(), std::size_t{3});  // step, forward, backward
}

void TestTimelineView::arrowNoticeFitsNarrowView() {
  // 2100 matched messages between two ranks in view, in a view 420 px wide.
  TimelineView view;
  view.resize(420, 260);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  std::vector<Event> sends, recvs;
  for (int i = 0; i < 2100; ++i) {
    Event s = ev(EventKind::Send, i * 1000, i * 1000 + 400);
    s.stream = Stream::Comm, s.peer = 1, s.message = i;
    Event r = ev(EventKind::Recv, i * 1000 + 300, i * 1000 + 700);
    r.stream = Stream::Comm, r.peer = 0, r.message = i;
    sends.push_back(s);
    recvs.push_back(r);
  }
  view.appendEvents(0, sends);
  view.appendEvents(1, recvs);
  view.replotNow();
  view.fitAll();
  view.replotNow();
  QCOMPARE(view.data().arrows().size(), std::size_t{2100});
  QVERIFY(view.arrowNotice().contains(QStringLiteral("2,100 messages")));
  const QRect area = view.plot()->axisRect()->rect();
  const QRect box = view.arrowNoticeRect();
  QVERIFY2(area.contains(box), qPrintable(QStringLiteral("%1,%2 %3x%4 in %5x%6").arg(box.x()).arg(box.y())
                                              .arg(box.width()).arg(box.height()).arg(area.width()).arg(area.height())));
  // Zoomed in, arrows are drawn and the notice is gone.
  view.setViewport(Viewport{0, 50000, 1});
  view.replotNow();
  QVERIFY(view.arrowNotice().isEmpty());
}

// 60 messages within 60 µs of a 60 ms view (a burst of setup probes, far below the
// 2,000 cap) and 10 spread over the rest: the burst would paint one solid block, so only
// the 10 are drawn and the notice says how many are hidden; zoomed into the burst, all of
// its arrows are drawn.
void TestTimelineView::piledArrowsAreHiddenWhereTheyPile() {
  TimelineView view;
  view.resize(900, 300);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  std::vector<Event> sends, recvs;
  auto message = [&](std::int64_t t, int id) {
    Event s = ev(EventKind::Send, t, t + 400);
    s.stream = Stream::Comm, s.peer = 1, s.message = id;
    Event r = ev(EventKind::Recv, t + 300, t + 700);
    r.stream = Stream::Comm, r.peer = 0, r.message = id;
    sends.push_back(s);
    recvs.push_back(r);
  };
  sends.push_back(ev(EventKind::Step, 0, 100));  // the view's origin at 0
  for (int i = 0; i < 60; ++i) message(1'000'000 + i * 1000, i);
  for (int i = 0; i < 10; ++i) message(6'000'000 + i * 5'000'000, 100 + i);
  view.appendEvents(0, sends);
  view.appendEvents(1, recvs);
  view.replotNow();
  view.setViewport(Viewport{0, 60'000'000, 1});
  view.replotNow();
  QCOMPARE(view.arrowsDrawn(), std::size_t{10});
  QVERIFY2(view.arrowNotice().contains(QStringLiteral("60 of 70 messages")), qPrintable(view.arrowNotice()));
  view.setViewport(Viewport{900'000, 1'100'000, 1});
  view.replotNow();
  QCOMPARE(view.arrowsDrawn(), std::size_t{60});
  QVERIFY(view.arrowNotice().isEmpty());
}

// The replay buttons' media icons were the style's dark glyphs, nearly invisible on the
// dark palette: on a dark palette their opaque pixels are light (the button text colour).
void TestTimelineView::replayIconsFollowThePalette() {
  TimelineView view;
  loom::ui::timeline::ReplayBar bar(&view);
  QPalette dark = bar.palette();
  dark.setColor(QPalette::Window, QColor(0x2b, 0x2d, 0x31));
  dark.setColor(QPalette::Button, QColor(0x2b, 0x2d, 0x31));
  dark.setColor(QPalette::ButtonText, QColor(0xdf, 0xe1, 0xe5));
  bar.setPalette(dark);
  QCoreApplication::processEvents();
  for (const char* name : {"Back", "Play", "Forward"}) {
    QToolButton* button = nullptr;
    for (QToolButton* b : bar.findChildren<QToolButton*>())
      if (b->text() == QLatin1String(name)) button = b;
    QVERIFY2(button, name);
    const QImage icon = button->icon().pixmap(16, 16).toImage();
    double lightness = 0;
    int opaque = 0;
    for (int y = 0; y < icon.height(); ++y)
      for (int x = 0; x < icon.width(); ++x)
        if (icon.pixelColor(x, y).alpha() > 128) lightness += icon.pixelColor(x, y).lightness(), ++opaque;
    QVERIFY2(opaque > 0, name);
    QVERIFY2(lightness / opaque > 180, qPrintable(QString("%1: mean lightness %2").arg(name).arg(lightness / opaque)));
  }
}

// Out of replay the bar says how many steps the run on screen has: it said the previous
// run's count (0 over a 60-step run just opened, 60 over an emptied timeline, seen in
// loom-state-shots' pictures) until a replay started or ended.
void TestTimelineView::replayLabelFollowsTheRunOnScreen() {
  TimelineView view;
  loom::ui::timeline::ReplayBar bar(&view);
  QLabel* label = nullptr;
  for (QLabel* l : bar.findChildren<QLabel*>())
    if (l->text().endsWith(QLatin1String("steps"))) label = l;
  QVERIFY(label);
  QCOMPARE(label->text(), QStringLiteral("0 steps"));
  view.appendEvents(0, three_steps(0));
  view.replotNow();
  QCOMPARE(label->text(), QStringLiteral("3 steps"));
  view.clear();
  view.replotNow();
  QCOMPARE(label->text(), QStringLiteral("0 steps"));
}

QTEST_MAIN(TestTimelineView)
#include "test_timeline_view.moc"
