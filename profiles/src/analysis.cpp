// Run analysis over the store; the category definitions are in analysis.h. Time per
// category is the union of its intervals so nested spans count once.
#include "loom/profiles/analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace loom::analysis {

namespace {
using trace::Event;
using trace::EventKind;
using Intervals = std::vector<std::pair<std::int64_t, std::int64_t>>;

enum Category { kCompute, kComm, kOptimizer, kData, kNone };

Category category_of(const Event& e) {
  switch (e.kind) {
    case EventKind::Forward:
    case EventKind::Backward:
    case EventKind::Loss:
    case EventKind::Evaluate:
      return e.stream == trace::Stream::Compute ? kCompute : kNone;
    case EventKind::AllReduce:
    case EventKind::Send:
    case EventKind::Recv:
    case EventKind::Push:
    case EventKind::Pull:
    case EventKind::Broadcast:
    case EventKind::Barrier:
      return kComm;
    case EventKind::Optimizer:
      return kOptimizer;
    case EventKind::DataLoad:
      return kData;
    default:
      return kNone;  // Step, Wait, Idle, InjectedDelay
  }
}

constexpr double kNsPerS = 1e9;

double last_value(const std::vector<store::MetricRecord>& metrics) {
  // load_metrics orders by step then time: the last row is the latest.
  return metrics.empty() ? std::numeric_limits<double>::quiet_NaN() : metrics.back().value;
}

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }
}  // namespace

std::int64_t union_length_ns(Intervals& intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::int64_t total = 0;
  std::int64_t cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& [s, e] : intervals) {
    if (e <= s) continue;  // empty or malformed span
    if (open && s <= cur_end) {
      cur_end = std::max(cur_end, e);
      continue;
    }
    if (open) total += cur_end - cur_start;
    cur_start = s;
    cur_end = e;
    open = true;
  }
  if (open) total += cur_end - cur_start;
  return total;
}

RankBreakdown breakdown_rank(int rank, const std::vector<Event>& events) {
  RankBreakdown b;
  b.rank = rank;
  b.events_stored = static_cast<std::int64_t>(events.size());
  if (events.empty()) return b;
  Intervals per_category[kNone];
  Intervals busy;
  std::int64_t first = events.front().start_ns, last = events.front().end_ns;
  for (const Event& e : events) {
    first = std::min(first, e.start_ns);
    last = std::max(last, e.end_ns);
    Category c = category_of(e);
    if (c == kNone) continue;
    per_category[c].emplace_back(e.start_ns, e.end_ns);
    busy.emplace_back(e.start_ns, e.end_ns);
  }
  b.compute_s = static_cast<double>(union_length_ns(per_category[kCompute])) / kNsPerS;
  b.comm_s = static_cast<double>(union_length_ns(per_category[kComm])) / kNsPerS;
  b.optimizer_s = static_cast<double>(union_length_ns(per_category[kOptimizer])) / kNsPerS;
  b.data_s = static_cast<double>(union_length_ns(per_category[kData])) / kNsPerS;
  b.idle_s = static_cast<double>(std::max<std::int64_t>(0, last - first - union_length_ns(busy))) / kNsPerS;
  return b;
}

