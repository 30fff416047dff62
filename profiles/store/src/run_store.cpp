// SQLite-backed RunStore. Schema changes are an ordered list of migrations, each applied
// in its own transaction with the version bump, so a crash mid-migration leaves the old
// version intact. Events are inserted many rows per statement execution inside one
// transaction per batch: per-row statement overhead, not disk, limits ingest.
#include "loom/store/run_store.h"
#include "loom/store/space_reserve.h"

#include "loom/trace/machine.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <string_view>
#include <thread>
#include <tuple>

namespace loom::store {

namespace {

// Migration N (1-based) brings the schema from version N-1 to N. Append, never edit.
constexpr std::string_view kMigrations[] = {
    // 1: the initial schema.
    R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL DEFAULT '',
  plan_json TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'running'
    CHECK (status IN ('running', 'completed', 'failed', 'stopped')),
  started_unix_ms INTEGER NOT NULL DEFAULT 0,
  ended_unix_ms INTEGER NOT NULL DEFAULT 0,
  wall_s REAL NOT NULL DEFAULT 0,
  samples INTEGER NOT NULL DEFAULT 0,
  world_size INTEGER NOT NULL DEFAULT 1,
  host TEXT NOT NULL DEFAULT '',
  version TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  log TEXT NOT NULL DEFAULT ''
);
CREATE TABLE ranks (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  rank INTEGER NOT NULL,
  host TEXT NOT NULL DEFAULT '',
  device TEXT NOT NULL DEFAULT '',
  offset_ns INTEGER NOT NULL DEFAULT 0,
  uncertainty_ns INTEGER NOT NULL DEFAULT 0,
  t0_ns INTEGER NOT NULL DEFAULT 0,
  events_recorded INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (run_id, rank)
);
CREATE TABLE events (
  run_id INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  stream INTEGER NOT NULL,
  step INTEGER NOT NULL,
  layer INTEGER NOT NULL,
  peer INTEGER NOT NULL,
  message INTEGER NOT NULL,
  microbatch INTEGER NOT NULL,
  bytes INTEGER NOT NULL
);
CREATE INDEX events_by_rank_time ON events (run_id, rank, start_ns);
CREATE TABLE metrics (
  run_id INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  t_ns INTEGER NOT NULL,
  name TEXT NOT NULL,
  value REAL NOT NULL
);
CREATE INDEX metrics_by_name_step ON metrics (run_id, name, step);
-- Parameter-server staleness: one row per applied gradient.
CREATE TABLE updates (
  run_id INTEGER NOT NULL,
  worker INTEGER NOT NULL,
  server INTEGER NOT NULL,
  step INTEGER NOT NULL,
  version_read INTEGER NOT NULL,
  version_applied INTEGER NOT NULL,
  staleness INTEGER NOT NULL,
  t_ns INTEGER NOT NULL
);
CREATE INDEX updates_by_run ON updates (run_id, step);
)sql",
    // 2: the clock offset at the end of the run (linear drift) and the rank's process id.
    R"sql(
ALTER TABLE ranks ADD COLUMN offset_end_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ranks ADD COLUMN sync_start_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ranks ADD COLUMN sync_end_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ranks ADD COLUMN pid INTEGER NOT NULL DEFAULT 0;
)sql",
    // 3: steady training time and samples (analysis.h Throughput), so lists agree with show;
    // per event, the time its thread waited for a core (Event::descheduled_us).
    R"sql(
ALTER TABLE runs ADD COLUMN train_s REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN train_samples INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN descheduled_us INTEGER NOT NULL DEFAULT 0;
)sql",
    // 4: two more ways a run ends (hung, interrupted), who owns a running run (process id on
    // runs.host, and a heartbeat) so a reader can tell a run whose owner died from one still
    // running, and the run a resumed run continues. The status CHECK can only change by
    // rebuilding the table (SQLite's documented procedure); ids are kept.
    R"sql(
CREATE TABLE runs_v4 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL DEFAULT '',
  plan_json TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'running'
    CHECK (status IN ('running', 'completed', 'failed', 'stopped', 'hung', 'interrupted')),
  started_unix_ms INTEGER NOT NULL DEFAULT 0,
  ended_unix_ms INTEGER NOT NULL DEFAULT 0,
  wall_s REAL NOT NULL DEFAULT 0,
  samples INTEGER NOT NULL DEFAULT 0,
  world_size INTEGER NOT NULL DEFAULT 1,
  host TEXT NOT NULL DEFAULT '',
  version TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  log TEXT NOT NULL DEFAULT '',
  train_s REAL NOT NULL DEFAULT 0,
  train_samples INTEGER NOT NULL DEFAULT 0,
  owner_pid INTEGER NOT NULL DEFAULT 0,
  heartbeat_unix_ms INTEGER NOT NULL DEFAULT 0,
  resumed_from INTEGER NOT NULL DEFAULT 0
);
INSERT INTO runs_v4 (id, name, plan_json, status, started_unix_ms, ended_unix_ms, wall_s, samples, world_size,
                     host, version, error, log, train_s, train_samples)
  SELECT id, name, plan_json, status, started_unix_ms, ended_unix_ms, wall_s, samples, world_size,
         host, version, error, log, train_s, train_samples FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v4 RENAME TO runs;
)sql",
    // 5: tags a user gives runs in the run browser.
    R"sql(
CREATE TABLE run_tags (
  run_id INTEGER NOT NULL,
  tag TEXT NOT NULL,
  PRIMARY KEY (run_id, tag)
);
)sql",
    // 6: a finished run's events packed per rank into blocks of trace::Event records,
    // written once when the run ends (RunStore::pack_events). Reading a million events
    // from rows costs a B-tree lookup and eleven column decodes each; a block is one copy.
    // The rows stay: live views page through them, and they are the record if blocks are
    // missing, stale or of another format.
    R"sql(
CREATE TABLE event_blocks (
  run_id INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  block INTEGER NOT NULL,
  format INTEGER NOT NULL,
  events INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (run_id, rank, block)
);
)sql",
    // 7: what each rank's device really is (trace::DeviceInfo as JSON, device_info.h);
    // '' for ranks stored before, which readers show as "not recorded".
    R"sql(
ALTER TABLE ranks ADD COLUMN device_info TEXT NOT NULL DEFAULT '';
)sql",
    // 8: what kind of run a row is: '' a measured run (every run before), 'predicted' a
    // prediction stored by `loom-cli predict --store` (RunRecord::kind).
    R"sql(
ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT '';
)sql",
};
static_assert(std::size(kMigrations) == kSchemaVersion, "one migration per schema version");

