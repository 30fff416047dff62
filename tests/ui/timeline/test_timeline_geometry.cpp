// Timeline geometry without a display: the time <-> pixel mapping, zoom around an anchor,
// pan, folding of narrow spans (what makes full zoom over a million spans cheap) and hit
// testing. Every check is a concrete number so an off-by-one in the math shows.
#include <QtTest>

#include "loom/ui/timeline/geometry.h"

using namespace loom::ui::timeline;
using loom::trace::EventKind;

namespace {

// n spans of `width` ns every `pitch` ns starting at `first`; event index = position.
std::vector<Span> regular_lane(int n, std::int64_t first, std::int64_t width, std::int64_t pitch) {
  std::vector<Span> lane;
  for (int i = 0; i < n; ++i) {
    const std::int64_t s = first + i * pitch;
    lane.push_back(Span{s, s + width, static_cast<std::uint32_t>(i), i % 2 ? EventKind::Backward : EventKind::Forward});
  }
  return lane;
}

}  // namespace

class TestTimelineGeometry : public QObject {
  Q_OBJECT
 private slots:
  void timePixelRoundTrip();
  void zoomKeepsAnchorTime();
  void zoomStopsAtMinimumSpan();
  void panMovesWindow();
  void wideSpansStaySeparate();
  void narrowNeighboursMerge();
  void nothingOutsideViewport();
  void manyTinySpansAtMostOneItemPerPixel();
  void foldKeepsWideSpanAfterNarrowRun();
  void hitTestFindsSpanAndNotGaps();
};

void TestTimelineGeometry::timePixelRoundTrip() {
  const Viewport v{1000, 3000, 200};
  QCOMPARE(time_to_px(v, 1000), 0.0);
  QCOMPARE(time_to_px(v, 2000), 100.0);
  QCOMPARE(time_to_px(v, 3000), 200.0);
  QCOMPARE(px_to_time(v, 50), 1500.0);
  for (double t : {1000.0, 1234.5, 2999.0, -500.0, 10000.0}) QVERIFY(qAbs(px_to_time(v, time_to_px(v, t)) - t) < 1e-9);
}

void TestTimelineGeometry::zoomKeepsAnchorTime() {
  const Viewport v{0, 1e6, 1000};
  const double anchor_t = px_to_time(v, 250);
  const Viewport z = zoom_at(v, 250, 4.0);
  QCOMPARE(z.t1_ns - z.t0_ns, 250000.0);
  QVERIFY(qAbs(px_to_time(z, 250) - anchor_t) < 1e-6);
  QCOMPARE(z.t0_ns, 187500.0);
  const Viewport out = zoom_at(z, 250, 0.25);  // zooming back out restores the window
  QVERIFY(qAbs(out.t0_ns - 0) < 1e-6 && qAbs(out.t1_ns - 1e6) < 1e-6);
}

void TestTimelineGeometry::zoomStopsAtMinimumSpan() {
  const Viewport v{0, 10000, 100};
  const Viewport z = zoom_at(v, 50, 1000.0, 1000);
  QCOMPARE(z.t1_ns - z.t0_ns, 1000.0);
  QCOMPARE(px_to_time(z, 50), 5000.0);
}

void TestTimelineGeometry::panMovesWindow() {
  const Viewport v{0, 1000, 100};
  const Viewport p = pan_by(v, 10);  // drag right by 10 px: 100 ns earlier
  QCOMPARE(p.t0_ns, -100.0);
  QCOMPARE(p.t1_ns, 900.0);
  QCOMPARE(p.width_px, 100.0);
}

void TestTimelineGeometry::wideSpansStaySeparate() {
  const auto lane = regular_lane(5, 0, 100, 200);  // 10 px wide, 10 px gaps at 1 ns/10 px
  std::vector<DrawItem> out;
  fold_visible(lane, Viewport{0, 1000, 100}, 3, out);
  QCOMPARE(out.size(), std::size_t{5});
  for (std::size_t i = 0; i < out.size(); ++i) {
    QCOMPARE(out[i].count, 1u);
    QCOMPARE(out[i].first_event, static_cast<std::uint32_t>(i));
    QCOMPARE(out[i].x0_px, 20.0 * static_cast<double>(i));
    QCOMPARE(out[i].x1_px, 20.0 * static_cast<double>(i) + 10);
  }
  QCOMPARE(out[1].kind, EventKind::Backward);
}

