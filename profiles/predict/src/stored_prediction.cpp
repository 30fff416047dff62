// A prediction stored as a run (see stored_prediction.h).
#include "loom/predict/stored_prediction.h"

#include <cmath>

namespace loom::predict {

namespace {

std::int64_t ns(double ms) { return std::llround(ms * 1e6); }

trace::RunRecord record_of(const Plan& plan, const Prediction& p, const Calibration& cal) {
  trace::RunRecord r;
  r.name = plan.name + " (predicted)";
  r.plan_json = plan_to_json(plan);
  r.kind = "predicted";
  r.status = trace::RunStatus::Completed;
  r.world_size = world_size(plan);
  r.host = cal.host;
  r.version = "loom-cli predict";
  r.wall_s = kStoredPredictionSteps * p.step_ms / 1000.0;
  r.samples = kStoredPredictionSteps * plan.training.batch;
  std::string runs;
  for (std::int64_t id : cal.runs) runs += (runs.empty() ? "" : ", ") + std::to_string(id);
  r.log = "predicted by loom-cli predict from the calibration of host '" + cal.host + "' (runs " + runs + "): one step of " +
          std::to_string(p.step_ms) + " ms, repeated " + std::to_string(kStoredPredictionSteps) + " times\n";
  for (const std::string& note : p.notes) r.log += "note: " + note + "\n";
  return r;
}

// Rank `rank`'s spans of the predicted step, once per stored step, each step in a Step span.
std::vector<trace::Event> events_of(const Prediction& p, int rank) {
  std::vector<trace::Event> out;
  for (int step = 0; step < kStoredPredictionSteps; ++step) {
    const double offset = step * p.step_ms;
    trace::Event s;
    s.kind = trace::EventKind::Step, s.stream = trace::Stream::Host, s.step = step;
    s.start_ns = ns(offset), s.end_ns = ns(offset + p.step_ms);
    out.push_back(s);
    for (const PredictedSpan& span : p.spans) {
      if (span.rank != rank) continue;
      trace::Event e;
      e.kind = span.kind, e.stream = span.stream, e.step = step, e.layer = span.layer;
      e.microbatch = std::int16_t(span.microbatch), e.bytes = span.bytes;
      e.start_ns = ns(offset + span.start_ms), e.end_ns = ns(offset + span.end_ms);
      out.push_back(e);
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
    events.emplace_back(rank, events_of(prediction, rank));
    r.events_recorded = std::int64_t(events.back().second.size());
    ranks.push_back(r);
  }
  auto id = store.import_run(run, ranks, events, {});
  if (!id.ok()) return id.error();
  const int steady = kStoredPredictionSteps - 1;
  LOOM_TRY(store.set_training_figures(*id, steady * prediction.step_ms / 1000.0, std::int64_t(steady) * plan.training.batch));
  return *id;
}

}  // namespace loom::predict
