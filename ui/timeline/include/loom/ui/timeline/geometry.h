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

#include "loom/profiles/event.h"

namespace loom::ui::timeline {

// The visible window [t0, t1) mapped linearly onto [0, width) pixels.
struct Viewport {
  double t0_ns = 0, t1_ns = 1;
  double width_px = 1;
};

double time_to_px(const Viewport& v, double t_ns);
double px_to_time(const Viewport& v, double px);
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

// One rectangle to paint. count > 1: a folded run of spans too narrow to draw one by one;
// kind is then the kind of the longest span seen in the run (the dominant one).
struct DrawItem {
  double x0_px = 0, x1_px = 0;
  loom::trace::EventKind kind{};
  std::uint32_t first_event = 0;
  std::uint32_t count = 1;
};

// lane: sorted by start, non-overlapping (so ends are sorted too). Appends to out the
// items for the visible part: spans at least min_px wide each get an item; narrower spans
// closer than min_px to each other merge into one. x is clamped to [-1, width + 1] so deep
// zoom never produces huge coordinates. Cost: O(log n) to find the window, then at most
// about width/min_px binary searches through folded stretches, so full zoom over a
// million spans stays cheap.
void fold_visible(std::span<const Span> lane, const Viewport& v, double min_px, std::vector<DrawItem>& out);

// The event under x_px: the span containing it, else the nearest one within slop_px.
std::optional<std::uint32_t> hit_test(std::span<const Span> lane, const Viewport& v, double x_px,
                                      double slop_px = 2);

}  // namespace loom::ui::timeline
