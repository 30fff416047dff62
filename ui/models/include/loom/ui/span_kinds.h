// The one table of span kinds and breakdown categories: the name a user reads, the colour
// in the light and the dark palette, a one-line explanation, and (for a kind) the breakdown
// category its time counts in. The timeline's spans and legend, the breakdown chart's bars
// and legend and every tooltip that names a kind read it from here, so one kind has one
// colour and one name in every view (issue 15).
//
// Colour families: compute in blues and purples (forward and backward in clearly
// different hues), optimizer green, data loading olive, communication in oranges and
// roses, waiting for communication red (it is the breakdown's exposed communication),
// idle grey, setup sand. A category's colour is the colour of the kind that stands for it
// (compute = forward, exposed communication = wait, hidden communication = all-reduce, ...)
// unless no kind stands for it (descheduled), so the two can never drift apart.
#pragma once

#include <QColor>
#include <QPalette>
#include <QString>

#include <optional>
#include <span>

#include "loom/trace/event.h"

namespace loom::ui {

// Where analysis::RankBreakdown puts a span's time. Descheduled is time a rank's thread
// waited for a CPU because ranks outnumber cores (the analysis is gaining it).
enum class BreakdownCategory {
  Compute,
  ExposedCommunication,  // communication in flight while the rank did no work
  HiddenCommunication,   // communication in flight while the rank computed
  Optimizer,
  Data,
  Idle,
  Setup,
  Descheduled,
  // Older name of HiddenCommunication (the breakdown's hidden bar), kept for callers.
  Communication = HiddenCommunication,
};
inline constexpr int kBreakdownCategoryCount = 8;

struct CategoryStyle {
  BreakdownCategory category;
  const char* key;          // stable identifier ("exposed_comm"), also the breakdown bar's name
  const char* name;         // what the user reads
  const char* explanation;  // one line, for tooltips and the glossary
  QColor light, dark;
  QColor color(bool dark_palette) const { return dark_palette ? dark : light; }
  QString displayName() const { return QString::fromUtf8(name); }
};

struct SpanKindStyle {
  loom::trace::EventKind kind;
  const char* name;
  const char* explanation;
  // The category its time counts in; none for Step, whose time is counted by its parts.
  std::optional<BreakdownCategory> category;
  // Communication kinds: exposed where the rank did no work, hidden behind work where it
  // computed (category is then HiddenCommunication, the family its colour belongs to).
  bool split_by_overlap = false;
  QColor light, dark;
  QColor color(bool dark_palette) const { return dark_palette ? dark : light; }
  QString displayName() const { return QString::fromUtf8(name); }
};

// Every kind once, in the order legends list them (work first, then communication,
// then waiting).
std::span<const SpanKindStyle> span_kinds();
const SpanKindStyle& span_kind(loom::trace::EventKind kind);
// Every category once, in the breakdown's stacking order.
std::span<const CategoryStyle> breakdown_categories();
const CategoryStyle& breakdown_category(BreakdownCategory category);

// "exposed communication, or hidden communication where it overlaps
// computation", "compute", "not counted itself (its parts are)": for tooltips.
QString counts_in_text(const SpanKindStyle& style);
// The kind's name, explanation and category as a tooltip.
QString kind_tooltip(const SpanKindStyle& style);

// What a timeline row of this stream holds, in the user's words: "compute" (forward,
// backward, loss, optimizer), "collectives" (the background thread's all-reduces and the
// setup's probes), "steps · messages" (the rank's main thread: steps, setup, data, and
// the point-to-point sends, receives, pushes and pulls it blocks on), "copies" (a gpu
// rank's batch uploads). The stored stream names ("host") describe the recorder, not what
// a student looks for.
QString stream_label(loom::trace::Stream stream);

// Whether a palette is dark (its base colour is), to pick the table's dark colours.
bool is_dark(const QPalette& palette);

// Shorthands over the table.
QColor event_kind_color(loom::trace::EventKind kind, bool dark_palette = false);
QString event_kind_display_name(loom::trace::EventKind kind);
QColor breakdown_color(BreakdownCategory category, bool dark_palette = false);

}  // namespace loom::ui
