// Timeline geometry without a display: the time <-> pixel mapping, zoom around an anchor,
// pan, folding of narrow spans into columns that report the share of each kind they hold
// (zoomed out, a column must show its mix, never one solid colour) and hit testing. Every check is a concrete number so an off-by-one in the math shows.
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
  void replayCursorClipsTheWindow();
  void zoomKeepsAnchorTime();
  void zoomStopsAtMinimumSpan();
  void panMovesWindow();
  void coupledViewKeepsWindowRelativeToAnchor();
  void wideSpansStaySeparate();
  void narrowSpansFoldIntoColumns();
  void foldedColumnReportsMix();
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

// Run A's step 5 starts at 2 ms, run B's at 7 ms: A showing 1.5-2.5 ms puts B on 6.5-7.5 ms,
// at B's own width; coupling back returns A's window.
void TestTimelineGeometry::coupledViewKeepsWindowRelativeToAnchor() {
  const Viewport a{1.5e6, 2.5e6, 800};
  const Viewport b = coupled_viewport(a, 2e6, 7e6, 600);
  QCOMPARE(b.t0_ns, 6.5e6);
  QCOMPARE(b.t1_ns, 7.5e6);
  QCOMPARE(b.width_px, 600.0);
  const Viewport back = coupled_viewport(b, 7e6, 2e6, 800);
  QCOMPARE(back.t0_ns, a.t0_ns);
  QCOMPARE(back.t1_ns, a.t1_ns);
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
  Fold out;
  fold_visible(lane, Viewport{0, 1000, 100}, 3, out);
  QCOMPARE(out.items.size(), std::size_t{5});
  for (std::size_t i = 0; i < out.items.size(); ++i) {
    QCOMPARE(out.items[i].count, 1u);
    QVERIFY(!out.items[i].folded());
    QCOMPARE(out.items[i].first_event, static_cast<std::uint32_t>(i));
    QCOMPARE(out.items[i].x0_px, 20.0 * static_cast<double>(i));
    QCOMPARE(out.items[i].x1_px, 20.0 * static_cast<double>(i) + 10);
  }
  QCOMPARE(out.items[1].kind, EventKind::Backward);
  QVERIFY(out.mix.empty());
  QCOMPARE(out.share(out.items[1], EventKind::Backward), 1.0);
}

void TestTimelineGeometry::narrowSpansFoldIntoColumns() {
  // 10 spans 0.5 px wide every 1 px (10 ns per px, cells of 3 px = 30 ns), then 3 more
  // after a gap: the cells [0,30) [30,60) [60,90) [90,120) and [180,210) [210,240).
  std::vector<Span> lane = regular_lane(10, 0, 5, 10);
  for (int i = 0; i < 3; ++i)
    lane.push_back(Span{200 + i * 10, 205 + i * 10, static_cast<std::uint32_t>(10 + i), EventKind::AllReduce});
  Fold out;
  fold_visible(lane, Viewport{0, 1000, 100}, 3, out);
  QCOMPARE(out.items.size(), std::size_t{6});
  const std::uint32_t counts[] = {3, 3, 3, 1, 1, 2};
  for (std::size_t i = 0; i < 6; ++i) {
    QVERIFY(out.items[i].folded());
    QCOMPARE(out.items[i].count, counts[i]);
  }
  QCOMPARE(out.items[0].first_event, 0u);
  QCOMPARE(out.items[0].x0_px, 0.0);
  QCOMPARE(out.items[0].x1_px, 2.5);  // the third span ends at 25 ns
  QCOMPARE(out.items[0].extent_ns, 25.0);
  QCOMPARE(out.share(out.items[0], EventKind::Forward), 10.0 / 25.0);  // spans at 0 and 20
  QCOMPARE(out.share(out.items[0], EventKind::Backward), 5.0 / 25.0);
  QCOMPARE(out.items[0].kind, EventKind::Forward);  // the kind with the most time
  QCOMPARE(out.items[4].first_event, 10u);
  QCOMPARE(out.items[4].x0_px, 20.0);
  QCOMPARE(out.items[5].kind, EventKind::AllReduce);
  QCOMPARE(out.items[5].mix_count, 1u);
}

