// Pipeline step replay (see pipeline_replay.h): a list scheduler over the stages' op orders.
#include "loom/analysis/pipeline_replay.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace loom::analysis {

std::vector<ScheduledOp> stage_order(Schedule schedule, int stage, int stages, int microbatches) {
  std::vector<ScheduledOp> ops;
  const int m = std::max(0, microbatches);
  if (schedule == Schedule::GPipe) {
    for (int i = 0; i < m; ++i) ops.push_back({true, i});
    for (int i = m - 1; i >= 0; --i) ops.push_back({false, i});
    return ops;
  }
  const int warm = std::clamp(stages - stage, 0, m);
  for (int i = 0; i < warm; ++i) ops.push_back({true, i});
  for (int i = 0; i < m - warm; ++i) {
    ops.push_back({false, i});
    ops.push_back({true, warm + i});
  }
  for (int i = m - warm; i < m; ++i) ops.push_back({false, i});
  return ops;
}

namespace {
// Where an op's input comes from: the previous stage's forward or the next stage's backward.
int source_stage(const ScheduledOp& op, int stage) { return op.forward ? stage - 1 : stage + 1; }
}  // namespace

std::vector<std::vector<TimedOp>> replay_ops(Schedule schedule, int microbatches, const std::vector<StageOpTimes>& stages) {
  const int p = static_cast<int>(stages.size());
  if (p == 0 || microbatches < 1) return {};
  std::vector<std::vector<ScheduledOp>> orders;
  for (int s = 0; s < p; ++s) orders.push_back(stage_order(schedule, s, p, microbatches));
  // (stage, forward?, micro-batch) -> when its output reaches the stage that needs it
  std::map<std::tuple<int, bool, int>, double> arrives;
  std::vector<std::vector<TimedOp>> timed(static_cast<std::size_t>(p));
  std::vector<double> clock(static_cast<std::size_t>(p), 0.0);
  // When each stage's link toward the next (previous) stage is next free. A stage sends in
  // one direction in the order of its ops, which are replayed in time order.
  std::vector<double> next_link_free(static_cast<std::size_t>(p), 0.0), previous_link_free(next_link_free);
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int s = 0; s < p; ++s) {
      const auto su = static_cast<std::size_t>(s);
      while (timed[su].size() < orders[su].size()) {
        const ScheduledOp op = orders[su][timed[su].size()];
        const int from = source_stage(op, s);
        // The last stage's backward follows its own forward (the loss), already done in order.
        double ready = 0;
        if (from >= 0 && from < p) {
          auto it = arrives.find({from, op.forward, op.microbatch});
          if (it == arrives.end()) break;
          ready = it->second;
        }
        const StageOpTimes& st = stages[su];
        // A forward's work ahead of its input runs while the input is on its way: the op
        // ends when the rest has run after the input arrived.
        const double start = std::max(clock[su], ready - (op.forward ? st.forward_ahead : 0.0));
        clock[su] = start + (op.forward ? st.forward : st.backward);
        const double sent = op.forward ? clock[su] : clock[su] - st.backward_after_send;
        double& link_free = op.forward ? next_link_free[su] : previous_link_free[su];
        const double on_link = std::max(sent, link_free);
        link_free = on_link + (op.forward ? st.to_next_wire : st.to_previous_wire);
        const double delivered = on_link + (op.forward ? st.to_next : st.to_previous);
        arrives[{s, op.forward, op.microbatch}] = delivered;
        timed[su].push_back({op, start, clock[su], delivered});
        progressed = true;
      }
    }
  }
  for (int s = 0; s < p; ++s)
    if (timed[static_cast<std::size_t>(s)].size() < orders[static_cast<std::size_t>(s)].size()) return {};  // deadlock
  return timed;
}

std::vector<ReplayedStage> replay_step(Schedule schedule, int microbatches, const std::vector<StageOpTimes>& stages) {
  const std::vector<std::vector<TimedOp>> timed = replay_ops(schedule, microbatches, stages);
  if (timed.empty()) return {};
  double end = 0;
  for (std::size_t s = 0; s < stages.size(); ++s)
    end = std::max(end, (timed[s].empty() ? 0.0 : timed[s].back().end) + stages[s].other);
  std::vector<ReplayedStage> out;
  for (const StageOpTimes& st : stages)
    out.push_back({end, microbatches * (st.forward + st.backward) + st.other});
  return out;
}

}  // namespace loom::analysis
