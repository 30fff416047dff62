// Timeline coordinate math, free of Qt widgets so it is tested without a display: the
// visible time window and its mapping to pixels, zoom and pan, and the per-lane
// preparation of what to draw (binary-search the visible window, fold spans narrower than
// a few pixels into one item) and hit testing. Times are nanoseconds relative to the
// data's origin (see timeline_data.h); pixels are relative to the plotting area's left.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "loom/trace/event.h"

namespace loom::ui::timeline {

// The visible window [t0, t1) mapped linearly onto [0, width) pixels.
struct Viewport {
  double t0_ns = 0, t1_ns = 1;
  double width_px = 1;
};

double time_to_px(const Viewport& v, double t_ns);
double px_to_time(const Viewport& v, double px);
// The part of v before a replay cursor, at the same scale: [t0, min(t1, cursor)] over
// the pixels that part takes, so a span crossing the cursor is cut at it and one after it
// is outside. An empty viewport (width 0) when the cursor is before t0.
Viewport clip_at_cursor(const Viewport& v, double cursor_ns);
// Coupled views of several runs: the same window relative to each view's anchor (the
// start of a chosen step, or its origin), so a zoom or pan in one moves the others to the
// matching stretch of their own run; target_width_px is the other view's plot width.
Viewport coupled_viewport(const Viewport& source, double source_anchor_ns, double target_anchor_ns,
                          double target_width_px);
// factor > 1 zooms in. The time under anchor_px stays under it; the span never gets
// narrower than min_span_ns (deep zoom stops at a microsecond by default).
Viewport zoom_at(const Viewport& v, double anchor_px, double factor, double min_span_ns = 1000);
// Positive dx moves the content right (the window moves to earlier times), like dragging.
Viewport pan_by(const Viewport& v, double dx_px);

struct Span {
  std::int64_t start_ns = 0, end_ns = 0;  // relative to the data's origin
  std::uint32_t event = 0;                // index into TimelineData's events
  loom::trace::EventKind kind{};
};

// One kind's time inside a folded column.
struct KindTime {
  loom::trace::EventKind kind{};
  double ns = 0;
};

// One rectangle to paint: a span wide enough to draw on its own (folded() false), or a
// column of spans too narrow to draw one by one. A column holds the spans that start in
// one cell of a grid of min_px-wide cells anchored at time 0 (so columns do not shimmer
// while panning); a span crossing into the next cell gives it the rest of its time.
// Zoomed out, a column says what its spans did: per kind, the time inside the column, to
// be drawn as stacked shares of its height (Fold::share), never as one solid colour.
struct DrawItem {
  double x0_px = 0, x1_px = 0;
  loom::trace::EventKind kind{};  // a span's kind; a column's kind with the most time
  std::uint32_t first_event = 0;  // the first span that starts (or continues) in the item
  std::uint32_t count = 1;        // spans starting in the item
  double extent_ns = 0;           // a column's time from its first start to its last end
  std::uint32_t mix_begin = 0, mix_count = 0;  // a column's kinds in Fold::mix
  bool folded() const { return mix_count > 0; }
};

// What fold_visible prepares for one lane; reused between lanes and paints.
struct Fold {
  std::vector<DrawItem> items;
  std::vector<KindTime> mix;  // per column, its kinds in EventKind order, times > 0
  void clear() {
    items.clear();
    mix.clear();
  }
  std::span<const KindTime> mix_of(const DrawItem& item) const {
    return std::span<const KindTime>(mix).subspan(item.mix_begin, item.mix_count);
  }
  // The fraction of a column's extent that spans of kind took (0 to 1); 1 or 0 for a span
  // drawn on its own. The shares of a column add up to its coverage.
  double share(const DrawItem& item, loom::trace::EventKind kind) const;
  double coverage(const DrawItem& item) const;
};

// lane: sorted by start, non-overlapping (so ends are sorted too). Appends to out the
// items for the visible part: spans at least min_px wide each get an item; narrower ones
// are summed into columns. x is clamped to [-1, width + 1] so deep zoom never produces
// huge coordinates. Cost: O(log n) to find the window, then one step per visible span
// (a few nanoseconds: a million spans in a few milliseconds) and at most one column per
// min_px of width.
void fold_visible(std::span<const Span> lane, const Viewport& v, double min_px, Fold& out);

// The event under x_px: the span containing it, else the nearest one within slop_px.
std::optional<std::uint32_t> hit_test(std::span<const Span> lane, const Viewport& v, double x_px,
                                      double slop_px = 2);

}  // namespace loom::ui::timeline
