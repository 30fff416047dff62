// The one table of span kinds and breakdown categories (span_kinds.h), without a display:
// every kind and category once with a name and an explanation; forward and backward in
// clearly different hues; the timeline's "wait for communication" drawn in the colour of
// the breakdown's "exposed communication" (and the bubble in idle's), never grey in one
// view and red in the other; category colours apart from each other in both palettes; the
// dark colours readable on the dark base.
#include <QPalette>
#include <QSet>
#include <QtTest>
#include <cmath>

#include "loom/ui/span_kinds.h"

using loom::trace::EventKind;
using loom::ui::BreakdownCategory;

namespace {

// Hue distance in degrees on the colour circle.
double hue_distance(const QColor& a, const QColor& b) {
  const double d = std::abs(a.hslHueF() - b.hslHueF()) * 360.0;
  return std::min(d, 360.0 - d);
}

double rgb_distance(const QColor& a, const QColor& b) {
  return std::hypot(a.red() - b.red(), a.green() - b.green(), a.blue() - b.blue());
}

}  // namespace

class TestSpanKinds : public QObject {
  Q_OBJECT
 private slots:
  void everyKindOnceWithNameAndExplanation();
  void everyCategoryOnce();
  void forwardAndBackwardDistinctHues();
  void waitIsExposedCommunicationColour();
  void categoryColoursApart();
  void darkColoursReadOnDarkBase();
  void isDarkFollowsBase();
};

void TestSpanKinds::everyKindOnceWithNameAndExplanation() {
  QCOMPARE(static_cast<int>(loom::ui::span_kinds().size()), loom::trace::kEventKindCount);
  QSet<int> kinds;
  QSet<QString> names;
  for (const auto& s : loom::ui::span_kinds()) {
    kinds.insert(static_cast<int>(s.kind));
    names.insert(s.displayName());
    QVERIFY(!s.displayName().isEmpty());
    QVERIFY(std::string_view(s.explanation).size() > 10);
    QVERIFY(s.light.isValid() && s.dark.isValid());
    QCOMPARE(loom::ui::span_kind(s.kind).displayName(), s.displayName());  // lookup finds its row
  }
  QCOMPARE(kinds.size(), loom::trace::kEventKindCount);
  QCOMPARE(names.size(), loom::trace::kEventKindCount);
  // The new Setup kind is there and counts as setup; Step is counted by its parts.
  QCOMPARE(loom::ui::span_kind(EventKind::Setup).category, BreakdownCategory::Setup);
  QVERIFY(!loom::ui::span_kind(EventKind::Step).category.has_value());
  QVERIFY(loom::ui::span_kind(EventKind::AllReduce).split_by_overlap);
  QVERIFY(loom::ui::kind_tooltip(loom::ui::span_kind(EventKind::AllReduce)).contains("exposed communication"));
}

void TestSpanKinds::everyCategoryOnce() {
  QCOMPARE(static_cast<int>(loom::ui::breakdown_categories().size()), loom::ui::kBreakdownCategoryCount);
  QSet<int> categories;
  QSet<QString> names, keys;
  for (const auto& c : loom::ui::breakdown_categories()) {
    categories.insert(static_cast<int>(c.category));
    names.insert(c.displayName());
    keys.insert(QString::fromLatin1(c.key));
  }
  QCOMPARE(categories.size(), loom::ui::kBreakdownCategoryCount);
  QCOMPARE(names.size(), loom::ui::kBreakdownCategoryCount);
  QCOMPARE(keys.size(), loom::ui::kBreakdownCategoryCount);
  QCOMPARE(loom::ui::breakdown_category(BreakdownCategory::Descheduled).displayName(), QStringLiteral("descheduled"));
}

void TestSpanKinds::forwardAndBackwardDistinctHues() {
  for (const bool dark : {false, true}) {
    const QColor f = loom::ui::event_kind_color(EventKind::Forward, dark);
    const QColor b = loom::ui::event_kind_color(EventKind::Backward, dark);
    QVERIFY2(hue_distance(f, b) >= 45, qPrintable(QString::number(hue_distance(f, b))));
  }
}

void TestSpanKinds::waitIsExposedCommunicationColour() {
  for (const bool dark : {false, true}) {
    QCOMPARE(loom::ui::span_kind(EventKind::Wait).category, BreakdownCategory::ExposedCommunication);
    QCOMPARE(loom::ui::event_kind_color(EventKind::Wait, dark),
             loom::ui::breakdown_color(BreakdownCategory::ExposedCommunication, dark));
    QCOMPARE(loom::ui::event_kind_color(EventKind::Idle, dark), loom::ui::breakdown_color(BreakdownCategory::Idle, dark));
    QCOMPARE(loom::ui::event_kind_color(EventKind::Forward, dark),
             loom::ui::breakdown_color(BreakdownCategory::Compute, dark));
    QCOMPARE(loom::ui::event_kind_color(EventKind::AllReduce, dark),
             loom::ui::breakdown_color(BreakdownCategory::HiddenCommunication, dark));
    QCOMPARE(loom::ui::event_kind_color(EventKind::Setup, dark), loom::ui::breakdown_color(BreakdownCategory::Setup, dark));
    // Every kind's colour family: a kind counted as compute is not drawn in a colour that
    // the breakdown uses for another category.
    for (const auto& s : loom::ui::span_kinds()) {
      if (!s.category) continue;
      for (const auto& c : loom::ui::breakdown_categories())
        if (c.category != *s.category && c.color(dark) == s.color(dark))
          QFAIL(qPrintable(QStringLiteral("%1 is drawn in the colour of %2").arg(s.displayName(), c.displayName())));
    }
  }
}

void TestSpanKinds::categoryColoursApart() {
  for (const bool dark : {false, true}) {
    const auto cats = loom::ui::breakdown_categories();
    for (std::size_t i = 0; i < cats.size(); ++i)
      for (std::size_t j = i + 1; j < cats.size(); ++j)
        QVERIFY2(rgb_distance(cats[i].color(dark), cats[j].color(dark)) > 60,
                 qPrintable(QStringLiteral("%1 / %2").arg(cats[i].displayName(), cats[j].displayName())));
  }
}

void TestSpanKinds::darkColoursReadOnDarkBase() {
  const QColor base(0x1e, 0x1f, 0x22);  // the workbench's dark Base
  for (const auto& s : loom::ui::span_kinds()) {
    QVERIFY2(rgb_distance(s.dark, base) > 60, s.name);
    QVERIFY2(rgb_distance(s.light, Qt::white) > 60, s.name);
  }
}

void TestSpanKinds::isDarkFollowsBase() {
  QPalette light(Qt::white);
  light.setColor(QPalette::Base, Qt::white);
  QPalette dark;
  dark.setColor(QPalette::Base, QColor(0x1e, 0x1f, 0x22));
  QVERIFY(!loom::ui::is_dark(light));
  QVERIFY(loom::ui::is_dark(dark));
}

QTEST_GUILESS_MAIN(TestSpanKinds)
#include "test_span_kinds.moc"