// Blocks of format 1 hold trace::Event exactly as this build lays it out: 48 bytes, no
// padding, little-endian. Changing Event means a new format number; readers fall back to
// the rows for any other.
constexpr std::int64_t kEventBlockFormat = 1;
static_assert(sizeof(trace::Event) == 48 && std::endian::native == std::endian::little,
              "event block format 1 is the 48-byte little-endian Event");
constexpr std::size_t kEventsPerBlock = std::size_t(1) << 16;  // 3 MiB blobs

constexpr int kEventColumns = 13;
// Rows per multi-row INSERT: 64 * 13 = 832 parameters, well under SQLite's limit.
constexpr std::size_t kEventBatchRows = 64;

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string event_insert_sql(std::size_t rows) {
  std::string sql =
      "INSERT INTO events (run_id, rank, start_ns, end_ns, kind, stream, step, layer, peer, "
      "message, microbatch, bytes, descheduled_us) VALUES ";
  for (std::size_t r = 0; r < rows; ++r) sql += r ? ",(?,?,?,?,?,?,?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?,?,?,?,?,?,?)";
  return sql;
}

// Binds one event as row `row` of a (multi-row) insert.
void bind_event(Statement& st, std::size_t row, std::int64_t run_id, int rank, const trace::Event& e) {
  int b = static_cast<int>(row) * kEventColumns;
  st.bind(b + 1, run_id)
      .bind(b + 2, rank)
      .bind(b + 3, e.start_ns)
      .bind(b + 4, e.end_ns)
      .bind(b + 5, static_cast<int>(e.kind))
      .bind(b + 6, static_cast<int>(e.stream))
      .bind(b + 7, e.step)
      .bind(b + 8, e.layer)
      .bind(b + 9, e.peer)
      .bind(b + 10, e.message)
      .bind(b + 11, static_cast<int>(e.microbatch))
      .bind(b + 12, e.bytes)
      .bind(b + 13, e.descheduled_us);
}

Status run_once(Statement& st) {
  auto r = st.step();
  st.reset();
  if (!r.ok()) return r.error();
  return {};
}

// A status column's text as a RunStatus. Text no Loom writes (a damaged file) reads as
// failed, with the text in the error, so lists show it rather than refuse the whole store.
RunStatus status_from_column(const std::string& text, std::string& error) {
  if (auto status = trace::run_status_from(text)) return *status;
  error = "the store holds an unknown status '" + text.substr(0, 32) + "'" + (error.empty() ? "" : "; " + error);
  return RunStatus::Failed;
}

// Whether a process of this machine still runs (a zombie does not: it has ended).
bool process_alive(std::int64_t pid) {
  const char state = machine::process_state(pid);
  return state != '\0' && state != 'Z';
}

Error unknown_run(std::int64_t run_id, const std::string& path) {
  return make_error(ErrorCode::NotFound, "no run " + std::to_string(run_id) + " in " + path,
                    "list the stored runs to see valid ids");
}

}  // namespace

RunStore::~RunStore() = default;

std::string RunStore::default_path() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
  };
  if (auto db = env("LOOM_DB"); !db.empty()) return db;
  if (auto xdg = env("XDG_DATA_HOME"); !xdg.empty()) return xdg + "/loom/runs.db";
  if (auto home = env("HOME"); !home.empty()) return home + "/.local/share/loom/runs.db";
  return "loom-runs.db";
}

std::string this_host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

RunRecord new_run_record(const Plan& plan, const std::string& version) {
  RunRecord run;
  run.name = plan.name;
  run.plan_json = plan_to_json(plan);
  run.status = RunStatus::Running;
  run.world_size = world_size(plan);
  run.host = this_host_name();
  run.version = version;
  return run;
}

std::string checkpoint_dir(const std::string& db_path, std::int64_t run_id) {
  return db_path + ".checkpoints/run-" + std::to_string(run_id);
}

namespace {
// How a store can be opened here. Write access is asked of the system (access(2)), which
// also answers for a read-only mount; a store that does not exist yet is created.
Database::Access access_for(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Database::Access::ReadWrite;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const bool dir_writable = ::access(dir.c_str(), W_OK) == 0;
  if (dir_writable && ::access(path.c_str(), W_OK) == 0) return Database::Access::ReadWrite;
  // A WAL reader keeps its shared memory in a -shm file beside the store: where none can
  // be made, the file is read as it lies on disk.
  return dir_writable ? Database::Access::ReadOnly : Database::Access::Immutable;
}
}  // namespace

Expected<RunStore> RunStore::open(const std::string& path) {
  const Database::Access access = access_for(path);
  if (access != Database::Access::ReadWrite) {
    auto db = Database::open(path, access);
    if (!db.ok()) return db.error();
    RunStore store(std::move(db).value());
    store.read_only_ = true;
    LOOM_TRY(store.configure());
    LOOM_TRY(store.check_schema_for_reading());
    return store;
  }
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec)
      return make_error(ErrorCode::Io, "cannot create directory " + parent.string() + ": " + ec.message(),
                        "choose a writable location, e.g. with LOOM_DB=/path/runs.db");
  }
  auto db = Database::open(path);
  if (!db.ok()) return db.error();
  RunStore store(std::move(db).value());
  LOOM_TRY(store.configure());
  LOOM_TRY(store.migrate());
  store.remove_stale_reserves();
  return store;
}

// A run's space reserve (space_reserve.h) outlives it when its owner dies: whoever finds
// the run no longer running, on opening the store or when marking it interrupted, gives
// the megabyte back. A reserve of a run still running is its owner's and stays.
void RunStore::remove_stale_reserves() {
  const std::filesystem::path db_path(path());
  const std::string prefix = db_path.filename().string() + ".run-", suffix = ".reserve";
  std::error_code ec;
  const std::filesystem::path dir = db_path.has_parent_path() ? db_path.parent_path() : ".";
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string id_text = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (id_text.find_first_not_of("0123456789") != std::string::npos) continue;
    auto run = load_run(std::stoll(id_text));  // marks it interrupted when its owner is gone
    if (run.ok() && run->status == RunStatus::Running) continue;
    std::error_code removed;
    std::filesystem::remove(entry.path(), removed);
  }
}

Status RunStore::configure() {
  // busy_timeout first: switching to WAL needs a lock another process may hold.
  LOOM_TRY(db_.exec("PRAGMA busy_timeout = 5000"));
  if (read_only_) return configure_reading();
  // The first statement that reads the file: a text file fails here with SQLITE_NOTADB.
  // SQLite does not call the busy handler for this lock change (it could deadlock), so
  // when two connections open a new file at once (a launcher creating the store while a
  // viewer opens it) the loser retries here for as long as busy_timeout would have waited.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    auto mode = db_.prepare("PRAGMA journal_mode = WAL");
    if (!mode.ok()) return mode.error();
    auto row = mode->step();
    if (row.ok()) break;
    if (row.error().code != ErrorCode::Unavailable || std::chrono::steady_clock::now() > deadline) return row.error();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // NORMAL is durable across application crashes in WAL mode, and much faster than FULL.
  LOOM_TRY(db_.exec("PRAGMA synchronous = NORMAL"));
  return configure_reading();
}

