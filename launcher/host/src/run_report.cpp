#include "loom/host/run_report.h"

#include <utility>

namespace loom::host {

Expected<RunReport> run_report(store::RunStore& store, std::int64_t run_id) {
  std::vector<std::vector<trace::Event>> events;  // kept for the critical path: one read of the store
  auto keep = [&](int rank, std::vector<trace::Event>&& e) {
    if (rank < 0) return;
    if (events.size() <= std::size_t(rank)) events.resize(std::size_t(rank) + 1);
    events[std::size_t(rank)] = std::move(e);
  };
  auto summary = analysis::summarize_run(store, run_id, keep);
  if (!summary.ok()) return summary.error();
  // Recorded by the host when ranks outnumbered a host's cores.
  auto over = recorded_oversubscription(store, run_id);
  if (!over.ok()) return over.error();
  auto records = store.load_ranks(run_id);
  if (!records.ok()) return records.error();
  RunReport report;
  report.paths = analysis::analyze_run_paths(summary->run, *records, std::move(events));
  report.layers = analysis::layer_names_by_id(summary->run.plan_json);
  report.efficiency = analysis::pop_efficiency(summary->ranks);
  report.oversubscription = *over;
  report.summary = std::move(summary).value();
  return report;
}

nlohmann::json run_report_json(const RunReport& report) {
  nlohmann::json out = analysis::summary_to_json(report.summary);
  const auto& over = report.oversubscription;
  out["oversubscription"] = over ? nlohmann::json{{"ranks", over->ranks}, {"cores", over->cores}} : nlohmann::json();
  out.update(analysis::path_analysis_to_json(report.paths, report.layers));
  out["efficiency"] = analysis::efficiency_to_json(report.efficiency);
  return out;
}

}  // namespace loom::host
