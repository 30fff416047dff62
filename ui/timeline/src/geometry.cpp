// Coordinate math and folding for the timeline (geometry.h). Folding follows tracy's
// timeline: once a span is too narrow to see, everything that starts within min_px of the
// current folded run is swallowed with one binary search instead of a walk, which bounds
// the work per lane by the number of pixel columns rather than the number of spans.
#include "loom/ui/timeline/geometry.h"

#include <algorithm>
#include <cmath>

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

// First span starting at or after t.
std::size_t first_starting_at(std::span<const Span> lane, std::size_t from, double t) {
  auto it = std::lower_bound(lane.begin() + static_cast<std::ptrdiff_t>(from), lane.end(), t,
                             [](const Span& s, double value) { return static_cast<double>(s.start_ns) < value; });
  return static_cast<std::size_t>(it - lane.begin());
}

}  // namespace

void fold_visible(std::span<const Span> lane, const Viewport& v, double min_px, std::vector<DrawItem>& out) {
  if (lane.empty() || v.t1_ns <= v.t0_ns || v.width_px <= 0) return;
  min_px = std::max(min_px, 0.0);
  const double ns_per_px = (v.t1_ns - v.t0_ns) / v.width_px;
  std::optional<DrawItem> fold;  // the folded run being grown
  double fold_longest = -1;      // duration of its longest span, to pick its kind
  auto flush = [&] {
    if (fold) out.push_back(*fold);
    fold.reset();
  };
  std::size_t i = first_ending_after(lane, v.t0_ns);
  while (i < lane.size() && static_cast<double>(lane[i].start_ns) < v.t1_ns) {
    const Span& s = lane[i];
    const double x0 = time_to_px(v, static_cast<double>(s.start_ns));
    const double x1 = time_to_px(v, static_cast<double>(s.end_ns));
    if (x1 - x0 >= min_px) {  // wide enough to draw on its own
      flush();
      out.push_back(DrawItem{clamp_px(x0, v.width_px), clamp_px(x1, v.width_px), s.kind, s.event, 1});
      ++i;
      continue;
    }
    const double duration = static_cast<double>(s.end_ns - s.start_ns);
    if (fold && x0 - fold->x1_px < min_px) {
      fold->x1_px = std::max(fold->x1_px, clamp_px(x1, v.width_px));
      fold->count += 1;
      if (duration > fold_longest) fold_longest = duration, fold->kind = s.kind;
    } else {
      flush();
      fold = DrawItem{clamp_px(x0, v.width_px), clamp_px(x1, v.width_px), s.kind, s.event, 1};
      fold_longest = duration;
    }
    // Every span starting before the fold's end + min_px would merge; all but the last of
    // them end before the next one starts, so they are narrow: swallow them at once.
    const double limit_t = v.t0_ns + (fold->x1_px + min_px) * ns_per_px;
    const std::size_t j = first_starting_at(lane, i + 1, limit_t);
    if (j > i + 2) {
      fold->count += static_cast<std::uint32_t>(j - i - 2);
      fold->x1_px = std::max(fold->x1_px, clamp_px(time_to_px(v, static_cast<double>(lane[j - 2].end_ns)), v.width_px));
      i = j - 1;  // the last one may be wide: look at it normally
    } else {
      ++i;
    }
  }
  flush();
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
