// Linear clock alignment. The interpolation is done in 128-bit integers: offset change
// (up to milliseconds) times elapsed time (up to days in ns) overflows 64 bits, and
// doubles would make aligned timestamps depend on rounding.
#include "loom/trace/clock_align.h"

namespace loom::clock {

bool has_end_estimate(const trace::RankRecord& r) { return r.sync_end_ns > r.sync_start_ns; }

std::int64_t offset_at(const trace::RankRecord& r, std::int64_t rank_clock_ns) {
  if (!has_end_estimate(r)) return r.offset_ns;
  using Wide = __int128;
  const Wide span = Wide(r.sync_end_ns) - r.sync_start_ns;
  const Wide num = (Wide(r.offset_end_ns) - r.offset_ns) * (Wide(rank_clock_ns) - r.sync_start_ns);
  // Round half away from zero, so the result does not depend on which side of the
  // start estimate `rank_clock_ns` lies.
  const Wide half = span / 2;
  const Wide step = num >= 0 ? (num + half) / span : (num - half) / span;
  return r.offset_ns + static_cast<std::int64_t>(step);
}

std::int64_t to_reference_clock(const trace::RankRecord& r, std::int64_t t) { return t - offset_at(r, t); }

void align_events(const trace::RankRecord& r, std::vector<trace::Event>& events) {
  if (r.offset_ns == 0 && (!has_end_estimate(r) || r.offset_end_ns == 0)) return;  // rank 0 and unsynced ranks
  for (trace::Event& e : events) {
    e.start_ns = to_reference_clock(r, e.start_ns);
    e.end_ns = to_reference_clock(r, e.end_ns);
  }
}

double drift_ppm(const trace::RankRecord& r) {
  if (!has_end_estimate(r)) return 0.0;
  return static_cast<double>(r.offset_end_ns - r.offset_ns) /
         static_cast<double>(r.sync_end_ns - r.sync_start_ns) * 1e6;
}

}  // namespace loom::clock
