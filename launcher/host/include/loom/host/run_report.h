// What `loom-cli show` reports of a stored run, read once from the store: the summary,
// the oversubscription the host recorded, the critical path with its waits, and the POP
// efficiencies. Here because the oversubscription record is the host's; loom-cli prints
// it, and lessons (loom-cli lesson, the workbench's Lessons dock) measure from its JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/analysis/analysis.h"
#include "loom/analysis/compare.h"
#include "loom/analysis/critical_path.h"
#include "loom/host/oversubscription.h"
#include "loom/store/run_store.h"

namespace loom::host {

struct RunReport {
  analysis::RunSummary summary;
  std::optional<HostLoad> oversubscription;
  analysis::PathAnalysis paths;
  std::vector<std::string> layers;  // by layer id, for naming the path's layers
  analysis::Efficiency efficiency;
};

Expected<RunReport> run_report(store::RunStore& store, std::int64_t run_id);

// `loom-cli show --json` (docs/figures.md).
nlohmann::json run_report_json(const RunReport& report);

}  // namespace loom::host
