// load_run_rows and the run browser's formatting helpers (see run_rows.h).
#include "loom/ui/run_rows.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <system_error>

#include "loom/analysis/compare.h"
#include "loom/analysis/device_identity.h"
#include "loom/analysis/import_kineto.h"
#include "loom/store/run_store.h"

namespace loom::ui {

namespace {

// The fields a list shows straight from the record.
RunRow listed(const loom::trace::RunRecord& r) {
  RunRow row;
  row.id = r.id;
  row.name = r.name;
  row.status = r.status;
  row.started_unix_ms = r.started_unix_ms;
  row.ended_unix_ms = r.ended_unix_ms;
  row.wall_s = r.wall_s;
  row.samples = r.samples;
  row.world_size = r.world_size;
  row.host = r.host;
  row.version = r.version;
  row.error = r.error;
  row.samples_per_s = r.samples_per_s();
  row.mode = loom::analysis::run_mode(r);
  return row;
}

// An imported trace records no loss: its steps are the numbers of its Step spans, as
// every view counts them (analysis summary.cpp steps_recorded). Imported runs are small.
std::int64_t imported_steps(loom::store::RunStore& store, const loom::trace::RunRecord& r) {
  std::set<std::int32_t> numbers;
  for (int rank = 0; rank < r.world_size; ++rank) {
    auto steps = store.load_events_of_kind(r.id, rank, loom::trace::EventKind::Step);
    if (!steps.ok()) continue;  // the list still shows the run, without its steps
    for (const loom::trace::Event& e : *steps) numbers.insert(e.step);
  }
  return static_cast<std::int64_t>(numbers.size());
}

}  // namespace

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
  auto tags = store->load_all_tags();
  if (!tags.ok()) return tags.error();
  auto progress = store->load_listed_progress();
  if (!progress.ok()) return progress.error();
  auto devices = store->load_all_devices();
  if (!devices.ok()) return devices.error();
  std::vector<RunRow> rows;
  rows.reserve(runs->size());
  for (loom::trace::RunRecord& r : *runs) {
    RunRow row = listed(r);
    if (auto it = progress->find(r.id); it != progress->end()) {
      row.steps = it->second.steps;
      row.test_accuracy = it->second.test_accuracy;
    }
    if (row.steps == 0 && loom::kineto::is_imported_plan(r.plan_json)) row.steps = imported_steps(*store, r);
    if (auto it = tags->find(r.id); it != tags->end()) row.tags = std::move(it->second);
    if (auto it = devices->find(r.id); it != devices->end()) {
      const auto groups = loom::analysis::group_devices(it->second);
      row.device = loom::analysis::devices_short(groups);
      for (const std::string& line : loom::analysis::device_lines(groups))
        row.device_detail += (row.device_detail.empty() ? "" : "\n") + line;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string mode_with_device(const RunRow& row) {
  return row.device.empty() ? row.mode : row.mode + " on " + row.device;
}

std::string run_status_label(trace::RunStatus status) {
  std::string label(trace::to_text(status));
  label[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(label[0])));
  return label;
}

std::string format_duration(double seconds) {
  if (!(seconds > 0)) return {};
  char text[32];
  if (seconds < 60) {
    // A short imported trace (20 ms) must not read "0.0 s".
    std::snprintf(text, sizeof text, seconds < 1 ? "%.3f s" : "%.1f s", seconds);
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