void TestTimelineGeometry::foldedColumnReportsMix() {
  // 10 ns per px, cells of 10 px = 100 ns. Cell [0,100): forward 30 ns, backward 20 ns,
  // nothing for 10 ns, wait 40 ns. Cell [100,200): optimizer throughout, in two spans.
  // Then a forward [280,320) that crosses into cell [300,400) and gives it its last 20 ns.
  const std::vector<Span> lane = {
      Span{0, 30, 0, EventKind::Forward},        Span{30, 50, 1, EventKind::Backward},
      Span{60, 100, 2, EventKind::Wait},         Span{100, 150, 3, EventKind::Optimizer},
      Span{150, 200, 4, EventKind::Optimizer},   Span{280, 320, 5, EventKind::Forward},
  };
  Fold out;
  fold_visible(lane, Viewport{0, 1000, 100}, 10, out);
  QCOMPARE(out.items.size(), std::size_t{4});
  const DrawItem& mixed = out.items[0];
  QVERIFY(mixed.folded());
  QCOMPARE(mixed.count, 3u);
  QCOMPARE(mixed.mix_count, 3u);
  QCOMPARE(mixed.extent_ns, 100.0);
  QCOMPARE(out.share(mixed, EventKind::Forward), 0.3);
  QCOMPARE(out.share(mixed, EventKind::Backward), 0.2);
  QCOMPARE(out.share(mixed, EventKind::Wait), 0.4);
  QCOMPARE(out.share(mixed, EventKind::AllReduce), 0.0);
  QVERIFY(qAbs(out.coverage(mixed) - 0.9) < 1e-12);  // 10 ns with no span
  QCOMPARE(mixed.kind, EventKind::Wait);              // the most time, not the last span
  // In EventKind order, so that neighbouring columns stack their kinds alike.
  const auto mix = out.mix_of(mixed);
  QCOMPARE(mix[0].kind, EventKind::Forward);
  QCOMPARE(mix[1].kind, EventKind::Backward);
  QCOMPARE(mix[2].kind, EventKind::Wait);

  const DrawItem& solid = out.items[1];
  QCOMPARE(solid.count, 2u);
  QCOMPARE(solid.mix_count, 1u);
  QCOMPARE(solid.kind, EventKind::Optimizer);
  QCOMPARE(out.share(solid, EventKind::Optimizer), 1.0);
  QCOMPARE(out.coverage(solid), 1.0);
  QCOMPARE(solid.x0_px, 10.0);
  QCOMPARE(solid.x1_px, 20.0);

  // The crossing span: counted once (where it starts), its time split at the boundary.
  QCOMPARE(out.items[2].count, 1u);
  QCOMPARE(out.items[3].count, 0u);
  QCOMPARE(out.mix_of(out.items[2])[0].ns, 20.0);
  QCOMPARE(out.mix_of(out.items[3])[0].ns, 20.0);
  QCOMPARE(out.items[3].x0_px, 30.0);
  QCOMPARE(out.items[3].x1_px, 32.0);
}

void TestTimelineGeometry::nothingOutsideViewport() {
  const auto lane = regular_lane(100, 0, 100, 200);  // spans at 0, 200, ..., 19800
  Fold out;
  fold_visible(lane, Viewport{5050, 5900, 850}, 3, out);  // 1 px per ns
  // Visible: the span [5000,5100) cut at the left edge, [5200,5300), ..., [5800,5900).
  QCOMPARE(out.items.size(), std::size_t{5});
  QCOMPARE(out.items.front().first_event, 25u);
  QCOMPARE(out.items.front().x0_px, -1.0);  // clamped
  QCOMPARE(out.items.back().first_event, 29u);
  for (const auto& d : out.items) QVERIFY(d.x1_px > 0 && d.x0_px < 850);
  out.clear();
  fold_visible(lane, Viewport{30000, 40000, 100}, 3, out);
  QVERIFY(out.items.empty());
}