void TestTimelineGeometry::narrowNeighboursMerge() {
  // 10 spans 0.5 px wide every 1 px, then a gap of 10 px, then 3 more: two folded items.
  std::vector<Span> lane = regular_lane(10, 0, 5, 10);
  for (int i = 0; i < 3; ++i)
    lane.push_back(Span{200 + i * 10, 205 + i * 10, static_cast<std::uint32_t>(10 + i), EventKind::AllReduce});
  std::vector<DrawItem> out;
  fold_visible(lane, Viewport{0, 1000, 100}, 3, out);
  QCOMPARE(out.size(), std::size_t{2});
  QCOMPARE(out[0].count, 10u);
  QCOMPARE(out[0].first_event, 0u);
  QCOMPARE(out[0].x0_px, 0.0);
  QCOMPARE(out[0].x1_px, 9.5);
  QCOMPARE(out[1].count, 3u);
  QCOMPARE(out[1].first_event, 10u);
  QCOMPARE(out[1].x0_px, 20.0);
  QCOMPARE(out[1].kind, EventKind::AllReduce);
}

void TestTimelineGeometry::nothingOutsideViewport() {
  const auto lane = regular_lane(100, 0, 100, 200);  // spans at 0, 200, ..., 19800
  std::vector<DrawItem> out;
  fold_visible(lane, Viewport{5050, 5900, 850}, 3, out);  // 1 px per ns
  // Visible: the span [5000,5100) cut at the left edge, [5200,5300), ..., [5800,5900).
  QCOMPARE(out.size(), std::size_t{5});
  QCOMPARE(out.front().first_event, 25u);
  QCOMPARE(out.front().x0_px, -1.0);  // clamped
  QCOMPARE(out.back().first_event, 29u);
  for (const auto& d : out) QVERIFY(d.x1_px > 0 && d.x0_px < 850);
  out.clear();
  fold_visible(lane, Viewport{30000, 40000, 100}, 3, out);
  QVERIFY(out.empty());
}

void TestTimelineGeometry::manyTinySpansAtMostOneItemPerPixel() {
  // 100k spans of 1 ns every 3 ns (gaps narrower than a pixel at this zoom) over 1000 px.
  const auto lane = regular_lane(100000, 0, 1, 3);
  std::vector<DrawItem> out;
  fold_visible(lane, Viewport{0, 300000, 1000}, 2, out);
  QVERIFY2(out.size() <= 1000, qPrintable(QString::number(out.size())));
  std::uint64_t total = 0;
  for (const auto& d : out) total += d.count;
  QCOMPARE(total, std::uint64_t{100000});  // every span is accounted for exactly once
  // Spread out (1 ns spans one per 3.3 px, most of the lane beyond the right edge): the
  // 304 visible ones stay separate, since their gaps are wider than min_px.
  const auto sparse = regular_lane(100000, 0, 1, 330000);
  out.clear();
  fold_visible(sparse, Viewport{0, 1e8, 1000}, 2, out);
  QCOMPARE(out.size(), std::size_t{304});
  QCOMPARE(out.back().first_event, 303u);
}

void TestTimelineGeometry::foldKeepsWideSpanAfterNarrowRun() {
  // Narrow spans followed immediately by a wide one: the wide one must stay its own item.
  std::vector<Span> lane = regular_lane(20, 0, 1, 2);  // [0..40) ns, 0.1 px each
  lane.push_back(Span{40, 500, 20, EventKind::Optimizer});
  std::vector<DrawItem> out;
  fold_visible(lane, Viewport{0, 1000, 100}, 3, out);
  QCOMPARE(out.size(), std::size_t{2});
  QCOMPARE(out[0].count, 20u);
  QCOMPARE(out[1].first_event, 20u);
  QCOMPARE(out[1].kind, EventKind::Optimizer);
  QCOMPARE(out[1].x0_px, 4.0);
  QCOMPARE(out[1].x1_px, 50.0);
}

void TestTimelineGeometry::hitTestFindsSpanAndNotGaps() {
  const auto lane = regular_lane(10, 0, 100, 200);  // [0,100), [200,300), ...
  const Viewport v{0, 2000, 2000};                  // 1 px per ns
  QCOMPARE(hit_test(lane, v, 250).value_or(999), 1u);
  QCOMPARE(hit_test(lane, v, 0).value_or(999), 0u);
  QCOMPARE(hit_test(lane, v, 1850).value_or(999), 9u);
  QVERIFY(!hit_test(lane, v, 150, 2).has_value());   // in the middle of a gap
  QCOMPARE(hit_test(lane, v, 301.5, 2).value_or(999), 1u);  // just past the end, within slop
  QCOMPARE(hit_test(lane, v, 198.5, 2).value_or(999), 1u);  // just before the start
  QVERIFY(!hit_test(lane, v, 2500, 2).has_value());
  QVERIFY(!hit_test(std::span<const Span>{}, v, 10).has_value());
}

QTEST_GUILESS_MAIN(TestTimelineGeometry)
#include "test_timeline_geometry.moc"
