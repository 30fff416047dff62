// load_run_rows and the run browser's formatting helpers (see run_rows.h).
#include "loom/ui/run_rows.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "loom/profiles/run_store.h"

namespace loom::ui {

loom::Expected<std::vector<RunRow>> load_run_rows(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return loom::make_error(loom::ErrorCode::NotFound, "no run database at " + path,
                            "launch a run first, or open another .db file");
  }
  auto store = loom::store::RunStore::open(path);
  if (!store.ok()) return store.error();
  auto runs = store->list_runs();
  if (!runs.ok()) return runs.error();
  std::vector<RunRow> rows;
  rows.reserve(runs->size());
  for (loom::store::RunRecord& r : *runs) {
    const double rate = r.samples_per_s();
    rows.push_back(RunRow{r.id, std::move(r.name), std::move(r.status), r.started_unix_ms, r.ended_unix_ms,
                          r.wall_s, r.samples, r.world_size, std::move(r.host), std::move(r.version),
                          std::move(r.error), rate});
  }
  return rows;
}

std::string run_status_label(std::string_view status) {
  if (status == "running") return "Running";
  if (status == "completed") return "Completed";
  if (status == "failed") return "Failed";
  if (status == "stopped") return "Stopped";
  if (status == "hung") return "Hung";
  if (status == "interrupted") return "Interrupted";
  return std::string(status);
}

std::string format_duration(double seconds) {
  if (!(seconds > 0)) return {};
  char text[32];
  if (seconds < 60) {
    std::snprintf(text, sizeof text, "%.1f s", seconds);
    return text;
  }
  const long long total = std::llround(seconds);
  const long long h = total / 3600, m = (total % 3600) / 60, s = total % 60;
  if (h > 0) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", h, m, s);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", m, s);
  }
  return text;
}

}  // namespace loom::ui
