// What writes a run store: new runs and ranks, events (many rows per statement execution
// inside one transaction per batch: per-row statement overhead, not disk, limits
// ingest), metrics, updates, the log, finishing, the run browser's edits, deleting, and
// importing a whole finished run in one transaction.
#include "loom/store/run_store.h"
#include "loom/trace/machine.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "store_rows.h"

namespace loom::store {

namespace {
constexpr int kEventColumns = 13;
// Rows per multi-row INSERT: 64 * 13 = 832 parameters, well under SQLite's limit.
constexpr std::size_t kEventBatchRows = 64;

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

Status check_tag(const std::string& tag) {
  const bool bad_char = std::any_of(tag.begin(), tag.end(), [](char c) { return c == ',' || (c >= 0 && c < 32); });
  if (tag.empty() || tag.size() > 64 || bad_char) {
    return make_error(ErrorCode::InvalidArgument, "tag '" + tag + "' is not allowed",
                      "a tag is 1 to 64 characters, without commas or control characters");
  }
  return {};
}
}  // namespace

RunRecord new_run_record(const Plan& plan, const std::string& version) {
  RunRecord run;
  run.name = plan.name;
  run.plan_json = plan_to_json(plan);
  run.status = RunStatus::Running;
  run.world_size = world_size(plan);
  run.host = machine::host_name();
  run.version = version;
  return run;
}

std::string checkpoint_dir(const std::string& db_path, std::int64_t run_id) {
  return db_path + ".checkpoints/run-" + std::to_string(run_id);
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

Status RunStore::set_training_figures(std::int64_t run_id, double train_s, std::int64_t train_samples) {
  auto q = db_.prepare("UPDATE runs SET train_s = ?, train_samples = ? WHERE id = ?");
  if (!q.ok()) return q.error();
  q->bind(1, train_s).bind(2, train_samples).bind(3, run_id);
  auto r = q->step();
  if (!r.ok()) return r.error();
  if (db_.changes() == 0) return unknown_run(run_id, db_.path());
  return {};
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