Expected<RunSummary> summarize_run(store::RunStore& store, std::int64_t run_id) {
  auto run = store.load_run(run_id);
  if (!run.ok()) return run.error();
  auto ranks = store.load_ranks(run_id);
  if (!ranks.ok()) return ranks.error();
  RunSummary s;
  s.run = std::move(run).value();
  s.world_size = s.run.world_size;
  s.wall_s = s.run.wall_s;
  s.samples_per_s = s.wall_s > 0 ? static_cast<double>(s.run.samples) / s.wall_s : 0.0;

  // Ranks with a record or with events; loaded one at a time since Event has no rank
  // field, which also bounds memory to the largest rank.
  auto event_ranks = store.event_ranks(run_id);
  if (!event_ranks.ok()) return event_ranks.error();
  std::set<int> rank_ids(event_ranks->begin(), event_ranks->end());
  for (const auto& r : *ranks) rank_ids.insert(r.rank);
  for (int r = 0; r < s.world_size; ++r) rank_ids.insert(r);  // a silent rank is news too
  std::int32_t max_step = -1;
  for (int r : rank_ids) {
    auto events = store.load_events(run_id, r);
    if (!events.ok()) return events.error();
    for (const Event& e : *events) max_step = std::max(max_step, e.step);
    RankBreakdown b = breakdown_rank(r, *events);
    for (const auto& rec : *ranks)
      if (rec.rank == r) b.events_recorded = rec.events_recorded;
    s.ranks.push_back(b);
  }

  auto loss = store.load_metrics(run_id, "loss");
  if (!loss.ok()) return loss.error();
  auto accuracy = store.load_metrics(run_id, "test_accuracy");
  if (!accuracy.ok()) return accuracy.error();
  std::set<std::int64_t> loss_steps;
  for (const auto& m : *loss) loss_steps.insert(m.step);
  s.steps = loss_steps.empty() ? static_cast<std::int64_t>(max_step) + 1 : static_cast<std::int64_t>(loss_steps.size());
  s.final_loss = last_value(*loss);
  s.test_accuracy = last_value(*accuracy);
  return s;
}

nlohmann::json summary_to_json(const RunSummary& s) {
  nlohmann::json plan = nlohmann::json::parse(s.run.plan_json, nullptr, /*allow_exceptions=*/false);
  if (plan.is_discarded()) plan = nullptr;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : s.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"compute_s", r.compute_s},
                     {"comm_s", r.comm_s},
                     {"optimizer_s", r.optimizer_s},
                     {"data_s", r.data_s},
                     {"idle_s", r.idle_s},
                     {"events_recorded", r.events_recorded},
                     {"events_stored", r.events_stored}});
  }
  return {{"id", s.run.id},
          {"name", s.run.name},
          {"status", s.run.status},
          {"started_unix_ms", s.run.started_unix_ms},
          {"ended_unix_ms", s.run.ended_unix_ms},
          {"error", s.run.error},
          {"plan", plan},
          {"world_size", s.world_size},
          {"steps", s.steps},
          {"wall_s", s.wall_s},
          {"samples", s.run.samples},
          {"samples_per_s", s.samples_per_s},
          {"final_loss", number_or_null(s.final_loss)},
          {"test_accuracy", number_or_null(s.test_accuracy)},
          {"ranks", ranks}};
}

namespace {
std::string format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string optional_number(double v, const char* fmt) { return std::isfinite(v) ? format(fmt, v) : "n/a"; }
}  // namespace

std::string format_summary(const RunSummary& s) {
  std::string out;
  out += format("Run %lld", static_cast<long long>(s.run.id));
  if (!s.run.name.empty()) out += " \"" + s.run.name + "\"";
  out += " [" + s.run.status + "]\n";
  if (!s.run.error.empty()) out += "  error:         " + s.run.error + "\n";
  out += format("  world size:    %d\n", s.world_size);
  out += format("  steps:         %lld\n", static_cast<long long>(s.steps));
  out += format("  wall time:     %.3f s\n", s.wall_s);
  out += format("  throughput:    %.1f samples/s (%lld samples)\n", s.samples_per_s,
                static_cast<long long>(s.run.samples));
  out += "  final loss:    " + optional_number(s.final_loss, "%.4f") + "\n";
  out += "  test accuracy: " + optional_number(s.test_accuracy * 100.0, "%.2f %%") + "\n";
  if (s.ranks.empty()) return out;
  out += format("\n  %4s %10s %10s %10s %10s %10s %12s %12s\n", "rank", "compute_s", "comm_s",
                "optim_s", "data_s", "idle_s", "recorded", "stored");
  for (const auto& r : s.ranks) {
    out += format("  %4d %10.4f %10.4f %10.4f %10.4f %10.4f %12lld %12lld\n", r.rank, r.compute_s, r.comm_s,
                  r.optimizer_s, r.data_s, r.idle_s, static_cast<long long>(r.events_recorded),
                  static_cast<long long>(r.events_stored));
  }
  return out;
}

}  // namespace loom::analysis
