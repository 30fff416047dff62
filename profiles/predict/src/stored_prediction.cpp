// A prediction stored as a run (see stored_prediction.h).
#include "loom/predict/stored_prediction.h"

#include <algorithm>
#include <cmath>

namespace loom::predict {

namespace {

std::int64_t ns(double ms) { return std::llround(ms * 1e6); }

int cycles_stored(const Prediction& p) {
  const int cycle = std::max(1, p.cycle_steps);
  return (kStoredPredictionSteps + cycle - 1) / cycle;
}
double cycle_ms(const Prediction& p) { return p.cycle_ms > 0 ? p.cycle_ms : p.step_ms; }

trace::RunRecord record_of(const Plan& plan, const Prediction& p, const Calibration& cal) {
  trace::RunRecord r;
  r.name = plan.name + " (predicted)";
  r.plan_json = plan_to_json(plan);
  r.kind = "predicted";
  r.status = trace::RunStatus::Completed;
  r.world_size = world_size(plan);
  r.host = cal.host;
  r.version = "loom-cli predict";
  const int steps = cycles_stored(p) * std::max(1, p.cycle_steps);
  r.wall_s = cycles_stored(p) * cycle_ms(p) / 1000.0;
  r.samples = std::int64_t(steps) * plan.training.batch;
  std::string runs;
  for (std::int64_t id : cal.runs) runs += (runs.empty() ? "" : ", ") + std::to_string(id);
  r.log = "predicted by loom-cli predict from the calibration of host '" + cal.host + "' (runs " + runs + "): ";
  r.log += p.cycle_steps > 1 ? "one cycle of " + std::to_string(p.cycle_steps) + " steps, " + std::to_string(cycle_ms(p)) + " ms"
                             : "one step of " + std::to_string(p.step_ms) + " ms";
  r.log += ", repeated " + std::to_string(cycles_stored(p)) + " times\n";
  for (const std::string& note : grouped_notes(p.notes)) r.log += "note: " + note + "\n";
  return r;
}

// Where each step of the cycle starts on `rank`: at its first span (the first at 0).
std::vector<double> step_starts(const Prediction& p, int rank) {
  std::vector<double> starts(std::size_t(std::max(1, p.cycle_steps)), -1.0);
  for (const PredictedSpan& span : p.spans) {
    if (span.rank != rank || span.step < 0 || span.step >= int(starts.size())) continue;
    double& start = starts[std::size_t(span.step)];
    start = start < 0 ? span.start_ms : std::min(start, span.start_ms);
  }
  starts[0] = 0;
  for (std::size_t k = 1; k < starts.size(); ++k)
    if (starts[k] < 0) starts[k] = starts[k - 1];
  return starts;
}

// Rank `rank`'s spans of the predicted cycle, repeated, each step in a Step span (but on a
// parameter server, which has no steps of its own, as measured).
std::vector<trace::Event> events_of(const Plan& plan, const Prediction& p, int rank) {
  const bool steps_of_its_own = rank_role(plan, rank).kind != RankKind::Server;
  std::vector<trace::Event> out;
  const std::vector<double> starts = step_starts(p, rank);
  const int cycle = int(starts.size());
  for (int c = 0; c < cycles_stored(p); ++c) {
    const double offset = c * cycle_ms(p);
    for (int k = 0; k < cycle; ++k) {
      const int step = c * cycle + k;
      trace::Event s;
      s.kind = trace::EventKind::Step, s.stream = trace::Stream::Host, s.step = step;
      s.start_ns = ns(offset + starts[std::size_t(k)]);
      s.end_ns = ns(offset + (k + 1 < cycle ? starts[std::size_t(k + 1)] : cycle_ms(p)));
      if (steps_of_its_own) out.push_back(s);
      for (const PredictedSpan& span : p.spans) {
        if (span.rank != rank || span.step != k) continue;
        trace::Event e;
        e.kind = span.kind, e.stream = span.stream, e.step = step, e.layer = span.layer;
        e.microbatch = std::int16_t(span.microbatch), e.bytes = span.bytes;
        e.start_ns = ns(offset + span.start_ms), e.end_ns = ns(offset + span.end_ms);
        out.push_back(e);
      }
    }
  }
  return out;
}

}  // namespace

Expected<std::int64_t> store_prediction(store::RunStore& store, const Plan& plan, const Prediction& prediction,
                                        const Calibration& calibration) {
  const trace::RunRecord run = record_of(plan, prediction, calibration);
  std::vector<trace::RankRecord> ranks;
  std::vector<std::pair<int, std::vector<trace::Event>>> events;
  for (int rank = 0; rank < run.world_size; ++rank) {
    trace::RankRecord r;
    r.rank = rank;
    r.host = calibration.host;
    r.device = "cpu";
    r.device_info.kind = "cpu";
    r.device_info.name = "predicted";
    r.device_info.blas_threads = prediction.threads_per_rank;
    events.emplace_back(rank, events_of(plan, prediction, rank));
    r.events_recorded = std::int64_t(events.back().second.size());
    ranks.push_back(r);
  }
  auto id = store.import_run(run, ranks, events, {});
  if (!id.ok()) return id.error();
  if (!prediction.updates.empty()) LOOM_TRY(store.append_updates(*id, prediction.updates));
  // The steady steps (all but the first) and their samples; asynchronous workers' steps
  // overlap, so their time is the samples at the predicted throughput.
  const std::int64_t samples = run.samples - plan.training.batch;
  const bool synchronous = !prediction.staleness.present;
  const double seconds = synchronous ? (cycles_stored(prediction) * cycle_ms(prediction) - prediction.step_ms) / 1000.0
                         : prediction.samples_per_s > 0 ? double(samples) / prediction.samples_per_s
                                                        : 0.0;
  LOOM_TRY(store.set_training_figures(*id, seconds, samples));
  return *id;
}

}  // namespace loom::predict