// What reading needs, and all that a read-only store is given (no journal mode switch).
Status RunStore::configure_reading() {
  LOOM_TRY(db_.exec("PRAGMA cache_size = -65536"));  // 64 MiB: keeps the events index hot
  // Readers map the file instead of copying its pages into the cache: reading a
  // million-event run spent a third of its time allocating cache pages and in pread
  // (bench/results/compare_bench.md). SQLite falls back to reads where it cannot map.
  return db_.exec("PRAGMA mmap_size = 1073741824");
}

// A read-only store cannot be migrated: it is read only when it has this build's schema.
Status RunStore::check_schema_for_reading() {
  auto q = db_.prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version");
  if (!q.ok()) return q.error();
  auto row = q->step();
  if (!row.ok()) return row.error();
  const std::int64_t stored = q->column_int64(0);
  if (stored == kSchemaVersion) {
    schema_version_ = kSchemaVersion;
    return {};
  }
  const bool older = stored < kSchemaVersion;
  return make_error(ErrorCode::Unavailable,
                    "run database " + db_.path() + " cannot be written here and has schema version " +
                        std::to_string(stored) + "; this build of Loom reads version " + std::to_string(kSchemaVersion),
                    older ? "open it once where it can be written, which upgrades it, or copy it somewhere writable"
                          : "upgrade Loom");
}

