// The run store: every run, its ranks, its trace events and its metrics in one SQLite
// file. WAL mode lets the GUI read a run while the launcher writes it from another
// process. The schema is versioned: migrations run in order on open, and a file written
// by a newer Loom is refused rather than misread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/store/sqlite_db.h"
#include "loom/trace/event.h"
#include "loom/trace/records.h"

namespace loom::store {

// The records are the trace module's (records.h); the store speaks them.
using trace::MetricRecord;
using trace::RankRecord;
using trace::RunRecord;
using trace::RunStatus;
using trace::UpdateRecord;

// The record of a new run of `plan` on this machine: status running, world size from the
// plan, started when create_run stores it.
RunRecord new_run_record(const Plan& plan, const std::string& version);

// Where a run's ranks save their checkpoints (launcher/engine checkpoint.h): beside the
// run database, one directory per run. Ranks on other hosts write the same path on their
// own file system, so a multi-host run resumes only where that path is shared.
std::string checkpoint_dir(const std::string& db_path, std::int64_t run_id);

// Rows appended after a given point, for views that follow a live run: `last_seq` is the
// position to pass as `after_seq` next time (unchanged when nothing new arrived). The
// position is SQLite's rowid, which only grows while rows are appended.
struct EventBatch {
  std::vector<trace::Event> events;
  std::vector<int> ranks;  // ranks[i] recorded events[i]
  std::int64_t last_seq = 0;
};
struct MetricBatch {
  std::vector<MetricRecord> metrics;
  std::int64_t last_seq = 0;
};

struct UpdateBatch {
  std::vector<UpdateRecord> updates;
  std::int64_t last_seq = 0;
};

// What a view following a run polls: its status and error, and the log after a byte offset.
struct RunState {
  RunStatus status = RunStatus::Running;
  std::string error;
  std::string log_tail;
};

// A running run's owner updates its heartbeat this often (RunHeartbeat); a reader takes an
// owner silent for kOwnerSilentMs as gone, even when its process id is alive (reused, or
// on another host).
inline constexpr std::int64_t kHeartbeatPeriodMs = 2000;
inline constexpr std::int64_t kOwnerSilentMs = 30000;

// Why a running run's owner is gone, "" while it may still be running (or the run is not
// running): no owner recorded (a run from before schema v4), its process ended (on this
// host), or no heartbeat for kOwnerSilentMs. Pure, for tests; readers apply it.
std::string orphan_reason(const RunRecord& run, bool owner_on_this_host, bool owner_alive, std::int64_t now_ms);

// The schema version this build writes and the newest it can read.
inline constexpr int kSchemaVersion = 8;

// One connection to a run database. Movable, not copyable; use one RunStore per thread
// (open another on the same file for a second thread or process).
class RunStore {
 public:
  // Creates parent directories and the file if needed, then migrates the schema. A store
  // that exists but cannot be written here (a read-only mount, a file or folder without
  // write permission) opens read-only: reading works, writing fails saying so.
  static Expected<RunStore> open(const std::string& path);
  // $LOOM_DB if set, else $XDG_DATA_HOME/loom/runs.db, else $HOME/.local/share/loom/runs.db.
  static std::string default_path();

  RunStore(RunStore&&) noexcept = default;
  RunStore& operator=(RunStore&&) noexcept = default;
  ~RunStore();

  int schema_version() const { return schema_version_; }
  bool read_only() const { return read_only_; }
  const std::string& path() const { return db_.path(); }

  // Inserts a run (run.id is ignored; started_unix_ms 0 means now) and returns its id.
  Expected<std::int64_t> create_run(const RunRecord& run);
  Status upsert_rank(std::int64_t run_id, const RankRecord& rank);
  // One transaction per call with a reused prepared statement: batch events.
  Status append_events(std::int64_t run_id, int rank, const trace::Event* events, std::size_t count);
  Status append_metrics(std::int64_t run_id, const std::vector<MetricRecord>& metrics);
  Status append_updates(std::int64_t run_id, const std::vector<UpdateRecord>& updates);
  Status append_log(std::int64_t run_id, const std::string& text);
  // Sets status, ended_unix_ms = now, wall_s, samples and error, then packs the events
  // (pack_events; a failure to pack is not the run's failure: readers use the rows).
  Status finish_run(std::int64_t run_id, RunStatus status, double wall_s, std::int64_t samples,
                    const std::string& error);

  // The owner of a running run says it is alive (every kHeartbeatPeriodMs; RunHeartbeat).
  Status heartbeat(std::int64_t run_id);

