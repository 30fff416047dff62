// Opening a run store and its schema. Schema changes are an ordered list of migrations,
// each applied in its own transaction with the version bump, so a crash mid-migration
// leaves the old version intact; a file written by a newer Loom is refused.
#include "loom/store/run_store.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <thread>

#include "store_rows.h"

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

}  // namespace loom::store
