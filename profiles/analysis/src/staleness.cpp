// Staleness and divergence in the asynchronous modes (definitions in staleness.h).
#include "loom/analysis/staleness.h"

#include <algorithm>
#include <map>
#include <set>

#include "figure_parts.h"

namespace loom::analysis {

using trace::Event;
using trace::EventKind;

// Time blocked in Wait spans (a pull, the ssp bound), counted once where spans nest.
std::int64_t wait_ns(const std::vector<Event>& events) {
  Intervals waits;
  for (const Event& e : events)
    if (e.kind == EventKind::Wait) waits.emplace_back(e.start_ns, e.end_ns);
  return union_length_ns(waits);
}

namespace {
struct Distribution {
  double mean = 0, p50 = 0, p95 = 0;
  std::int64_t max = 0;
};

Distribution distribution(std::vector<std::int64_t> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.mean = mean(values);
  d.p50 = double(nearest_rank(values, 50));
  d.p95 = double(nearest_rank(values, 95));
  d.max = values.back();
  return d;
}

// The worker ranks of the plan, plus any rank an update names (a plan edited after the run
// must not hide a worker's updates).
std::set<int> worker_ranks(const Plan& plan, const std::vector<trace::UpdateRecord>& updates) {
  std::set<int> ranks;
  const int world = world_size(plan);
  for (int r = 0; r < world; ++r)
    if (rank_role(plan, r).kind == RankKind::Worker) ranks.insert(r);
  for (const auto& u : updates) ranks.insert(u.worker);
  return ranks;
}
}  // namespace

// staleness_stats with the per-rank Wait totals already reduced (summarize_run loads one
// rank at a time and keeps only these).
StalenessStats staleness_from(const std::vector<trace::UpdateRecord>& updates, const std::map<int, std::int64_t>& waits,
                              const Plan& plan) {
  StalenessStats st;
  st.present = !updates.empty();
  st.mode = std::string(sync_mode_name(plan.parallel.sync.mode));
  st.bound = plan.parallel.sync.mode == SyncMode::Ssp ? plan.parallel.sync.bound : -1;
  std::map<int, std::vector<std::int64_t>> by_worker;
  std::vector<std::int64_t> all;
  all.reserve(updates.size());
  for (const auto& u : updates) {
    all.push_back(u.staleness);
    by_worker[u.worker].push_back(u.staleness);
  }
  const Distribution overall = distribution(std::move(all));
  st.mean = overall.mean;
  st.p50 = overall.p50;
  st.p95 = overall.p95;
  st.max = overall.max;
  for (int r : worker_ranks(plan, updates)) {
    const std::vector<std::int64_t>& mine = by_worker[r];
    const Distribution d = distribution(mine);
    const auto w = waits.find(r);
    const double wait_s = w == waits.end() ? 0.0 : static_cast<double>(w->second) / kNsPerS;
    st.workers.push_back({r, std::int64_t(mine.size()), d.mean, d.p50, d.p95, d.max, wait_s});
  }
  return st;
}

StalenessStats staleness_stats(const std::vector<trace::UpdateRecord>& updates,
                               const std::vector<std::vector<Event>>& events_by_rank, const Plan& plan) {
  std::map<int, std::int64_t> waits;
  for (std::size_t r = 0; r < events_by_rank.size(); ++r) waits[static_cast<int>(r)] = wait_ns(events_by_rank[r]);
  return staleness_from(updates, waits, plan);
}

}  // namespace loom::analysis
