// A run summary as JSON (keys in summary_json.h).
#include "loom/analysis/summary_json.h"

#include <cmath>
#include <optional>

#include "loom/analysis/training_window.h"

namespace loom::analysis {

namespace {
nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json allreduce_json(const AllReduceStats& a) {
  return {{"bytes", a.bytes},
          {"count", a.count},
          {"seconds", a.seconds},
          {"algbw_gbs", number_or_null(a.algbw_gbs)},
          {"busbw_gbs", number_or_null(a.busbw_gbs)},
          {"p2p_gbs", number_or_null(a.p2p_gbs)},
          {"hidden_fraction", number_or_null(a.hidden_fraction)}};
}

nlohmann::json clock_json(const std::vector<ClockRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const ClockRow& c : rows) {
    out.push_back({{"rank", c.rank},
                   {"offset_ns", c.offset_ns},
                   {"offset_end_ns", c.offset_end_ns},
                   {"uncertainty_ns", c.uncertainty_ns},
                   {"drift_ppm", c.drift_ppm}});
  }
  return out;
}

nlohmann::json scaling_json(const std::optional<Scaling>& sc) {
  if (!sc) return nullptr;
  return {{"reference_run_id", sc->reference_run_id},
          {"reference_samples_per_s", sc->reference_samples_per_s},
          {"efficiency", sc->efficiency}};
}

nlohmann::json stages_json(const std::optional<PipelineStats>& p) {
  nlohmann::json out = nlohmann::json::array();
  if (!p) return out;
  for (const StageStats& st : p->stages_stats) {
    out.push_back({{"stage", st.stage},
                   {"ranks", st.ranks},
                   {"busy_s", st.busy_s},
                   {"bubble_s", st.bubble_s},
                   {"bubble_fraction", number_or_null(st.bubble_fraction)},
                   {"bubble_theory", number_or_null(st.bubble_theory)},
                   {"bubble_schedule", number_or_null(st.bubble_schedule)},
                   {"bubble_textbook", number_or_null(st.bubble_textbook)},
                   {"forward_ms", number_or_null(st.forward_ms)},
                   {"backward_ms", number_or_null(st.backward_ms)},
                   {"max_in_flight", st.max_in_flight},
                   {"peak_activation_bytes", st.peak_activation_bytes}});
  }
  return out;
}

nlohmann::json staleness_json(const StalenessStats& st) {
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerStaleness& w : st.workers) {
    workers.push_back({{"rank", w.rank},
                       {"updates", w.updates},
                       {"mean", w.mean},
                       {"p50", w.p50},
                       {"p95", w.p95},
                       {"max", w.max},
                       {"wait_s", w.wait_s}});
  }
  nlohmann::json out = {{"mode", st.mode},
                        {"overall", {{"mean", st.mean}, {"p50", st.p50}, {"p95", st.p95}, {"max", st.max}}},
                        {"workers", std::move(workers)}};
  if (st.mode == sync_mode_name(SyncMode::Ssp)) out["bound"] = st.bound;  // meaningless elsewhere
  return out;
}

nlohmann::json divergence_json(const DivergenceStats& d) {
  return {{"count", d.count}, {"mean", number_or_null(d.mean)}, {"last", number_or_null(d.last)}};
}

nlohmann::json ranks_json(const std::vector<RankBreakdown>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : ranks) {
    out.push_back({{"rank", r.rank},
                   {"device", r.device},
                   {"device_info", trace::device_info_to_json(r.device_info)},
                   {"compute_s", r.compute_s},
                   {"comm_s", r.comm_s},
                   {"optimizer_s", r.optimizer_s},
                   {"data_s", r.data_s},
                   {"idle_s", r.idle_s},
                   {"events_recorded", r.events_recorded >= 0 ? nlohmann::json(r.events_recorded) : nlohmann::json()},
                   {"events_stored", r.events_stored},
                   {"exposed_comm_s", r.exposed_comm_s},
                   {"window_s", r.window_s},
                   {"setup_s", r.setup_s},
                   {"warmup_s", r.warmup_s},
                   {"steady_steps", r.steady_steps},
                   {"sends_per_step", r.sends_per_step},
                   {"descheduled_s", r.descheduled_s}});
  }
  return out;
}

nlohmann::json memory_json(const std::vector<RankMemory>& rows) {
  nlohmann::json out = nlohmann::json::array();
  auto part = [](std::int64_t v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(); };
  for (const RankMemory& m : rows)
    out.push_back({{"rank", m.rank},
                   {"total_bytes", m.total},
                   {"parameters_bytes", part(m.parameters)},
                   {"gradients_bytes", part(m.gradients)},
                   {"optimizer_bytes", part(m.optimizer)},
                   {"workspace_bytes", part(m.workspace)},
                   {"activations_bytes", part(m.activations)}});
  return out;
}
}  // namespace

nlohmann::json summary_to_json(const RunSummary& s) {
  nlohmann::json plan = nlohmann::json::parse(s.run.plan_json, nullptr, /*allow_exceptions=*/false);
  if (plan.is_discarded()) plan = nullptr;
  const auto& p = s.pipeline;
  nlohmann::json out = {{"id", s.run.id},
          {"name", s.run.name},
          {"status", s.run.status},
          {"started_unix_ms", s.run.started_unix_ms},
          {"ended_unix_ms", s.run.ended_unix_ms},
          {"error", s.run.error},
          {"resumed_from", s.run.resumed_from != 0 ? nlohmann::json(s.run.resumed_from) : nlohmann::json()},
          {"resumed_at_step", s.resumed_at_step >= 0 ? nlohmann::json(s.resumed_at_step) : nlohmann::json()},
          {"plan", plan},
          {"world_size", s.world_size},
          {"steps", s.steps},
          {"wall_s", s.wall_s},
          {"samples", s.run.samples},
          {"samples_per_s", number_or_null(s.samples_per_s)},
          {"throughput_basis", s.throughput_basis},
          {"train_s", s.train_s},
          {"train_samples", s.train_samples},
          {"steady_steps", s.steady_steps},
          {"warmup_steps", kWarmupSteps},
          {"setup_s", s.setup_s},
          {"wall_samples_per_s", number_or_null(s.wall_samples_per_s)},
          {"warnings", s.warnings},
          {"final_loss", number_or_null(s.final_loss)},
          {"test_accuracy", number_or_null(s.test_accuracy)},
          {"final_param_norm", number_or_null(s.param_norm)},
          {"ranks", ranks_json(s.ranks)},
          {"device_memory", memory_json(s.memory)},
          {"devices", devices_json(s.devices)},
          {"allreduce", allreduce_json(s.allreduce)},
          {"clock", clock_json(s.clock)},
          {"scaling", scaling_json(s.scaling)},
          {"schedule", p ? nlohmann::json(p->schedule) : nlohmann::json()},
          {"microbatches", p ? nlohmann::json(p->microbatches) : nlohmann::json()},
          {"bubble_convention", p ? nlohmann::json(p->bubble_convention) : nlohmann::json()},
          {"stage_imbalance", p ? number_or_null(p->imbalance) : nlohmann::json()},
          {"stages", stages_json(p)}};
  // Optional sections are absent rather than null: most runs have neither.
  if (s.staleness.present) out["staleness"] = staleness_json(s.staleness);
  if (s.divergence) out["divergence"] = divergence_json(*s.divergence);
  if (s.serving) out["serving"] = serving_to_json(*s.serving);
  return out;
}

}  // namespace loom::analysis
