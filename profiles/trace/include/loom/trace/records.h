// What a run leaves behind besides its events: the run, its ranks and their clocks, its
// metrics and the updates a parameter server applied. Plain structs, shared by whoever
// writes them (a rank's sink, the host), stores them (store/) and reads them (analysis/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "loom/trace/device_info.h"

namespace loom::trace {

// How a run ended, or that it has not. Text only where it leaves the program: the store's
// `status` column, the stream's Done frame, `loom-cli` output (to_text / run_status_from).
enum class RunStatus {
  Running,
  Completed,
  Failed,
  Stopped,      // the user stopped it; what was recorded is kept
  Hung,         // the host's watchdog ended it: a rank made no progress (hang_watch.h)
  Interrupted,  // its owner died before finishing it (RunStore::interrupt_if_orphaned)
};

// "running", "completed", "failed", "stopped", "hung", "interrupted".
std::string_view to_text(RunStatus status);
// The status a text names, or nullopt for any other text.
std::optional<RunStatus> run_status_from(std::string_view text);
// Ended badly: failed, hung or interrupted (a stopped run ended as asked).
bool ended_badly(RunStatus status);
// May be resumed from its checkpoint: ended, but not completed.
bool resumable(RunStatus status);

// In JSON (`loom-cli --json`, the Chrome export's metadata) a status is its text, never
// the enum's number.
NLOHMANN_JSON_SERIALIZE_ENUM(RunStatus, {{RunStatus::Failed, "failed"},
                                         {RunStatus::Running, "running"},
                                         {RunStatus::Completed, "completed"},
                                         {RunStatus::Stopped, "stopped"},
                                         {RunStatus::Hung, "hung"},
                                         {RunStatus::Interrupted, "interrupted"}})

struct RunRecord {
  std::int64_t id = 0;
  std::string name, plan_json;
  RunStatus status = RunStatus::Running;
  std::int64_t started_unix_ms = 0, ended_unix_ms = 0;
  double wall_s = 0;
  std::int64_t samples = 0;
  int world_size = 1;
  std::string host, version, error, log;
  // Schema v3: steady training time and samples (analysis.h Throughput); 0 = not computed.
  double train_s = 0;
  std::int64_t train_samples = 0;
  // Schema v4. The process that runs it (on `host`; 0 = create_run's caller) and when it
  // last said it was alive (RunStore::heartbeat); the run a resumed run continues (0: none).
  std::int64_t owner_pid = 0, heartbeat_unix_ms = 0, resumed_from = 0;
  // Schema v8: "" a measured run; "predicted" a prediction (`loom-cli predict --store`),
  // whose events are the predictor's spans, never calibration.
  std::string kind;
  bool predicted() const { return kind == "predicted"; }
  // The figure every list shows: steady when known, else the whole job's.
  double samples_per_s() const {
    if (train_s > 0 && train_samples > 0) return static_cast<double>(train_samples) / train_s;
    return wall_s > 0 ? static_cast<double>(samples) / wall_s : 0.0;
  }
};

// One rank of a run and its clock relative to rank 0's. offset_ns is (this rank's clock
// minus rank 0's) estimated at this rank's clock time sync_start_ns; offset_end_ns is the
// same at sync_end_ns, so drift between the two is linear (see clock_align.h).
// sync_end_ns == 0 means no end estimate: the offset is constant. New fields go at the
// end so aggregate initialisers written for older versions keep compiling.
struct RankRecord {
  int rank = 0;
  std::string host;
  std::string device;
  std::int64_t offset_ns = 0, uncertainty_ns = 0, t0_ns = 0, events_recorded = 0;
  // Schema v2.
  std::int64_t offset_end_ns = 0, sync_start_ns = 0, sync_end_ns = 0;
  int pid = 0;  // the rank's operating-system process id, 0 when unknown
  // Schema v7: what the device really is (device_info.h); not recorded in older runs.
  // Initialised here, so a record written as {rank, host, device, ...} says it is unset.
  DeviceInfo device_info{};
};

struct MetricRecord {
  int rank = 0;
  std::int64_t step = 0;
  std::int64_t t_ns = 0;
  std::string name;
  double value = 0;
};

// One gradient a parameter server applied (asynchronous modes). Versions count what the
// server has applied: updates in parameter_server mode, completed clocks in ssp mode
// (see launcher/engine/parameter_server.h). staleness = version_applied - version_read.
struct UpdateRecord {
  int worker = 0;                    // rank of the worker that pushed the gradient
  int server = 0;                    // server index, 0 .. servers-1
  std::int64_t step = 0;             // the worker's step that produced it
  std::int64_t version_read = 0;     // the server's version the worker's pull read
  std::int64_t version_applied = 0;  // the server's version just before applying it
  std::int64_t staleness = 0;
  std::int64_t t_ns = 0;             // when applied, on the server's clock

  bool operator==(const UpdateRecord&) const = default;
};

}  // namespace loom::trace
