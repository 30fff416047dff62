// The RunStore's queries: runs, ranks, events (from their blocks where a run has usable
// ones, else the rows), metrics, updates, pages of what a live run appended, tags,
// devices and list progress. Opening and the schema are run_store_schema.cpp; writes
// run_store_writes.cpp; event blocks event_blocks.cpp; owners' liveness run_liveness.cpp.
#include "loom/store/run_store.h"

#include <string_view>
#include <tuple>

#include "store_rows.h"

namespace loom::store {

namespace {
// A status column's text as a RunStatus. Text no Loom writes (a damaged file) reads as
// failed, with the text in the error, so lists show it rather than refuse the whole store.
RunStatus status_from_column(const std::string& text, std::string& error) {
  if (auto status = trace::run_status_from(text)) return *status;
  error = "the store holds an unknown status '" + text.substr(0, 32) + "'" + (error.empty() ? "" : "; " + error);
  return RunStatus::Failed;
}

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

RunStore::~RunStore() = default;

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

}  // namespace loom::store
