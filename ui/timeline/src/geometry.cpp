// Coordinate math and folding for the timeline (geometry.h). Folding follows tracy's
// timeline in finding the visible window by binary search and merging spans narrower than
// a few pixels, but walks the merged spans instead of skipping them: a column has to know
// how much of each kind it holds (issue 15: zoomed out, a column of short all-reduces and
// long waits must not look like solid communication), and a walk of a million spans costs
// a few milliseconds, inside the 30 ms redraw budget.
#include "loom/ui/timeline/geometry.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

namespace loom::ui::timeline {

double time_to_px(const Viewport& v, double t_ns) {
  const double span = v.t1_ns - v.t0_ns;
  if (span <= 0) return 0;
  return (t_ns - v.t0_ns) / span * v.width_px;
}

double px_to_time(const Viewport& v, double px) {
  if (v.width_px <= 0) return v.t0_ns;
  return v.t0_ns + px / v.width_px * (v.t1_ns - v.t0_ns);
}

Viewport clip_at_cursor(const Viewport& v, double cursor_ns) {
  if (cursor_ns >= v.t1_ns) return v;
  if (cursor_ns <= v.t0_ns) return Viewport{v.t0_ns, v.t0_ns, 0};
  return Viewport{v.t0_ns, cursor_ns, time_to_px(v, cursor_ns)};
}

Viewport coupled_viewport(const Viewport& source, double source_anchor_ns, double target_anchor_ns,
                          double target_width_px) {
  const double shift = target_anchor_ns - source_anchor_ns;
  return {source.t0_ns + shift, source.t1_ns + shift, target_width_px};
}

Viewport zoom_at(const Viewport& v, double anchor_px, double factor, double min_span_ns) {
  if (!(factor > 0)) return v;
  const double anchor_t = px_to_time(v, anchor_px);
  const double span = std::max((v.t1_ns - v.t0_ns) / factor, min_span_ns);
  // Keep the anchor's fraction of the width fixed so its time stays under the cursor.
  const double frac = v.width_px > 0 ? anchor_px / v.width_px : 0.5;
  Viewport out = v;
  out.t0_ns = anchor_t - frac * span;
  out.t1_ns = out.t0_ns + span;
  return out;
}

Viewport pan_by(const Viewport& v, double dx_px) {
  if (v.width_px <= 0) return v;
  const double dt = dx_px / v.width_px * (v.t1_ns - v.t0_ns);
  Viewport out = v;
  out.t0_ns -= dt;
  out.t1_ns -= dt;
  return out;
}

namespace {

double clamp_px(double x, double width) { return std::clamp(x, -1.0, width + 1.0); }

// First span whose end lies after t (ends are sorted because spans do not overlap).
std::size_t first_ending_after(std::span<const Span> lane, double t) {
  auto it = std::upper_bound(lane.begin(), lane.end(), t,
                             [](double value, const Span& s) { return value < static_cast<double>(s.end_ns); });
  return static_cast<std::size_t>(it - lane.begin());
}

// The column being filled: per-kind time and which kinds it holds (a bit per kind), so
// closing it touches only those kinds.
struct Column {
  std::int64_t cell = 0;
  double first_start = 0, last_end = 0;
  std::uint32_t first_event = 0, count = 0;
  std::uint32_t kinds = 0;
  std::array<double, loom::trace::kEventKindCount> ns{};
  void add(loom::trace::EventKind kind, double t) {
    const auto k = static_cast<std::size_t>(kind);
    ns[k] += t;
    kinds |= 1u << k;
  }
};
static_assert(loom::trace::kEventKindCount <= 32, "Column::kinds is a 32-bit set");

void close_column(Column& c, const Viewport& v, Fold& out) {
  DrawItem item;
  item.x0_px = clamp_px(time_to_px(v, c.first_start), v.width_px);
  item.x1_px = clamp_px(time_to_px(v, c.last_end), v.width_px);
  item.first_event = c.first_event;
  item.count = c.count;
  item.extent_ns = c.last_end - c.first_start;
  item.mix_begin = static_cast<std::uint32_t>(out.mix.size());
  double most = -1;
  for (std::uint32_t set = c.kinds; set != 0; set &= set - 1) {
    const int k = std::countr_zero(set);
    const auto kind = static_cast<loom::trace::EventKind>(k);
    out.mix.push_back(KindTime{kind, c.ns[static_cast<std::size_t>(k)]});
    if (c.ns[static_cast<std::size_t>(k)] > most) most = c.ns[static_cast<std::size_t>(k)], item.kind = kind;
    c.ns[static_cast<std::size_t>(k)] = 0;
  }
  item.mix_count = static_cast<std::uint32_t>(out.mix.size()) - item.mix_begin;
  c.kinds = 0;
  if (item.mix_count > 0) out.items.push_back(item);
}

}  // namespace

double Fold::share(const DrawItem& item, loom::trace::EventKind kind) const {
  if (!item.folded()) return item.kind == kind ? 1.0 : 0.0;
  if (!(item.extent_ns > 0)) return item.kind == kind ? 1.0 : 0.0;  // spans of zero length
  double ns = 0;
  for (const KindTime& k : mix_of(item))
    if (k.kind == kind) ns += k.ns;
  return std::min(1.0, ns / item.extent_ns);
}

double Fold::coverage(const DrawItem& item) const {
  if (!item.folded() || !(item.extent_ns > 0)) return 1.0;
  double ns = 0;
  for (const KindTime& k : mix_of(item)) ns += k.ns;
  return std::min(1.0, ns / item.extent_ns);
}

void fold_visible(std::span<const Span> lane, const Viewport& v, double min_px, Fold& out) {
  if (lane.empty() || v.t1_ns <= v.t0_ns || v.width_px <= 0) return;
  const double col_ns = std::max(min_px, 0.0) * (v.t1_ns - v.t0_ns) / v.width_px;
  Column col;
  double col_end = -std::numeric_limits<double>::infinity();  // no column open
  auto close = [&] {
    if (col.kinds != 0 || col.count != 0) close_column(col, v, out);
    col.count = 0;
    col_end = -std::numeric_limits<double>::infinity();
  };
  auto open_at = [&](std::int64_t cell, double start, std::uint32_t event) {
    col.cell = cell, col.first_start = col.last_end = start, col.first_event = event, col.count = 0;
    col_end = static_cast<double>(cell + 1) * col_ns;
  };
  for (std::size_t i = first_ending_after(lane, v.t0_ns); i < lane.size(); ++i) {
    const Span& s = lane[i];
    // Cut at the window's end: nothing is drawn past it, which a replay cursor relies on
    // (a narrow span crossing a column boundary would otherwise open a column beyond it).
    const double a = static_cast<double>(s.start_ns), b = std::min(static_cast<double>(s.end_ns), v.t1_ns);
    if (a >= v.t1_ns) break;
    if (b - a >= col_ns) {  // wide enough to draw on its own
      close();
      DrawItem item;
      item.x0_px = clamp_px(time_to_px(v, a), v.width_px);
      item.x1_px = clamp_px(time_to_px(v, b), v.width_px);
      item.kind = s.kind;
      item.first_event = s.event;
      out.items.push_back(item);
      continue;
    }
    // Narrow: narrower than a cell, so it reaches at most into the next one. Spans come in
    // start order, so only leaving the open cell needs the (costlier) cell number.
    if (a >= col_end) close(), open_at(static_cast<std::int64_t>(std::floor(a / col_ns)), a, s.event);
    col.count += 1;
    if (b > col_end) {
      col.add(s.kind, col_end - a);
      col.last_end = col_end;
      const std::int64_t next = col.cell + 1;
      const double boundary = col_end;
      close();
      open_at(next, boundary, s.event);
      col.add(s.kind, b - boundary);
    } else {
      col.add(s.kind, b - a);
    }
    col.last_end = b;
  }
  close();
}

std::optional<std::uint32_t> hit_test(std::span<const Span> lane, const Viewport& v, double x_px, double slop_px) {
  if (lane.empty() || v.width_px <= 0 || v.t1_ns <= v.t0_ns) return std::nullopt;
  const double t = px_to_time(v, x_px);
  const double slop_t = slop_px / v.width_px * (v.t1_ns - v.t0_ns);
  // Candidates: the last span starting at or before t, and the first one after it.
  auto after = std::upper_bound(lane.begin(), lane.end(), t,
                                [](double value, const Span& s) { return value < static_cast<double>(s.start_ns); });
  const std::size_t i = static_cast<std::size_t>(after - lane.begin());  // first span starting after t
  std::optional<std::uint32_t> best;
  double best_dist = slop_t;
  for (std::size_t k : {i, i - 1}) {  // i - 1 wraps to SIZE_MAX when i == 0
    if (k >= lane.size()) continue;
    const Span& s = lane[k];
    const double dist = t < static_cast<double>(s.start_ns) ? static_cast<double>(s.start_ns) - t
                        : t > static_cast<double>(s.end_ns) ? t - static_cast<double>(s.end_ns)
                                                            : 0.0;
    if (dist <= best_dist) best = s.event, best_dist = dist;
  }
  return best;
}

}  // namespace loom::ui::timeline
