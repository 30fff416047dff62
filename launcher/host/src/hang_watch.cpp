// The job watchdog's rules (see hang_watch.h).
#include "loom/host/hang_watch.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace loom::host {

double hang_limit_s(const HangLimits& limits, bool training, double median_step_s) {
  // The plan's own limit is for training steps; setup (MPI start-up, data loading, the
  // bandwidth probe) on a loaded machine can outlast a tight one without being stuck.
  if (!training) return std::max(limits.setup_s, limits.fixed_s);
  if (limits.fixed_s > 0) return limits.fixed_s;
  const double scaled = std::isfinite(median_step_s) ? limits.step_multiple * median_step_s : 0.0;
  return std::max(limits.floor_s, scaled);
}

std::optional<Stall> find_stall(const std::vector<RankActivity>& ranks, std::int64_t now_ns, const HangLimits& limits,
                                double median_step_s) {
  std::vector<Stall> watched;
  bool progressing = false, stopped = false;
  for (const RankActivity& r : ranks) {
    if (!r.connected || r.finished) continue;
    const double silent_s = double(now_ns - r.last_progress_ns) * 1e-9;
    const double limit_s = hang_limit_s(limits, r.training, median_step_s);
    if (silent_s <= limit_s) {
      progressing = true;
      continue;
    }
    stopped = stopped || r.process_stopped;
    watched.push_back({r.rank, silent_s, limit_s, r.process_stopped, r.has_last_span, r.last_span, {}});
  }
  // One rank still progressing means the job is not hung: a silent rank may be waiting
  // for it legitimately (an asynchronous worker done early, a slow stage's neighbour).
  // A stopped process past its limit is, though: it never goes on by itself, and the
  // peers of an asynchronous worker would train on without it until the end.
  if (watched.empty() || (progressing && !stopped)) return std::nullopt;
  auto blamed = std::max_element(watched.begin(), watched.end(), [](const Stall& a, const Stall& b) {
    if (a.process_stopped != b.process_stopped) return b.process_stopped;
    return a.silent_s < b.silent_s;
  });
  Stall stall = *blamed;
  for (const Stall& s : watched)
    if (s.rank != stall.rank) stall.also_silent.push_back(s.rank);
  return stall;
}

std::string describe_stall(const Stall& stall, const std::vector<std::string>& layer_names) {
  std::ostringstream text;
  text.precision(3);
  text << "rank " << stall.rank << " recorded nothing for " << std::lround(stall.silent_s) << " s (limit "
       << stall.limit_s << " s" << (stall.process_stopped ? "; its process is stopped" : "") << ")";
  if (stall.has_last_span) {
    const trace::Event& e = stall.last_span;
    text << "; its last span: " << trace::event_kind_name(e.kind);
    if (e.layer >= 0) {
      const auto layer = std::size_t(e.layer);
      text << ", layer " << (layer < layer_names.size() ? layer_names[layer] : std::to_string(e.layer));
    }
    if (e.step >= 0) text << ", step " << e.step;
  } else {
    text << "; it had sent no span yet (still in setup)";
  }
  if (!stall.also_silent.empty()) {
    text << ". Also silent, waiting on it or hung too: rank";
    if (stall.also_silent.size() > 1) text << "s";
    for (std::size_t i = 0; i < stall.also_silent.size(); ++i) text << (i ? ", " : " ") << stall.also_silent[i];
  }
  return text.str();
}

}  // namespace loom::host
