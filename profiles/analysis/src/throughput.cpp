// Steady throughput (definitions in throughput.h).
#include "loom/analysis/throughput.h"

#include <algorithm>
#include <map>

#include "figure_parts.h"

namespace loom::analysis {

using trace::Event;
using trace::EventKind;

// Steady throughput from per-rank windows (throughput.h); offsets by rank.
Throughput throughput_from_windows(const Plan& plan, const std::map<int, TrainingWindow>& windows,
                                   const std::vector<std::int64_t>& offsets_ns) {
  Throughput t;
  const std::int64_t per_step = plan.training.batch / std::max(1, plan.parallel.data_parallel);
  std::int64_t start = 0, end = 0;
  // Every rank takes part in each evaluation at once (data parallel: a barrier ends it;
  // a pipeline: its all-reduce), so the longest rank's evaluations are the run's.
  std::int64_t evaluation = 0;
  bool any = false;
  for (const auto& [rank, w] : windows) {
    const RankRole role = rank_role(plan, rank);
    if (role.kind != RankKind::Worker || !w.from_steps) continue;
    const std::int64_t offset = rank < static_cast<int>(offsets_ns.size()) ? offsets_ns[std::size_t(rank)] : 0;
    end = any ? std::max(end, w.end_ns - offset) : w.end_ns - offset;
    evaluation = std::max(evaluation, w.evaluation_ns);
    if (role.stage == 0) {
      start = any ? std::min(start, w.start_ns - offset) : w.start_ns - offset;
      t.train_samples += w.steady_steps * per_step;
      t.steady_steps = std::max(t.steady_steps, w.steady_steps);
    }
    any = true;
  }
  if (any && end - evaluation > start && t.train_samples > 0) {
    t.train_s = static_cast<double>(end - start - evaluation) / kNsPerS;
    t.from_steps = true;
  }
  return t;
}

Throughput steady_throughput(const Plan& plan, const std::vector<std::vector<Event>>& events_by_rank,
                             const std::vector<std::int64_t>& offsets_ns) {
  std::map<int, TrainingWindow> windows;
  for (std::size_t r = 0; r < events_by_rank.size(); ++r)
    if (!events_by_rank[r].empty()) windows[static_cast<int>(r)] = training_window(events_by_rank[r]);
  return throughput_from_windows(plan, windows, offsets_ns);
}

}  // namespace loom::analysis
