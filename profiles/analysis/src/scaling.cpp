// Scaling efficiency (definition in scaling.h).
#include "loom/analysis/scaling.h"

#include <nlohmann/json.hpp>

#include "loom/store/run_store.h"

#include "figure_parts.h"

namespace loom::analysis {

namespace {
nlohmann::json plan_without_parallelism(const std::string& plan_json) {
  nlohmann::json plan = nlohmann::json::parse(plan_json, nullptr, /*allow_exceptions=*/false);
  if (!plan.is_object()) return nlohmann::json();  // discarded or not a plan: null
  plan.erase("parallel");
  plan.erase("name");
  return plan;
}
}  // namespace

// The newest completed single-rank run with the same plan apart from parallelism.
Expected<std::optional<Scaling>> find_scaling(store::RunStore& store, const RunSummary& s) {
  if (s.world_size <= 1 || s.samples_per_s <= 0) return std::optional<Scaling>();
  const nlohmann::json plan = plan_without_parallelism(s.run.plan_json);
  if (plan.is_null()) return std::optional<Scaling>();
  auto runs = store.list_runs();  // newest first
  if (!runs.ok()) return runs.error();
  for (const trace::RunRecord& r : *runs) {
    if (r.id == s.run.id || r.status != trace::RunStatus::Completed || r.world_size != 1 || r.samples_per_s() <= 0) continue;
    if (plan_without_parallelism(r.plan_json) != plan) continue;
    Scaling sc;
    sc.reference_run_id = r.id;
    sc.reference_samples_per_s = r.samples_per_s();
    sc.efficiency = s.samples_per_s / (s.world_size * sc.reference_samples_per_s);
    return std::optional<Scaling>(sc);
  }
  return std::optional<Scaling>();
}

bool same_plan_but_parallelism(const std::string& plan_json_a, const std::string& plan_json_b) {
  const nlohmann::json a = plan_without_parallelism(plan_json_a);
  return !a.is_null() && a == plan_without_parallelism(plan_json_b);
}

}  // namespace loom::analysis
