// The critical path of a step across ranks, and who made whom wait.
//
// A step ends when its last rank ends it. Walking back from there, the path follows the
// rank it is on through its work (compute, data, optimizer) until it meets a blocking
// wait; there it jumps to whoever the wait was for: on a receive, to the sender of the
// matching message (Send with the same message id) at the moment it sent; on a wait at a
// synchronous collective (the k-th Wait span of the step, across the ranks that reduce
// together), to the last rank to arrive at it. When the one waited for was already there,
// the path stays and the wait is communication. A gap between the rank's traced spans in
// which its own background communication (another stream or thread) ended is that
// communication, from its start; other gaps are "untraced".
// HTA's critical path covers one rank; this one crosses ranks.
//
// Wait attribution: every receive whose sender sent after the receiver started waiting
// ("late sender"), and every synchronous-collective wait that began before the last rank
// arrived ("late arrival at a collective"), charge the waiter's lost time to the rank it
// waited for. Pure functions over events already on rank 0's clock (clock_align.h).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/store/run_store.h"
#include "loom/trace/event.h"

namespace loom::analysis {

// Descheduled: the share of a communication or waiting span the kernel says the rank spent
// waiting for a core (Event::descheduled_us), prorated when the path takes part of the span
// and placed at the start of that part (the kernel does not say when it happened).
enum class PathPart { Work, Communication, Waiting, Descheduled, Untraced };
inline constexpr int kPathParts = 5;
std::string_view path_part_name(PathPart part);  // "work", "communication", "waiting", "descheduled", "untraced"

struct PathSegment {
  int rank = 0;
  trace::EventKind kind = trace::EventKind::Forward;
  int layer = -1;
  std::int64_t start_ns = 0, end_ns = 0;
  PathPart part = PathPart::Work;
};

// Time on the path per (rank, kind, layer); untraced gaps have kind Step and layer -1.
struct PathEntry {
  int rank = 0;
  trace::EventKind kind = trace::EventKind::Forward;
  int layer = -1;
  PathPart part = PathPart::Work;
  std::int64_t ns = 0;
  std::int64_t count = 0;
};

struct CriticalPath {
  int steps = 0;          // steps walked
  std::int64_t length_ns = 0;  // summed over steps: from each step's start to its end
  std::int64_t part_ns[kPathParts] = {};  // by PathPart
  std::int64_t jumps = 0;  // rank changes along the path
  std::vector<PathSegment> segments;  // chronological; filled for a single step only
  std::vector<PathEntry> profile;     // by time on the path, largest first
};

struct WaitCause {
  int waiter = 0, cause = 0;
  std::string reason;  // "late sender", "late arrival at a collective"
  std::int64_t ns = 0, count = 0;
};

// What the walk needs from the plan: which ranks reduce together (synchronous collectives:
// all replicas of a stage in all-reduce and local-SGD modes; none in the asynchronous ones).
// sync_group[r] = a group id, or -1 when rank r's waits are not matched across ranks.
std::vector<int> sync_groups(const Plan& plan, int world_size);

// events_by_rank[r]: rank r's events on rank 0's clock. One step, with its segments.
CriticalPath critical_path_of_step(const std::vector<std::vector<trace::Event>>& events_by_rank,
                                   const std::vector<int>& sync_group, std::int32_t step);

// Summed over `steps` (segments left empty); waits summed over the same steps.
struct PathAnalysis {
  CriticalPath path;
  std::vector<WaitCause> waits;  // by time lost, largest first
};
PathAnalysis analyze_paths(const std::vector<std::vector<trace::Event>>& events_by_rank,
                           const std::vector<int>& sync_group, const std::set<std::int32_t>& steps);

// A stored run: its events aligned to rank 0's clock, the path over rank 0's steady steps
// (each rank's first kWarmupSteps steps are warm-up), the waits over the same steps.
Expected<PathAnalysis> analyze_run_paths(store::RunStore& store, std::int64_t run_id);
// The same from events already read (events_by_rank[r]: rank r's, its own clock; aligned here).
PathAnalysis analyze_run_paths(const trace::RunRecord& run, const std::vector<trace::RankRecord>& ranks,
                               std::vector<std::vector<trace::Event>> events_by_rank);

// Nanoseconds summed over `steps` steps as seconds per step (0 for no steps).
double per_step_s(std::int64_t ns, int steps);

// JSON: critical_path {steps, length_s, work_s, communication_s, waiting_s, descheduled_s, untraced_s,
// jumps, profile: [{rank, kind, layer, part, s, count}]} (per-step means in seconds:
// *_s are totals / steps), waits: [{waiter, cause, reason, s, count}] (totals).
nlohmann::json path_analysis_to_json(const PathAnalysis& a, const std::vector<std::string>& layer_names);

}  // namespace loom::analysis