  // Readers (list_runs, load_run, load_run_state) mark a running run whose owner is gone
  // (orphan_reason) as interrupted, with the reason as its error, before returning it.
  // Newest first. plan_json is included; log is left empty (it can be large: load_run).
  Expected<std::vector<RunRecord>> list_runs();
  Expected<RunRecord> load_run(std::int64_t run_id);  // NotFound for an unknown id
  // Cheap to poll: no plan, and only the log's bytes from `log_from` on. NotFound as load_run.
  Expected<RunState> load_run_state(std::int64_t run_id, std::size_t log_from);
  Expected<std::vector<RankRecord>> load_ranks(std::int64_t run_id);  // ordered by rank
  // Copies a run's events into blocks per rank (schema v6), replacing any it had, so that
  // load_events copies blocks instead of decoding a row per event. Done by finish_run and
  // import_run; appending events to the run afterwards drops the blocks again.
  Status pack_events(std::int64_t run_id);
  // A packed run's events per rank (ascending, each in load_events order), for a view
  // that reads a finished run whole; nullopt unless every rank with events has usable
  // blocks. Rows appended after packing drop the blocks, so the blocks hold every event.
  struct PackedRun {
    std::vector<std::pair<int, std::vector<trace::Event>>> ranks;
  };
  Expected<std::optional<PackedRun>> load_packed_run(std::int64_t run_id);
  // Ordered by rank, then start_ns, then insertion order; rank -1 means all ranks. From
  // the run's blocks where it has usable ones, else from its rows (the same events).
  Expected<std::vector<trace::Event>> load_events(std::int64_t run_id, int rank = -1);
  // One rank's events of one kind (Step spans for throughput), ordered by start_ns.
  Expected<std::vector<trace::Event>> load_events_of_kind(std::int64_t run_id, int rank, trace::EventKind kind);
  // Stores the steady training time and samples of a run (analysis::store_training_figures).
  Status set_training_figures(std::int64_t run_id, double train_s, std::int64_t train_samples);
  // Distinct ranks that have events, ascending.
  Expected<std::vector<int>> event_ranks(std::int64_t run_id);
  Expected<std::int64_t> count_events(std::int64_t run_id, int rank = -1);
  // Up to `limit` events / metrics stored after `after_seq` (0 = from the start), in the
  // order they were stored.
  Expected<EventBatch> load_events_after(std::int64_t run_id, std::int64_t after_seq, std::size_t limit);
  Expected<MetricBatch> load_metrics_after(std::int64_t run_id, std::int64_t after_seq, std::size_t limit);
  Expected<UpdateBatch> load_updates_after(std::int64_t run_id, std::int64_t after_seq, std::size_t limit);
  // Ordered by step, then t_ns; an empty name means every metric.
  Expected<std::vector<MetricRecord>> load_metrics(std::int64_t run_id, const std::string& name = "");
  // Every applied update of a run, in the order the servers applied them.
  Expected<std::vector<UpdateRecord>> load_updates(std::int64_t run_id);

  // The run browser's edits. Renaming and tagging any run, also a running one. A tag is
  // 1-64 characters without commas or control characters (InvalidArgument names it);
  // set_tags replaces the run's tags, kept sorted and without duplicates.
  Status rename_run(std::int64_t run_id, const std::string& name);
  Status set_tags(std::int64_t run_id, const std::vector<std::string>& tags);
  Expected<std::vector<std::string>> load_tags(std::int64_t run_id);
  // Every run's tags, by run id (runs without tags absent), for lists.
  Expected<std::map<std::int64_t, std::vector<std::string>>> load_all_tags();
  // Every run's recorded device identities (schema v7), by run id and ordered by rank:
  // what the Runs list names ("on NVIDIA H200") without loading each run. Ranks without
  // one, and runs with none, are absent.
  Expected<std::map<std::int64_t, std::vector<std::pair<int, trace::DeviceInfo>>>> load_all_devices();
  // Per run with metrics, what a list shows of its progress (runs without any absent).
  struct ListedProgress {
    std::int64_t steps = 0;   // distinct steps with a "loss" metric (0: none)
    double test_accuracy = std::numeric_limits<double>::quiet_NaN();  // the latest one
  };
  Expected<std::map<std::int64_t, ListedProgress>> load_listed_progress();
  // Removes the run, its ranks, events, metrics, updates and tags in one transaction, then
  // its checkpoint folder. Refused (InvalidArgument) for a run still running; NotFound for
  // an unknown id.
  Status delete_run(std::int64_t run_id);

  // A whole finished run written at once, in ONE transaction (imports, e.g. PyTorch
  // traces): the run, its ranks, events per rank and metrics, or nothing when any write
  // fails. run.status must be a finished one; ended_unix_ms 0 means when it is stored.
  Expected<std::int64_t> import_run(const RunRecord& run, const std::vector<RankRecord>& ranks,
                                    const std::vector<std::pair<int, std::vector<trace::Event>>>& events,
                                    const std::vector<MetricRecord>& metrics);

 private:
  explicit RunStore(Database db) : db_(std::move(db)) {}
  Status configure();
  Status configure_reading();
  Status migrate();
  Status check_schema_for_reading();
  Status require_run(std::int64_t run_id);
  void interrupt_if_orphaned(RunRecord& run);
  void remove_stale_reserves();
  Status insert_event_rows(std::int64_t run_id, int rank, const trace::Event* events, std::size_t count);
  Status write_event_blocks(std::int64_t run_id);  // pack_events inside the caller's transaction
  Status drop_event_blocks(std::int64_t run_id);
  // nullopt where the run (rank) has no blocks, or any is of another format or damaged.
  Expected<std::optional<std::vector<trace::Event>>> load_event_blocks(std::int64_t run_id, int rank);
  Expected<std::vector<trace::Event>> load_event_rows(std::int64_t run_id, int rank);

  Database db_;  // declared first: destroyed last, after the statements below
  int schema_version_ = 0;
  bool read_only_ = false;
  std::optional<Statement> insert_event_batch_;  // kEventBatchRows rows per execution
  std::optional<Statement> insert_event_one_;
};

}  // namespace loom::store