void TestTimelineGeometry::manyTinySpansAtMostOneItemPerPixel() {
  // 100k spans of 1 ns every 3 ns (gaps narrower than a pixel at this zoom) over 1000 px.
  const auto lane = regular_lane(100000, 0, 1, 3);
  Fold out;
  fold_visible(lane, Viewport{0, 300000, 1000}, 2, out);
  QVERIFY2(out.items.size() <= 1000, qPrintable(QString::number(out.items.size())));
  std::uint64_t total = 0;
  double time = 0;
  for (const auto& d : out.items) total += d.count;
  for (const auto& k : out.mix) time += k.ns;
  QCOMPARE(total, std::uint64_t{100000});  // every span is accounted for exactly once
  QCOMPARE(time, 100000.0);                // and so is every nanosecond of them
  // A column in the middle is a third full, half forward and half backward.
  const DrawItem& middle = out.items[out.items.size() / 2];
  QVERIFY2(qAbs(out.coverage(middle) - 1.0 / 3) < 0.01, qPrintable(QString::number(out.coverage(middle))));
  QVERIFY(qAbs(out.share(middle, EventKind::Forward) - out.share(middle, EventKind::Backward)) < 0.01);
  // Spread out (1 ns spans one per 3.3 px, most of the lane beyond the right edge): the
  // 304 visible ones stay separate, one column each.
  const auto sparse = regular_lane(100000, 0, 1, 330000);
  out.clear();
  fold_visible(sparse, Viewport{0, 1e8, 1000}, 2, out);
  QCOMPARE(out.items.size(), std::size_t{304});
  QCOMPARE(out.items.back().first_event, 303u);
  QCOMPARE(out.coverage(out.items.back()), 1.0);  // a lone narrow span is drawn full height
}

void TestTimelineGeometry::foldKeepsWideSpanAfterNarrowRun() {
  // Narrow spans followed immediately by a wide one: the wide one must stay its own item.
  std::vector<Span> lane = regular_lane(20, 0, 1, 2);  // [0..40) ns, 0.1 px each
  lane.push_back(Span{40, 500, 20, EventKind::Optimizer});
  Fold out;
  fold_visible(lane, Viewport{0, 1000, 100}, 3, out);
  QCOMPARE(out.items.size(), std::size_t{3});  // cells [0,30) and [30,60), then the wide one
  QCOMPARE(out.items[0].count + out.items[1].count, 20u);
  QCOMPARE(out.items[2].first_event, 20u);
  QCOMPARE(out.items[2].kind, EventKind::Optimizer);
  QVERIFY(!out.items[2].folded());
  QCOMPARE(out.items[2].x0_px, 4.0);
  QCOMPARE(out.items[2].x1_px, 50.0);
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

void TestTimelineGeometry::replayCursorClipsTheWindow() {
  const Viewport v{100, 300, 400};  // 2 px per ns
  const Viewport before = clip_at_cursor(v, 150);
  QCOMPARE(before.t0_ns, 100.0);
  QCOMPARE(before.t1_ns, 150.0);
  QCOMPARE(before.width_px, 100.0);  // the same scale: 50 units over 100 px
  QCOMPARE(clip_at_cursor(v, 500).t1_ns, 300.0);  // after the window: all of it
  QCOMPARE(clip_at_cursor(v, 50).width_px, 0.0);  // before it: nothing
  // Folded over the clipped window, nothing is drawn past the cursor, even a narrow span
  // that crosses a column boundary there.
  std::vector<Span> lane{{140, 149, 0, loom::trace::EventKind::Forward}, {149, 160, 1, loom::trace::EventKind::Backward},
                         {170, 180, 2, loom::trace::EventKind::Forward}};
  Fold fold;
  fold_visible(lane, before, 30, fold);
  QVERIFY(!fold.items.empty());
  for (const DrawItem& d : fold.items) QVERIFY2(d.x1_px <= before.width_px + 1e-9, qPrintable(QString::number(d.x1_px)));
}

QTEST_GUILESS_MAIN(TestTimelineGeometry)
#include "test_timeline_geometry.moc"
