// One kind, one colour and one name in every view (issue 15), offscreen: the timeline's
// painted spans, its legend, its tooltips and the breakdown chart's bars and legend all
// take colour and name from the one table (span_kinds.h), in the light and the dark
// palette. The pixel checks read the rendered image, so a view that kept a private colour
// (or a palette-blind one) fails here.
#include <QtTest>
#include <qcustomplot.h>

#include "loom/test/events.h"
#include "loom/test/palette.h"
#include "loom/ui/charts/training_charts.h"
#include "loom/ui/span_kinds.h"
#include "loom/ui/timeline/kind_legend.h"
#include "loom/ui/timeline/timeline_view.h"

using loom::trace::Event;
using loom::trace::EventKind;
using loom::trace::Stream;
using loom::ui::BreakdownCategory;
using loom::ui::timeline::TimelineView;
using loom::testing::dark_palette;

namespace {

// Step 0.
Event span(EventKind kind, std::int64_t start, std::int64_t end, Stream stream = Stream::Compute) {
  return loom::testing::span_ns(kind, stream, start, end, 0);
}

// The colour of the timeline's pixel a quarter into the span from its start, on the
// span's row (found through hit testing, as a hovering user would).
QColor painted_color(TimelineView& view, const QImage& image, std::int64_t start, std::int64_t end) {
  const QCPAxisRect* rect = view.plot()->axisRect();
  const double t = start + 0.25 * static_cast<double>(end - start);
  const int x_plot = rect->left() + static_cast<int>(std::lround(time_to_px(view.viewport(), t)));
  for (int y = rect->top(); y < rect->bottom(); ++y) {
    const QPoint in_view = view.plot()->mapTo(&view, QPoint(x_plot, y));
    const auto hit = view.eventAt(in_view);
    if (hit && view.data().event(*hit).start_ns == start) return image.pixelColor(in_view.x(), in_view.y() + 3);
  }
  return {};
}

}  // namespace

class TestOneKindTable : public QObject {
  Q_OBJECT
 private slots:
  void timelineSpansAndLegendUseTable();
  void breakdownBarsUseTable();
};

void TestOneKindTable::timelineSpansAndLegendUseTable() {
  TimelineView view;
  view.resize(1000, 400);
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  // Wide spans (a third of the width each), so each is painted on its own.
  const std::vector<Event> events = {span(EventKind::Forward, 0, 3000000), span(EventKind::Wait, 3000000, 6000000),
                                     span(EventKind::Backward, 6000000, 9000000),
                                     span(EventKind::AllReduce, 1000000, 5000000, Stream::Comm)};
  view.appendEvents(0, events);
  for (const bool dark : {false, true}) {
    view.setPalette(dark ? dark_palette() : QPalette());
    view.replotNow();
    view.setViewport({-100000, 9100000, 1});
    view.replotNow();
    const QImage image = view.grab().toImage();
    for (const Event& e : events) {
      const QColor want = loom::ui::event_kind_color(e.kind, dark);
      QCOMPARE(painted_color(view, image, e.start_ns, e.end_ns).rgb(), want.rgb());
    }
    // The legend lists exactly the kinds present, in the table's names and colours.
    const auto& entries = view.legend()->entries();
    QCOMPARE(entries.size(), std::size_t{4});
    for (const auto& entry : entries) {
      QCOMPARE(entry.name, loom::ui::span_kind(entry.kind).displayName());
      QCOMPARE(entry.color, loom::ui::event_kind_color(entry.kind, dark));
    }
    // Tooltips name the kind as the legend does.
    QVERIFY(loom::ui::timeline::describe_event(events[1], 0, {}).startsWith(
        loom::ui::span_kind(EventKind::Wait).displayName() + QStringLiteral(" · ")));
  }
}

void TestOneKindTable::breakdownBarsUseTable() {
  loom::ui::charts::BreakdownChart chart;
  std::vector<loom::analysis::RankBreakdown> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ranks[r].compute_s = 1, ranks[r].comm_s = 1, ranks[r].exposed_comm_s = 0.5, ranks[r].idle_s = 0.25;
  }
  chart.setBreakdown(ranks);
  const QStringList segments = {"compute", "optimizer", "data", "exposed_comm", "idle", "hidden_comm"};
  for (const bool dark : {false, true}) {
    chart.setPalette(dark ? dark_palette() : QPalette());
    for (const QString& segment : segments) {
      QCPBars* bars = chart.bars(segment);
      QVERIFY2(bars, qPrintable(segment));
      const auto category = static_cast<BreakdownCategory>(bars->property("category").toInt());
      QCOMPARE(QString::fromLatin1(loom::ui::breakdown_category(category).key), segment);
      QCOMPARE(bars->brush().color(), loom::ui::breakdown_color(category, dark));
      QVERIFY(bars->name().startsWith(loom::ui::breakdown_category(category).displayName()));
    }
    // The wait the timeline draws is the breakdown's exposed communication: same colour.
    QCOMPARE(chart.bars("exposed_comm")->brush().color(), loom::ui::event_kind_color(EventKind::Wait, dark));
  }
}

QTEST_MAIN(TestOneKindTable)
#include "test_one_kind_table.moc"
