// The run browser's data, free of Qt models: loading the run list from a store file and
// formatting its fields. Pure functions so the GUI can run load_run_rows on a worker
// thread (RunStore is one-connection-per-thread) and hand the rows to RunListModel.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "loom/core/status.h"
#include "loom/trace/records.h"

namespace loom::ui {

// One run as the browser lists it: RunRecord without the plan JSON and log, which can
// be large and are loaded on demand (RunStore::load_run) when a run is opened.
struct RunRow {
  std::int64_t id = 0;
  std::string name;
  trace::RunStatus status = trace::RunStatus::Running;
  std::int64_t started_unix_ms = 0;
  std::int64_t ended_unix_ms = 0;
  double wall_s = 0;
  std::int64_t samples = 0;
  int world_size = 1;
  std::string host, version, error;
  // RunRecord::samples_per_s(): over steady steps when known (as `loom-cli show` and the
  // status bar report it), else over the run's wall time; 0 when unknown (still running).
  double samples_per_s = 0;
  std::string mode;            // analysis::run_mode: "all-reduce, 4 replicas", ...
  // What its ranks ran on (analysis/device_identity.h): "NVIDIA H200", "cpu", "" when
  // not recorded; and in full, one line per kind of device, for the tooltip.
  std::string device;
  std::string device_detail;
  std::int64_t steps = 0;      // steps with a recorded loss (0: none yet)
  double test_accuracy = std::numeric_limits<double>::quiet_NaN();  // the latest evaluation
  std::vector<std::string> tags;
};

// Newest first, as RunStore::list_runs orders them, with tags and progress. A missing file is NotFound rather
// than created: browsing must not leave empty databases behind.
loom::Expected<std::vector<RunRow>> load_run_rows(const std::string& path);

// The mode column's text: "one process on NVIDIA H200", or the mode alone where the
// run's ranks did not say what they ran on.
std::string mode_with_device(const RunRow& row);

// "Running", "Completed", "Failed", "Stopped", "Hung", "Interrupted".
std::string run_status_label(trace::RunStatus status);
// "42.0 s", "3:07", "1:02:03"; empty for a non-positive duration (not known yet).
std::string format_duration(double seconds);

}  // namespace loom::ui
