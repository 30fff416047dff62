// Figures written back into the store (see stored_figures.h).
#include "loom/analysis/stored_figures.h"

#include <algorithm>
#include <vector>

#include "loom/analysis/throughput.h"
#include "loom/store/run_store.h"

#include "figure_parts.h"

namespace loom::analysis {

using trace::Event;
using trace::EventKind;

namespace {
// A serving run's "samples" are the requests its server answered, over the serving span.
Status store_serving_figures(store::RunStore& store, const trace::RunRecord& run) {
  auto serving = serving_of_run(store, run);
  if (!serving.ok()) return serving.error();
  const auto& s = *serving;
  if (!s || s->throughput_per_s <= 0) return {};
  return store.set_training_figures(run.id, double(s->served) / s->throughput_per_s, s->served);
}

}  // namespace

Status store_training_figures(store::RunStore& store, std::int64_t run_id) {
  auto run = store.load_run(run_id);
  if (!run.ok()) return run.error();
  const PlanResult plan = parse_plan(run->plan_json);
  if (!plan.ok()) return {};  // nothing to count samples by: lists keep the whole-run figure
  if (plan.plan->serve) return store_serving_figures(store, *run);
  auto records = store.load_ranks(run_id);
  if (!records.ok()) return records.error();
  const int world = std::max(1, run->world_size);
  std::vector<std::vector<Event>> steps(static_cast<std::size_t>(world));
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(world), 0);
  for (const auto& r : *records)
    if (r.rank >= 0 && r.rank < world) offsets[std::size_t(r.rank)] = r.offset_ns;
  for (int r = 0; r < world; ++r) {
    auto events = store.load_events_of_kind(run_id, r, EventKind::Step);
    if (!events.ok()) return events.error();
    steps[std::size_t(r)] = std::move(events).value();
  }
  const Throughput t = steady_throughput(*plan.plan, steps, offsets);
  if (!t.from_steps) return {};
  return store.set_training_figures(run_id, t.train_s, t.train_samples);
}

}  // namespace loom::analysis