Status RunStore::migrate() {
  LOOM_TRY(db_.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"));
  for (;;) {
    // Re-read inside the write lock: another process may have migrated meanwhile.
    auto tx = Transaction::begin(db_);
    if (!tx.ok()) return tx.error();
    auto q = db_.prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version");
    if (!q.ok()) return q.error();
    auto row = q->step();
    if (!row.ok()) return row.error();
    const std::int64_t stored = q->column_int64(0);
    q->reset();  // an active read blocks DROP TABLE (migration 4) with SQLITE_LOCKED
    if (stored > kSchemaVersion)
      return make_error(ErrorCode::Unavailable,
                        "run database " + db_.path() + " has schema version " + std::to_string(stored) +
                            ", newer than this build of Loom understands (" +
                            std::to_string(kSchemaVersion) + ")",
                        "upgrade Loom, or point LOOM_DB at another file");
    if (stored < 0)  // only a damaged or foreign file holds one; never index migrations by it
      return make_error(ErrorCode::Corrupt,
                        "run database " + db_.path() + " has schema version " + std::to_string(stored) +
                            ", which no Loom writes: the file is damaged or not Loom's",
                        "point LOOM_DB at another file, or restore this one from a backup");
    const int version = static_cast<int>(stored);
    schema_version_ = version;
    if (version == kSchemaVersion) return tx->commit();
    LOOM_TRY(db_.exec(std::string(kMigrations[version])));
    LOOM_TRY(db_.exec("DELETE FROM schema_version; INSERT INTO schema_version (version) VALUES (" +
                      std::to_string(version + 1) + ")"));
    LOOM_TRY(tx->commit());
  }
}

Status RunStore::require_run(std::int64_t run_id) {
  auto q = db_.prepare("SELECT 1 FROM runs WHERE id = ?");
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  auto row = q->step();
  if (!row.ok()) return row.error();
  if (!*row) return unknown_run(run_id, db_.path());
  return {};
}

Expected<std::int64_t> RunStore::create_run(const RunRecord& run) {
  auto q = db_.prepare(
      "INSERT INTO runs (name, plan_json, status, started_unix_ms, ended_unix_ms, wall_s, samples, "
      "world_size, host, version, error, log, owner_pid, heartbeat_unix_ms, resumed_from, kind) "
      "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  if (!q.ok()) return q.error();
  q->bind(1, run.name)
      .bind(2, run.plan_json)
      .bind(3, std::string(to_text(run.status)))
      .bind(4, run.started_unix_ms ? run.started_unix_ms : unix_ms_now())
      .bind(5, run.ended_unix_ms)
      .bind(6, run.wall_s)
      .bind(7, run.samples)
      .bind(8, run.world_size)
      .bind(9, run.host)
      .bind(10, run.version)
      .bind(11, run.error)
      .bind(12, run.log)
      .bind(13, run.owner_pid ? run.owner_pid : std::int64_t(::getpid()))
      .bind(14, unix_ms_now())
      .bind(15, run.resumed_from)
      .bind(16, run.kind);
  LOOM_TRY(run_once(*q));
  return db_.last_insert_rowid();
}

Status RunStore::upsert_rank(std::int64_t run_id, const RankRecord& rank) {
  LOOM_TRY(require_run(run_id));
  auto q = db_.prepare(
      "INSERT INTO ranks (run_id, rank, host, device, offset_ns, uncertainty_ns, t0_ns, events_recorded, "
      "offset_end_ns, sync_start_ns, sync_end_ns, pid, device_info) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
      "ON CONFLICT (run_id, rank) DO UPDATE SET host = excluded.host, "
      "device = excluded.device, offset_ns = excluded.offset_ns, uncertainty_ns = excluded.uncertainty_ns, "
      "t0_ns = excluded.t0_ns, events_recorded = excluded.events_recorded, "
      "offset_end_ns = excluded.offset_end_ns, sync_start_ns = excluded.sync_start_ns, "
      "sync_end_ns = excluded.sync_end_ns, pid = excluded.pid, device_info = excluded.device_info");
  if (!q.ok()) return q.error();
  q->bind(1, run_id)
      .bind(2, rank.rank)
      .bind(3, rank.host)
      .bind(4, rank.device)
      .bind(5, rank.offset_ns)
      .bind(6, rank.uncertainty_ns)
      .bind(7, rank.t0_ns)
      .bind(8, rank.events_recorded)
      .bind(9, rank.offset_end_ns)
      .bind(10, rank.sync_start_ns)
      .bind(11, rank.sync_end_ns)
      .bind(12, rank.pid)
      .bind(13, trace::device_info_to_text(rank.device_info));
  return run_once(*q);
}

Status RunStore::insert_event_rows(std::int64_t run_id, int rank, const trace::Event* events,
                                   std::size_t count) {
  if (!insert_event_batch_) {
    auto batch = db_.prepare(event_insert_sql(kEventBatchRows));
    if (!batch.ok()) return batch.error();
    auto one = db_.prepare(event_insert_sql(1));
    if (!one.ok()) return one.error();
    insert_event_batch_ = std::move(batch).value();
    insert_event_one_ = std::move(one).value();
  }
  std::size_t i = 0;
  for (; i + kEventBatchRows <= count; i += kEventBatchRows) {
    for (std::size_t r = 0; r < kEventBatchRows; ++r) bind_event(*insert_event_batch_, r, run_id, rank, events[i + r]);
    LOOM_TRY(run_once(*insert_event_batch_));
  }
  for (; i < count; ++i) {
    bind_event(*insert_event_one_, 0, run_id, rank, events[i]);
    LOOM_TRY(run_once(*insert_event_one_));
  }
  return {};
}

Status RunStore::append_events(std::int64_t run_id, int rank, const trace::Event* events, std::size_t count) {
  if (count == 0) return {};
  auto tx = Transaction::begin(db_);
  if (!tx.ok()) return tx.error();
  LOOM_TRY(require_run(run_id));  // inside the transaction: one lock round trip, not two
  LOOM_TRY(insert_event_rows(run_id, rank, events, count));
  // Events arriving after the run was packed (a rank flushing late) make its blocks stale.
  LOOM_TRY(drop_event_blocks(run_id));
  return tx->commit();
}

Status RunStore::drop_event_blocks(std::int64_t run_id) {
  auto q = db_.prepare("DELETE FROM event_blocks WHERE run_id = ?");
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  return run_once(*q);
}

Status RunStore::pack_events(std::int64_t run_id) {
  auto tx = Transaction::begin(db_);
  if (!tx.ok()) return tx.error();
  LOOM_TRY(write_event_blocks(run_id));
  return tx->commit();
}

Status RunStore::write_event_blocks(std::int64_t run_id) {
  LOOM_TRY(drop_event_blocks(run_id));
  auto ranks = event_ranks(run_id);
  if (!ranks.ok()) return ranks.error();
  auto insert = db_.prepare("INSERT INTO event_blocks (run_id, rank, block, format, events, data) VALUES (?,?,?,?,?,?)");
  if (!insert.ok()) return insert.error();
  for (int rank : *ranks) {
    auto events = load_event_rows(run_id, rank);
    if (!events.ok()) return events.error();
    for (std::size_t first = 0, block = 0; first < events->size(); first += kEventsPerBlock, ++block) {
      const std::size_t n = std::min(kEventsPerBlock, events->size() - first);
      insert->bind(1, run_id).bind(2, rank).bind(3, static_cast<std::int64_t>(block)).bind(4, kEventBlockFormat);
      insert->bind(5, static_cast<std::int64_t>(n));
      insert->bind_blob_static(6, std::as_bytes(std::span(events->data() + first, n)));
      LOOM_TRY(run_once(*insert));
    }
  }
  return {};
}

Status RunStore::append_metrics(std::int64_t run_id, const std::vector<MetricRecord>& metrics) {
  if (metrics.empty()) return {};
  auto tx = Transaction::begin(db_);
  if (!tx.ok()) return tx.error();
  LOOM_TRY(require_run(run_id));
  auto q = db_.prepare("INSERT INTO metrics (run_id, rank, step, t_ns, name, value) VALUES (?,?,?,?,?,?)");
  if (!q.ok()) return q.error();
  for (const auto& m : metrics) {
    q->bind(1, run_id).bind(2, m.rank).bind(3, m.step).bind(4, m.t_ns).bind(5, m.name).bind_number(6, m.value);
    LOOM_TRY(run_once(*q));
  }
  return tx->commit();
}

Status RunStore::append_updates(std::int64_t run_id, const std::vector<UpdateRecord>& updates) {
  if (updates.empty()) return {};
  auto tx = Transaction::begin(db_);
  if (!tx.ok()) return tx.error();
  LOOM_TRY(require_run(run_id));
  auto q = db_.prepare(
      "INSERT INTO updates (run_id, worker, server, step, version_read, version_applied, staleness, t_ns) "
      "VALUES (?,?,?,?,?,?,?,?)");
  if (!q.ok()) return q.error();
  for (const auto& u : updates) {
    q->bind(1, run_id).bind(2, u.worker).bind(3, u.server).bind(4, u.step).bind(5, u.version_read);
    q->bind(6, u.version_applied).bind(7, u.staleness).bind(8, u.t_ns);
    LOOM_TRY(run_once(*q));
  }
  return tx->commit();
}

Status RunStore::append_log(std::int64_t run_id, const std::string& text) {
  auto q = db_.prepare("UPDATE runs SET log = log || ? WHERE id = ?");
  if (!q.ok()) return q.error();
  q->bind(1, text).bind(2, run_id);
  LOOM_TRY(run_once(*q));
  if (db_.changes() == 0) return unknown_run(run_id, db_.path());
  return {};
}

Status RunStore::finish_run(std::int64_t run_id, RunStatus status, double wall_s, std::int64_t samples,
                            const std::string& error) {
  auto q = db_.prepare(
      "UPDATE runs SET status = ?, ended_unix_ms = ?, wall_s = ?, samples = ?, error = ? WHERE id = ?");
  if (!q.ok()) return q.error();
  q->bind(1, std::string(to_text(status))).bind(2, unix_ms_now()).bind(3, wall_s).bind(4, samples).bind(5, error).bind(6, run_id);
  LOOM_TRY(run_once(*q));
  if (db_.changes() == 0) return unknown_run(run_id, db_.path());
  // Only a speed-up for readers: the status is stored, and without blocks (a full disk)
  // readers decode the rows as before.
  (void)pack_events(run_id);
  return {};
}

namespace {
constexpr std::string_view kRunColumns =
    "id, name, plan_json, status, started_unix_ms, ended_unix_ms, wall_s, samples, world_size, host, "
    "version, error, train_s, train_samples, owner_pid, heartbeat_unix_ms, resumed_from, kind";
constexpr int kRunColumnCount = 18;

RunRecord read_run(const Statement& q) {
  RunRecord r;
  r.id = q.column_int64(0);
  r.name = q.column_text(1);
  r.plan_json = q.column_text(2);
  r.started_unix_ms = q.column_int64(4);
  r.ended_unix_ms = q.column_int64(5);
  r.wall_s = q.column_double(6);
  r.samples = q.column_int64(7);
  r.world_size = static_cast<int>(q.column_int64(8));
  r.host = q.column_text(9);
  r.version = q.column_text(10);
  r.error = q.column_text(11);
  r.status = status_from_column(q.column_text(3), r.error);
  r.train_s = q.column_double(12);
  r.train_samples = q.column_int64(13);
  r.owner_pid = q.column_int64(14);
  r.heartbeat_unix_ms = q.column_int64(15);
  r.resumed_from = q.column_int64(16);
  r.kind = q.column_text(17);
  return r;
}

trace::Event read_event(const Statement& q) {
  trace::Event e;
  e.start_ns = q.column_int64(0);
  e.end_ns = q.column_int64(1);
  e.kind = static_cast<trace::EventKind>(q.column_int64(2));
  e.stream = static_cast<trace::Stream>(q.column_int64(3));
  e.step = static_cast<std::int32_t>(q.column_int64(4));
  e.layer = static_cast<std::int32_t>(q.column_int64(5));
  e.peer = static_cast<std::int32_t>(q.column_int64(6));
  e.message = static_cast<std::int32_t>(q.column_int64(7));
  e.microbatch = static_cast<std::int16_t>(q.column_int64(8));
  e.bytes = q.column_int64(9);
  e.descheduled_us = static_cast<std::int32_t>(q.column_int64(10));
  return e;
}
UpdateRecord read_update(const Statement& row) {
  UpdateRecord u;
  u.worker = static_cast<int>(row.column_int64(0));
  u.server = static_cast<int>(row.column_int64(1));
  u.step = row.column_int64(2);
  u.version_read = row.column_int64(3);
  u.version_applied = row.column_int64(4);
  u.staleness = row.column_int64(5);
  u.t_ns = row.column_int64(6);
  return u;
}

MetricRecord read_metric(const Statement& row) {
  MetricRecord m;
  m.rank = static_cast<int>(row.column_int64(0));
  m.step = row.column_int64(1);
  m.t_ns = row.column_int64(2);
  m.name = row.column_text(3);
  m.value = row.column_double(4);
  return m;
}

// Steps `q` to its last row, calling on_row for each.
template <class OnRow>
Status each_row(Statement& q, OnRow on_row) {
  for (;;) {
    auto row = q.step();
    if (!row.ok()) return row.error();
    if (!*row) return {};
    on_row(q);
  }
}

// Steps `q` to its last row, turning each row into a T with `read`.
template <class T, class Read>
Expected<std::vector<T>> collect_rows(Statement& q, Read read, std::size_t expected_rows = 0) {
  std::vector<T> rows;
  rows.reserve(expected_rows);
  LOOM_TRY(each_row(q, [&rows, &read](const Statement& row) { rows.push_back(read(row)); }));
  return rows;
}

// One page of the rows appended after `after_seq`, for views following a live run: `sql`
// takes (run_id, after_seq, limit) and selects the rowid last, in column `seq_column`;
// `take` adds one row to the batch.
template <class Batch, class Take>
Expected<Batch> page_after(Database& db, const char* sql, int seq_column, std::int64_t run_id,
                           std::int64_t after_seq, std::size_t limit, Take take) {
  auto q = db.prepare(sql);
  if (!q.ok()) return q.error();
  q->bind(1, run_id).bind(2, after_seq).bind(3, static_cast<std::int64_t>(limit));
  Batch batch;
  batch.last_seq = after_seq;
  LOOM_TRY(each_row(*q, [&](const Statement& row) {
    take(batch, row);
    batch.last_seq = row.column_int64(seq_column);
  }));
  return batch;
}
}  // namespace

Expected<std::vector<RunRecord>> RunStore::list_runs() {
  auto q = db_.prepare("SELECT " + std::string(kRunColumns) +
                       " FROM runs ORDER BY started_unix_ms DESC, id DESC");
  if (!q.ok()) return q.error();
  auto runs = collect_rows<RunRecord>(*q, read_run);
  if (runs.ok())
    for (RunRecord& r : *runs) interrupt_if_orphaned(r);
  return runs;
}

Expected<RunRecord> RunStore::load_run(std::int64_t run_id) {
  auto q = db_.prepare("SELECT " + std::string(kRunColumns) + ", log FROM runs WHERE id = ?");
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  auto row = q->step();
  if (!row.ok()) return row.error();
  if (!*row) return unknown_run(run_id, db_.path());
  RunRecord r = read_run(*q);
  r.log = q->column_text(kRunColumnCount);  // after kRunColumns
  q->reset();
  interrupt_if_orphaned(r);
  return r;
}

Expected<std::vector<RankRecord>> RunStore::load_ranks(std::int64_t run_id) {
  auto q = db_.prepare(
      "SELECT rank, host, device, offset_ns, uncertainty_ns, t0_ns, events_recorded, offset_end_ns, "
      "sync_start_ns, sync_end_ns, pid, device_info FROM ranks WHERE run_id = ? ORDER BY rank");
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  return collect_rows<RankRecord>(*q, [](const Statement& row) {
    RankRecord r;
    r.rank = static_cast<int>(row.column_int64(0));
    r.host = row.column_text(1);
    r.device = row.column_text(2);
    r.offset_ns = row.column_int64(3);
    r.uncertainty_ns = row.column_int64(4);
    r.t0_ns = row.column_int64(5);
    r.events_recorded = row.column_int64(6);
    r.offset_end_ns = row.column_int64(7);
    r.sync_start_ns = row.column_int64(8);
    r.sync_end_ns = row.column_int64(9);
    r.pid = static_cast<int>(row.column_int64(10));
    r.device_info = trace::device_info_from_text(row.column_text(11));
    return r;
  });
}

Expected<std::vector<trace::Event>> RunStore::load_events(std::int64_t run_id, int rank) {
  auto packed = load_event_blocks(run_id, rank);
  if (!packed.ok()) return packed.error();
  if (*packed) return std::move(**packed);
  return load_event_rows(run_id, rank);
}

Expected<std::optional<std::vector<trace::Event>>> RunStore::load_event_blocks(std::int64_t run_id, int rank) {
  const std::string where = std::string(" WHERE run_id = ?1") + (rank < 0 ? "" : " AND rank = ?2");
  auto total = db_.prepare("SELECT COUNT(*), COALESCE(SUM(events), 0), COALESCE(MIN(format = " +
                           std::to_string(kEventBlockFormat) + "), 0), COALESCE(SUM(length(data)), 0) FROM event_blocks" +
                           where);
  if (!total.ok()) return total.error();
  total->bind(1, run_id);
  if (rank >= 0) total->bind(2, rank);
  if (auto row = total->step(); !row.ok()) return row.error();
  const std::int64_t declared = total->column_int64(1), bytes = total->column_int64(3);
  // The count is sized from the bytes really there, so a damaged count cannot ask for more.
  const bool usable = total->column_int64(0) > 0 && total->column_int64(2) == 1 && declared >= 0 &&
                      bytes == declared * std::int64_t(sizeof(trace::Event));
  const auto count = static_cast<std::size_t>(declared);
  total->reset();
  if (!usable) return std::optional<std::vector<trace::Event>>();
  auto q = db_.prepare("SELECT events, data FROM event_blocks" + where + " ORDER BY rank, block");
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  if (rank >= 0) q->bind(2, rank);
  std::vector<trace::Event> events(count);
  std::size_t filled = 0;
  bool intact = true;
  LOOM_TRY(each_row(*q, [&](const Statement& row) {
    const std::span<const std::byte> data = row.column_blob(1);
    const auto n = static_cast<std::size_t>(row.column_int64(0));
    intact = intact && data.size() == n * sizeof(trace::Event) && filled + n <= count;
    if (intact) std::memcpy(static_cast<void*>(events.data() + filled), data.data(), data.size());
    filled += n;
  }));
  if (!intact || filled != count) return std::optional<std::vector<trace::Event>>();  // damaged: read the rows
  return std::optional(std::move(events));
}

Expected<std::optional<RunStore::PackedRun>> RunStore::load_packed_run(std::int64_t run_id) {
  auto ranks = event_ranks(run_id);
  if (!ranks.ok()) return ranks.error();
  PackedRun packed;
  for (int rank : *ranks) {
    auto events = load_event_blocks(run_id, rank);
    if (!events.ok()) return events.error();
    if (!*events) return std::optional<PackedRun>();  // a rank unpacked or damaged: use the rows
    packed.ranks.emplace_back(rank, std::move(**events));
  }
  if (packed.ranks.empty()) return std::optional<PackedRun>();
  return std::optional(std::move(packed));
}

Expected<std::vector<trace::Event>> RunStore::load_event_rows(std::int64_t run_id, int rank) {
  // rowid breaks ties in insertion order; it is the index's implicit last column, so the
  // ORDER BY is satisfied by the index without a sort.
  // Two texts rather than "(?2 < 0 OR rank = ?2)", which would keep the planner from
  // using the rank column of the index.
  auto q = db_.prepare(std::string(
                           "SELECT start_ns, end_ns, kind, stream, step, layer, peer, message, microbatch, "
                           "bytes, descheduled_us FROM events WHERE run_id = ?1") +
                       (rank < 0 ? "" : " AND rank = ?2") + " ORDER BY rank, start_ns, rowid");
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  if (rank >= 0) q->bind(2, rank);
  auto n = count_events(run_id, rank);
  if (!n.ok()) return n.error();
  return collect_rows<trace::Event>(*q, read_event, static_cast<std::size_t>(*n));
}

Expected<std::vector<trace::Event>> RunStore::load_events_of_kind(std::int64_t run_id, int rank,
                                                                 trace::EventKind kind) {
  auto packed = load_event_blocks(run_id, rank);
  if (!packed.ok()) return packed.error();
  if (*packed) {
    std::vector<trace::Event>& all = **packed;
    std::erase_if(all, [kind](const trace::Event& e) { return e.kind != kind; });
    return std::move(all);
  }
  auto q = db_.prepare(
      "SELECT start_ns, end_ns, kind, stream, step, layer, peer, message, microbatch, bytes, descheduled_us "
      "FROM events WHERE run_id = ?1 AND rank = ?2 AND kind = ?3 ORDER BY start_ns, rowid");
  if (!q.ok()) return q.error();
  q->bind(1, run_id).bind(2, rank).bind(3, static_cast<int>(kind));
  return collect_rows<trace::Event>(*q, read_event);
}

Status RunStore::set_training_figures(std::int64_t run_id, double train_s, std::int64_t train_samples) {
  auto q = db_.prepare("UPDATE runs SET train_s = ?, train_samples = ? WHERE id = ?");
  if (!q.ok()) return q.error();
  q->bind(1, train_s).bind(2, train_samples).bind(3, run_id);
  auto r = q->step();
  if (!r.ok()) return r.error();
  if (db_.changes() == 0) return unknown_run(run_id, db_.path());
  return {};
}

Expected<std::vector<int>> RunStore::event_ranks(std::int64_t run_id) {
  // A skip scan: one index probe per rank, where DISTINCT would read every event's entry.
  auto q = db_.prepare(
      "WITH RECURSIVE r(rank) AS (SELECT MIN(rank) FROM events WHERE run_id = ?1 UNION ALL "
      "SELECT (SELECT MIN(rank) FROM events WHERE run_id = ?1 AND rank > r.rank) FROM r WHERE r.rank IS NOT NULL) "
      "SELECT rank FROM r WHERE rank IS NOT NULL");
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  return collect_rows<int>(*q, [](const Statement& row) { return static_cast<int>(row.column_int64(0)); });
}

Expected<std::int64_t> RunStore::count_events(std::int64_t run_id, int rank) {
  auto q = db_.prepare(std::string("SELECT COUNT(*) FROM events WHERE run_id = ?1") +
                       (rank < 0 ? "" : " AND rank = ?2"));
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  if (rank >= 0) q->bind(2, rank);
  auto row = q->step();
  if (!row.ok()) return row.error();
  return q->column_int64(0);
}

Expected<std::vector<MetricRecord>> RunStore::load_metrics(std::int64_t run_id, const std::string& name) {
  auto q = db_.prepare(
      "SELECT rank, step, t_ns, name, value FROM metrics WHERE run_id = ?1 AND (?2 = '' OR name = ?2) "
      "ORDER BY step, t_ns, rowid");
  if (!q.ok()) return q.error();
  q->bind(1, run_id).bind(2, std::string_view(name));
  return collect_rows<MetricRecord>(*q, read_metric);
}

Expected<std::vector<UpdateRecord>> RunStore::load_updates(std::int64_t run_id) {
  auto q = db_.prepare(
      "SELECT worker, server, step, version_read, version_applied, staleness, t_ns FROM updates "
      "WHERE +run_id = ?1 ORDER BY rowid");
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  return collect_rows<UpdateRecord>(*q, read_update);
}

Expected<UpdateBatch> RunStore::load_updates_after(std::int64_t run_id, std::int64_t after_seq, std::size_t limit) {
  return page_after<UpdateBatch>(
      db_,
      "SELECT worker, server, step, version_read, version_applied, staleness, t_ns, rowid FROM updates "
      "WHERE +run_id = ?1 AND rowid > ?2 ORDER BY rowid LIMIT ?3",
      7, run_id, after_seq, limit, [](UpdateBatch& b, const Statement& row) { b.updates.push_back(read_update(row)); });
}

Expected<EventBatch> RunStore::load_events_after(std::int64_t run_id, std::int64_t after_seq, std::size_t limit) {
  // Columns 0-10 as read_event expects, then rank and rowid. "+run_id" keeps the planner
  // off the (run_id, rank, start_ns) index, which would mean sorting every row of the run
  // by rowid for each page; a rowid range scan reads just the page.
  return page_after<EventBatch>(
      db_,
      "SELECT start_ns, end_ns, kind, stream, step, layer, peer, message, microbatch, bytes, descheduled_us, rank, "
      "rowid FROM events WHERE +run_id = ?1 AND rowid > ?2 ORDER BY rowid LIMIT ?3",
      12, run_id, after_seq, limit, [](EventBatch& b, const Statement& row) {
        b.events.push_back(read_event(row));
        b.ranks.push_back(static_cast<int>(row.column_int64(11)));
      });
}

Expected<MetricBatch> RunStore::load_metrics_after(std::int64_t run_id, std::int64_t after_seq, std::size_t limit) {
  return page_after<MetricBatch>(
      db_,
      "SELECT rank, step, t_ns, name, value, rowid FROM metrics WHERE +run_id = ?1 AND rowid > ?2 "
      "ORDER BY rowid LIMIT ?3",
      5, run_id, after_seq, limit, [](MetricBatch& b, const Statement& row) { b.metrics.push_back(read_metric(row)); });
}

Expected<RunState> RunStore::load_run_state(std::int64_t run_id, std::size_t log_from) {
  // The log as a blob so that substr counts bytes, matching std::string offsets.
  auto q = db_.prepare(
      "SELECT status, error, substr(CAST(log AS BLOB), ?2 + 1), host, owner_pid, heartbeat_unix_ms, "
      "started_unix_ms FROM runs WHERE id = ?1");
  if (!q.ok()) return q.error();
  q->bind(1, run_id).bind(2, static_cast<std::int64_t>(log_from));
  auto row = q->step();
  if (!row.ok()) return row.error();
  if (!*row) return unknown_run(run_id, db_.path());
  RunState state;
  state.error = q->column_text(1);
  state.status = status_from_column(q->column_text(0), state.error);
  state.log_tail = q->column_text(2);
  if (state.status != RunStatus::Running) return state;
  // A follower polls this: it must see a run whose owner died end, as a list does.
  RunRecord owner;
  owner.id = run_id;
  owner.status = state.status;
  owner.host = q->column_text(3);
  owner.owner_pid = q->column_int64(4);
  owner.heartbeat_unix_ms = q->column_int64(5);
  owner.started_unix_ms = q->column_int64(6);
  q->reset();
  interrupt_if_orphaned(owner);
  state.status = owner.status;
  state.error = owner.error;
  return state;
}

Status RunStore::heartbeat(std::int64_t run_id) {
  auto q = db_.prepare("UPDATE runs SET heartbeat_unix_ms = ? WHERE id = ? AND status = 'running'");
  if (!q.ok()) return q.error();
  q->bind(1, unix_ms_now()).bind(2, run_id);
  return run_once(*q);
}

std::string orphan_reason(const RunRecord& run, bool owner_on_this_host, bool owner_alive, std::int64_t now_ms) {
  if (run.status != RunStatus::Running) return {};
  if (run.owner_pid <= 0) return "it was started by a Loom that did not record its owner, and is not running";
  const std::string owner = "its owner (process " + std::to_string(run.owner_pid) + " on " + run.host + ")";
  if (owner_on_this_host && !owner_alive) return owner + " ended without finishing it";
  const std::int64_t silent_ms = now_ms - std::max(run.heartbeat_unix_ms, run.started_unix_ms);
  if (silent_ms > kOwnerSilentMs) return owner + " has not reported for " + std::to_string(silent_ms / 1000) + " s";
  return {};
}

// Marks `run` interrupted (in place, and in the store where it can) when its owner is
// gone. Where the write fails (a read-only file, a full disk) the reader still sees the
// truth, and the next reader tries to store it again.
void RunStore::interrupt_if_orphaned(RunRecord& run) {
  if (run.status != RunStatus::Running) return;
  const bool here = run.host == this_host_name();
  const std::string reason = orphan_reason(run, here, here && process_alive(run.owner_pid), unix_ms_now());
  if (reason.empty()) return;
  const std::int64_t last_seen = std::max(run.heartbeat_unix_ms, run.started_unix_ms);
  const double wall_s = double(std::max<std::int64_t>(0, last_seen - run.started_unix_ms)) / 1000.0;
  const std::string error = "interrupted: " + reason + "; what it recorded until then is kept";
  auto q = db_.prepare(
      "UPDATE runs SET status = 'interrupted', error = ?, ended_unix_ms = ?, wall_s = ? "
      "WHERE id = ? AND status = 'running'");
  if (q.ok()) {
    q->bind(1, error).bind(2, last_seen).bind(3, wall_s).bind(4, run.id);
    const bool stored = run_once(*q).ok();
    if (stored && db_.changes() == 0) return;  // its owner finished it meanwhile
  }
  run.status = RunStatus::Interrupted;
  run.error = error;
  run.ended_unix_ms = last_seen;
  run.wall_s = wall_s;
  std::error_code ec;
  std::filesystem::remove(space_reserve_path(path(), run.id), ec);  // its owner cannot any more
}

Expected<std::int64_t> RunStore::import_run(const RunRecord& run, const std::vector<RankRecord>& ranks,
                                            const std::vector<std::pair<int, std::vector<trace::Event>>>& events,
                                            const std::vector<MetricRecord>& metrics) {
  if (run.status == RunStatus::Running)
    return make_error(ErrorCode::InvalidArgument, "an imported run must be finished, not running");
  auto tx = Transaction::begin(db_);
  if (!tx.ok()) return tx.error();
  RunRecord record = run;
  if (!record.started_unix_ms) record.started_unix_ms = unix_ms_now();
  if (!record.ended_unix_ms) record.ended_unix_ms = record.started_unix_ms + std::int64_t(record.wall_s * 1000.0);
  auto id = create_run(record);  // the writes below join this transaction: no nested BEGIN
  if (!id.ok()) return id.error();
  for (const RankRecord& r : ranks) LOOM_TRY(upsert_rank(*id, r));
  for (const auto& [rank, list] : events) LOOM_TRY(insert_event_rows(*id, rank, list.data(), list.size()));
  LOOM_TRY(write_event_blocks(*id));
  if (!metrics.empty()) {
    auto q = db_.prepare("INSERT INTO metrics (run_id, rank, step, t_ns, name, value) VALUES (?,?,?,?,?,?)");
    if (!q.ok()) return q.error();
    for (const auto& m : metrics) {
      q->bind(1, *id).bind(2, m.rank).bind(3, m.step).bind(4, m.t_ns).bind(5, m.name).bind_number(6, m.value);
      LOOM_TRY(run_once(*q));
    }
  }
  LOOM_TRY(tx->commit());
  return *id;
}

namespace {

Status check_tag(const std::string& tag) {
  const bool bad_char = std::any_of(tag.begin(), tag.end(), [](char c) { return c == ',' || (c >= 0 && c < 32); });
  if (tag.empty() || tag.size() > 64 || bad_char) {
    return make_error(ErrorCode::InvalidArgument, "tag '" + tag + "' is not allowed",
                      "a tag is 1 to 64 characters, without commas or control characters");
  }
  return {};
}

}  // namespace

Status RunStore::rename_run(std::int64_t run_id, const std::string& name) {
  LOOM_TRY(require_run(run_id));
  auto q = db_.prepare("UPDATE runs SET name = ? WHERE id = ?");
  if (!q.ok()) return q.error();
  q->bind(1, name).bind(2, run_id);
  return run_once(*q);
}

Status RunStore::set_tags(std::int64_t run_id, const std::vector<std::string>& tags) {
  for (const std::string& t : tags) LOOM_TRY(check_tag(t));
  LOOM_TRY(require_run(run_id));
  auto tx = Transaction::begin(db_);
  if (!tx.ok()) return tx.error();
  auto clear = db_.prepare("DELETE FROM run_tags WHERE run_id = ?");
  if (!clear.ok()) return clear.error();
  clear->bind(1, run_id);
  LOOM_TRY(run_once(*clear));
  auto add = db_.prepare("INSERT OR IGNORE INTO run_tags (run_id, tag) VALUES (?, ?)");
  if (!add.ok()) return add.error();
  for (const std::string& t : tags) {
    add->bind(1, run_id).bind(2, t);
    LOOM_TRY(run_once(*add));
  }
  return tx->commit();
}

Expected<std::vector<std::string>> RunStore::load_tags(std::int64_t run_id) {
  auto q = db_.prepare("SELECT tag FROM run_tags WHERE run_id = ? ORDER BY tag");
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  return collect_rows<std::string>(*q, [](const Statement& row) { return row.column_text(0); });
}

Expected<std::map<std::int64_t, std::vector<std::string>>> RunStore::load_all_tags() {
  auto q = db_.prepare("SELECT run_id, tag FROM run_tags ORDER BY run_id, tag");
  if (!q.ok()) return q.error();
  auto rows = collect_rows<std::pair<std::int64_t, std::string>>(
      *q, [](const Statement& row) { return std::pair{row.column_int64(0), row.column_text(1)}; });
  if (!rows.ok()) return rows.error();
  std::map<std::int64_t, std::vector<std::string>> tags;
  for (auto& [id, tag] : *rows) tags[id].push_back(std::move(tag));
  return tags;
}

Expected<std::map<std::int64_t, std::vector<std::pair<int, trace::DeviceInfo>>>> RunStore::load_all_devices() {
  auto q = db_.prepare("SELECT run_id, rank, device_info FROM ranks WHERE device_info != '' ORDER BY run_id, rank");
  if (!q.ok()) return q.error();
  using Row = std::tuple<std::int64_t, int, trace::DeviceInfo>;
  auto rows = collect_rows<Row>(*q, [](const Statement& row) {
    return Row{row.column_int64(0), int(row.column_int64(1)), trace::device_info_from_text(row.column_text(2))};
  });
  if (!rows.ok()) return rows.error();
  std::map<std::int64_t, std::vector<std::pair<int, trace::DeviceInfo>>> devices;
  for (auto& [id, rank, info] : *rows)
    if (info.recorded()) devices[id].emplace_back(rank, std::move(info));
  return devices;
}

// Two scans of the metrics index, whatever the number of runs.
Expected<std::map<std::int64_t, RunStore::ListedProgress>> RunStore::load_listed_progress() {
  std::map<std::int64_t, ListedProgress> progress;
  // Steps as show counts them (analysis summary.cpp steps_recorded): the distinct steps with a loss.
  // A resumed run starts past 0, so its highest step is not its count.
  auto steps = db_.prepare("SELECT run_id, COUNT(DISTINCT step) FROM metrics WHERE name = 'loss' GROUP BY run_id");
  if (!steps.ok()) return steps.error();
  auto step_rows = collect_rows<std::pair<std::int64_t, std::int64_t>>(
      *steps, [](const Statement& row) { return std::pair{row.column_int64(0), row.column_int64(1)}; });
  if (!step_rows.ok()) return step_rows.error();
  for (const auto& [id, count] : *step_rows) progress[id].steps = count;
  // The row load_metrics would list last (by step, then time); evaluations are few.
  auto accuracy = db_.prepare(
      "SELECT m.run_id, m.value FROM metrics m WHERE m.name = 'test_accuracy' AND m.rowid = "
      "(SELECT rowid FROM metrics WHERE run_id = m.run_id AND name = 'test_accuracy' "
      "ORDER BY step DESC, t_ns DESC, rowid DESC LIMIT 1)");
  if (!accuracy.ok()) return accuracy.error();
  auto accuracy_rows = collect_rows<std::pair<std::int64_t, double>>(
      *accuracy, [](const Statement& row) { return std::pair{row.column_int64(0), row.column_double(1)}; });
  if (!accuracy_rows.ok()) return accuracy_rows.error();
  for (const auto& [id, value] : *accuracy_rows) progress[id].test_accuracy = value;
  return progress;
}

Status RunStore::delete_run(std::int64_t run_id) {
  auto run = load_run(run_id);
  if (!run.ok()) return run.error();
  if (run->status == RunStatus::Running) {
    return make_error(ErrorCode::InvalidArgument, "run " + std::to_string(run_id) + " is still running",
                      "stop it first; a run is deleted only once it has ended");
  }
  auto tx = Transaction::begin(db_);
  if (!tx.ok()) return tx.error();
  for (const char* table : {"events", "event_blocks", "metrics", "updates", "ranks", "run_tags"}) {
    auto q = db_.prepare(std::string("DELETE FROM ") + table + " WHERE run_id = ?");
    if (!q.ok()) return q.error();
    q->bind(1, run_id);
    LOOM_TRY(run_once(*q));
  }
  auto q = db_.prepare("DELETE FROM runs WHERE id = ?");
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  LOOM_TRY(run_once(*q));
  LOOM_TRY(tx->commit());
  // Its checkpoints are of no use without the run (resume needs both): they go too. The
  // run is gone either way, so a folder that stays is said, naming it, not rolled back.
  const std::string checkpoints = checkpoint_dir(path(), run_id);
  std::error_code ec;
  std::filesystem::remove_all(checkpoints, ec);
  if (ec)
    return make_error(ErrorCode::Io, "run " + std::to_string(run_id) + " is deleted, but its checkpoint folder " +
                                         checkpoints + " could not be removed: " + ec.message(),
                      "remove that folder by hand");
  return {};
}

}  // namespace loom::store
