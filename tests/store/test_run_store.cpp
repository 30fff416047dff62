// Run store tests: a full round trip through a closed and reopened file, the error cases
// a user meets (not a database, unknown run, a file from a newer Loom), a file written by
// a schema-v1 Loom that must open and migrate, and a second connection reading while the
// first writes (WAL). The RunWriter (trace) ships a server's updates through the StoreSink
// while training goes on.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QtTest>

#include <cmath>
#include <filesystem>
#include <limits>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "loom/store/run_store.h"
#include "loom/store/space_reserve.h"
#include "loom/store/store_sink.h"
#include "loom/test/temp_store.h"
#include "loom/trace/machine.h"
#include "loom/trace/recorder.h"
#include "loom/trace/run_writer.h"

using loom::ErrorCode;
using loom::trace::MetricRecord;
using loom::trace::RankRecord;
using loom::trace::RunRecord;
using loom::store::RunStore;
using loom::trace::UpdateRecord;
using loom::trace::RunStatus;
using loom::store::Database;
namespace trace = loom::trace;
using loom::trace::Event;
using loom::testing::must;
using loom::testing::must_ok;
using loom::testing::TempStore;

namespace {
// Varied, extreme field values so a truncating column or a swapped bind shows up.
std::vector<Event> make_events(int rank, std::size_t n) {
  std::vector<Event> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    Event& e = v[i];
    auto k = static_cast<std::int64_t>(i);
    e.start_ns = 1'700'000'000'000'000'000LL + k * 1000 + rank;
    e.end_ns = e.start_ns + 500 + (k % 13);
    e.bytes = (k % 5 == 0) ? (1LL << 40) + k : 0;
    e.step = static_cast<std::int32_t>(k / 100);
    e.layer = static_cast<std::int32_t>(k % 9) - 1;
    e.peer = (k % 3 == 0) ? -1 : 2147483647 - rank;
    e.message = static_cast<std::int32_t>(-k);
    e.microbatch = static_cast<std::int16_t>((k % 40) - 8);
    e.kind = static_cast<loom::trace::EventKind>(k % loom::trace::kEventKindCount);
    e.stream = static_cast<loom::trace::Stream>(k % loom::trace::kStreamCount);
  }
  return v;
}

// Distinct extreme values in every field, so a dropped column or a swapped bind shows up.
std::vector<UpdateRecord> make_updates(int n) {
  std::vector<UpdateRecord> v;
  for (int i = 0; i < n; ++i)
    v.push_back({i % 4, 2147483647 - i, (1LL << 40) + i, -(1LL << 45) - i, (1LL << 50) + 3 * i, 7LL * i + 1,
                 1'700'000'000'000'000'000LL + i});
  return v;
}

bool same_update(const UpdateRecord& a, const UpdateRecord& b) {
  return a.worker == b.worker && a.server == b.server && a.step == b.step && a.version_read == b.version_read &&
         a.version_applied == b.version_applied && a.staleness == b.staleness && a.t_ns == b.t_ns;
}

}  // namespace

class TestRunStore : public QObject {
  Q_OBJECT
 private slots:
  void roundTripThroughReopen();
  void listRunsNewestFirstAndLog();
  void garbageFileIsCorrupt();
  void unknownRunIsNotFound();
  void futureSchemaIsRefused();
  void negativeSchemaIsCorrupt();
  void version1FileMigrates();
  void deviceIdentityRoundTrip();
  void version6FileMigrates();
  void unknownStatusTextReadsAsFailed();
  void defaultPathFollowsEnvironment();
  void readerWhileWriterWrites();
  void concurrentOpensOfANewFile();
  void storeIsMovable();
  void incrementalReadsFollowAppends();
  void orphanReasons();
  void runOfADeadOwnerIsInterrupted();
  void renameTagAndDelete();
  void packedEventsMatchTheRows();
  void nonFiniteMetricsAreKept();
  void reservesOfDeadOwnersAreRemoved();
  void storeThatCannotBeWrittenIsRead();
  void runWriterShipsUpdates();
};

// A diverged loss is news, not a store failure: NaN and both infinities are stored (NaN
// as a marked value, SQLite would store NULL) and read back as they were.
void TestRunStore::nonFiniteMetricsAreKept() {
  TempStore store;
  const std::int64_t id = must(store.create_run({}));
  const double inf = std::numeric_limits<double>::infinity();
  must_ok(store.append_metrics(id, {{0, 0, 1, "loss", 2.5},
                                    {0, 1, 2, "loss", std::numeric_limits<double>::quiet_NaN()},
                                    {0, 2, 3, "loss", inf},
                                    {0, 3, 4, "loss", -inf}}));
  const auto loss = must(store.load_metrics(id, "loss"));
  QCOMPARE(loss.size(), std::size_t(4));
  QCOMPARE(loss[0].value, 2.5);
  QVERIFY(std::isnan(loss[1].value));
  QCOMPARE(loss[2].value, inf);
  QCOMPARE(loss[3].value, -inf);
}

// Which running runs a reader takes as orphaned (run_store.h orphan_reason).
void TestRunStore::orphanReasons() {
  using loom::store::orphan_reason;
  const std::int64_t now = 1'800'000'000'000;
  RunRecord run;
  run.host = "node7";
  run.owner_pid = 4242;
  run.started_unix_ms = now - 100'000;
  run.heartbeat_unix_ms = now - 1'000;
  QCOMPARE(orphan_reason(run, true, true, now), std::string());    // alive, beating
  QCOMPARE(orphan_reason(run, false, false, now), std::string());  // elsewhere, beating
  QCOMPARE(orphan_reason(run, true, false, now),
           std::string("its owner (process 4242 on node7) ended without finishing it"));
  run.heartbeat_unix_ms = now - loom::store::kOwnerSilentMs - 1'000;
  QCOMPARE(orphan_reason(run, false, false, now), std::string("its owner (process 4242 on node7) has not reported for 31 s"));
  QVERIFY(!orphan_reason(run, true, true, now).empty());  // a reused pid does not beat
  run.status = loom::trace::RunStatus::Completed;
  QCOMPARE(orphan_reason(run, true, false, now), std::string());
  run.status = loom::trace::RunStatus::Running;
  run.owner_pid = 0;  // written before schema v4: nothing can still own it
  run.heartbeat_unix_ms = now;
  QVERIFY(!orphan_reason(run, true, true, now).empty());
}

// A run whose owner process has exited is interrupted by the next reader, whichever read
// it is; one owned by a live process, and finished runs, are left alone.
void TestRunStore::runOfADeadOwnerIsInterrupted() {
  TempStore store;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  QVERIFY(child > 0);
  ::waitpid(child, nullptr, 0);
  RunRecord orphan;
  orphan.host = loom::machine::host_name();
  orphan.owner_pid = child;
  RunRecord mine = orphan;
  mine.owner_pid = 0;  // create_run records this process
  const std::int64_t orphan_id = must(store.create_run(orphan));
  const std::int64_t mine_id = must(store.create_run(mine));
  const std::int64_t done_id = must(store.create_run(orphan));
  QVERIFY(store.append_log(orphan_id, "step 10\n").ok());
  QVERIFY(store.finish_run(done_id, loom::trace::RunStatus::Completed, 2.0, 64, "").ok());
  const auto state = must(store.load_run_state(orphan_id, 0));
  QCOMPARE(state.status, loom::trace::RunStatus::Interrupted);
  QVERIFY2(state.error.find("ended without finishing it") != std::string::npos, state.error.c_str());
  QCOMPARE(state.log_tail, std::string("step 10\n"));  // what it recorded is kept
  QCOMPARE(must(store.load_run(orphan_id)).status, loom::trace::RunStatus::Interrupted);
  for (const RunRecord& r : must(store.list_runs())) {
    if (r.id == mine_id) QCOMPARE(r.status, loom::trace::RunStatus::Running);
    if (r.id == done_id) QCOMPARE(r.status, loom::trace::RunStatus::Completed);
  }
  QVERIFY(store.heartbeat(mine_id).ok());
  QCOMPARE(must(store.load_run(mine_id)).owner_pid, std::int64_t(::getpid()));
}

// A dead owner's space reserve (1 MiB beside the store) is given back by whoever finds
// the run interrupted, and by opening the store; a running run's reserve stays.
void TestRunStore::reservesOfDeadOwnersAreRemoved() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("runs.db").toStdString();
  std::int64_t orphan_id = 0, mine_id = 0, later_id = 0;
  {
    RunStore store = must(RunStore::open(path));
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    QVERIFY(child > 0);
    ::waitpid(child, nullptr, 0);
    RunRecord orphan;
    orphan.host = loom::machine::host_name();
    orphan.owner_pid = child;
    RunRecord mine = orphan;
    mine.owner_pid = 0;
    orphan_id = must(store.create_run(orphan));
    mine_id = must(store.create_run(mine));
    later_id = must(store.create_run(orphan));
  }
  // The reserves' owners "died" holding them (SpaceReserve would remove its file).
  for (std::int64_t id : {orphan_id, mine_id, later_id}) {
    std::FILE* f = std::fopen(loom::store::space_reserve_path(path, id).c_str(), "w");
    QVERIFY(f);
    std::fputs("reserve", f);
    std::fclose(f);
  }
  auto exists = [&](std::int64_t id) { return std::filesystem::exists(loom::store::space_reserve_path(path, id)); };
  RunStore store = must(RunStore::open(path));
  QVERIFY2(!exists(orphan_id), "opening the store left a dead owner's reserve");
  QVERIFY2(!exists(later_id), "opening the store left a dead owner's reserve");
  QVERIFY2(exists(mine_id), "a running run's reserve was taken");
}

void TestRunStore::roundTripThroughReopen() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("sub/dir/runs.db").toStdString();  // parents created
  auto rank0 = make_events(0, 60'000);
  auto rank1 = make_events(1, 40'000);
  std::vector<MetricRecord> metrics;
  for (int s = 0; s < 50; ++s) metrics.push_back({s % 2, s, s * 1000LL, s % 5 ? "loss" : "lr", 2.5 / (s + 1)});
  std::int64_t id = 0;
  {
    RunStore store = must(RunStore::open(path));
    QCOMPARE(store.schema_version(), loom::store::kSchemaVersion);
    RunRecord run;
    run.name = "mlp-dp2";
    run.plan_json = R"({"replicas":2})";
    run.world_size = 2;
    run.host = "node1";
    run.version = "0.1.0";
    id = must(store.create_run(run));
    must_ok(store.upsert_rank(id, {0, "node1", "cpu", 10, 2, 123, 60'000}));
    must_ok(store.upsert_rank(id, {1, "node1", "cpu", 0, 0, 0, 0}));
    RankRecord r1{1, "node2", "cuda:0", -15, 3, 456, 40'000};  // update
    r1.offset_end_ns = -9'000'000'000'123LL;
    r1.sync_start_ns = 1'700'000'000'000'000'000LL;
    r1.sync_end_ns = 1'700'000'600'000'000'000LL;
    r1.pid = 4242;
    must_ok(store.upsert_rank(id, r1));
    // Odd batch sizes exercise both the multi-row and single-row insert paths.
    for (std::size_t i = 0; i < rank0.size(); i += 9'999)
      must_ok(store.append_events(id, 0, rank0.data() + i, std::min<std::size_t>(9'999, rank0.size() - i)));
    must_ok(store.append_events(id, 1, rank1.data(), rank1.size()));
    must_ok(store.append_metrics(id, metrics));
    must_ok(store.append_updates(id, make_updates(30)));
    must_ok(store.append_updates(id, {}));
    must_ok(store.finish_run(id, loom::trace::RunStatus::Completed, 12.5, 64'000, ""));
  }
  RunStore store = must(RunStore::open(path));
  RunRecord run = must(store.load_run(id));
  QCOMPARE(run.status, loom::trace::RunStatus::Completed);
  QCOMPARE(run.name, std::string("mlp-dp2"));
  QCOMPARE(run.plan_json, std::string(R"({"replicas":2})"));
  QCOMPARE(run.wall_s, 12.5);
  QCOMPARE(run.samples, std::int64_t(64'000));
  QCOMPARE(run.world_size, 2);
  QVERIFY(run.started_unix_ms > 0 && run.ended_unix_ms >= run.started_unix_ms);

  auto ranks = must(store.load_ranks(id));
  QCOMPARE(ranks.size(), std::size_t(2));
  QCOMPARE(ranks[1].host, std::string("node2"));
  QCOMPARE(ranks[1].device, std::string("cuda:0"));
  QCOMPARE(ranks[1].offset_ns, std::int64_t(-15));
  QCOMPARE(ranks[1].events_recorded, std::int64_t(40'000));
  QCOMPARE(ranks[0].t0_ns, std::int64_t(123));
  QCOMPARE(ranks[1].offset_end_ns, std::int64_t(-9'000'000'000'123LL));
  QCOMPARE(ranks[1].sync_start_ns, std::int64_t(1'700'000'000'000'000'000LL));
  QCOMPARE(ranks[1].sync_end_ns, std::int64_t(1'700'000'600'000'000'000LL));
  QCOMPARE(ranks[1].pid, 4242);
  QCOMPARE(ranks[0].sync_end_ns, std::int64_t(0));
  QCOMPARE(ranks[0].pid, 0);

  QCOMPARE(must(store.count_events(id)), std::int64_t(100'000));
  QCOMPARE(must(store.count_events(id, 1)), std::int64_t(40'000));
  auto all = must(store.load_events(id));
  QCOMPARE(all.size(), std::size_t(100'000));
  for (std::size_t i = 0; i < rank0.size(); ++i)
    if (std::memcmp(&all[i], &rank0[i], sizeof(Event)) != 0) QFAIL(qPrintable(QString("rank 0 event %1 differs").arg(i)));
  for (std::size_t i = 0; i < rank1.size(); ++i)
    if (std::memcmp(&all[rank0.size() + i], &rank1[i], sizeof(Event)) != 0)
      QFAIL(qPrintable(QString("rank 1 event %1 differs").arg(i)));
  auto only1 = must(store.load_events(id, 1));
  QCOMPARE(only1.size(), rank1.size());
  QVERIFY(std::memcmp(only1.data(), rank1.data(), rank1.size() * sizeof(Event)) == 0);

  auto loss = must(store.load_metrics(id, "loss"));
  QCOMPARE(loss.size(), std::size_t(40));
  auto every = must(store.load_metrics(id));
  QCOMPARE(every.size(), metrics.size());
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    QCOMPARE(every[i].name, metrics[i].name);
    QCOMPARE(every[i].step, metrics[i].step);
    QCOMPARE(every[i].rank, metrics[i].rank);
    QCOMPARE(every[i].t_ns, metrics[i].t_ns);
    QCOMPARE(every[i].value, metrics[i].value);
  }

  const auto updates = must(store.load_updates(id));  // in the order they were applied
  const auto sent = make_updates(30);
  QCOMPARE(updates.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i)
    QVERIFY2(same_update(updates[i], sent[i]), qPrintable(QString("update %1 differs").arg(i)));
}

void TestRunStore::listRunsNewestFirstAndLog() {
  TempStore store;
  RunRecord a;
  a.name = "old";
  a.started_unix_ms = 1000;
  RunRecord b;
  b.name = "new";
  b.started_unix_ms = 2000;
  std::int64_t ida = must(store.create_run(a));
  must(store.create_run(b));
  must_ok(store.append_log(ida, "line 1\n"));
  must_ok(store.append_log(ida, "line 2\n"));
  auto runs = must(store.list_runs());
  QCOMPARE(runs.size(), std::size_t(2));
  QCOMPARE(runs[0].name, std::string("new"));
  QCOMPARE(runs[1].name, std::string("old"));
  QCOMPARE(runs[1].status, loom::trace::RunStatus::Running);
  QCOMPARE(must(store.load_run(ida)).log, std::string("line 1\nline 2\n"));
}

void TestRunStore::garbageFileIsCorrupt() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("notes.txt").toStdString();
  {
    std::ofstream f(path);
    for (int i = 0; i < 200; ++i) f << "this is a text file, not a database\n";
  }
  auto r = RunStore::open(path);
  QVERIFY(!r.ok());
  QCOMPARE(r.error().code, ErrorCode::Corrupt);
  QVERIFY2(r.error().message.find(path) != std::string::npos, r.error().message.c_str());
  QVERIFY(!r.error().hint.empty());
}

void TestRunStore::unknownRunIsNotFound() {
  TempStore store;
  QCOMPARE(store.load_run(42).error().code, ErrorCode::NotFound);
  Event e;
  QCOMPARE(store.append_events(42, 0, &e, 1).error().code, ErrorCode::NotFound);
  QCOMPARE(store.finish_run(42, loom::trace::RunStatus::Failed, 0, 0, "x").error().code, ErrorCode::NotFound);
  QCOMPARE(store.append_log(42, "x").error().code, ErrorCode::NotFound);
  QCOMPARE(store.upsert_rank(42, {}).error().code, ErrorCode::NotFound);
  QCOMPARE(must(store.count_events(42)), std::int64_t(0));
}

void TestRunStore::futureSchemaIsRefused() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("runs.db").toStdString();
  must(RunStore::open(path));
  {
    auto db = must(loom::store::Database::open(path));
    must_ok(db.exec("UPDATE schema_version SET version = 99"));
  }
  auto r = RunStore::open(path);
  QVERIFY(!r.ok());
  QVERIFY2(r.error().message.find("99") != std::string::npos, r.error().message.c_str());
  QVERIFY(r.error().message.find(path) != std::string::npos);
}

// Found by fuzz_store: a negative version once indexed the migration table out of bounds.
void TestRunStore::negativeSchemaIsCorrupt() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("runs.db").toStdString();
  must(RunStore::open(path));
  {
    auto db = must(loom::store::Database::open(path));
    must_ok(db.exec("UPDATE schema_version SET version = -1"));
  }
  auto r = RunStore::open(path);
  QVERIFY(!r.ok());
  QCOMPARE(r.error().code, ErrorCode::Corrupt);
  QVERIFY2(r.error().message.find("-1") != std::string::npos, r.error().message.c_str());
}

namespace {
// The runs and ranks tables exactly as schema version 1 created them (frozen here, like a
// file on a user's disk), and the tables the store reads besides.
constexpr const char* kVersion1Schema = R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (1);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL DEFAULT '', plan_json TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed', 'failed', 'stopped')),
  started_unix_ms INTEGER NOT NULL DEFAULT 0, ended_unix_ms INTEGER NOT NULL DEFAULT 0,
  wall_s REAL NOT NULL DEFAULT 0, samples INTEGER NOT NULL DEFAULT 0, world_size INTEGER NOT NULL DEFAULT 1,
  host TEXT NOT NULL DEFAULT '', version TEXT NOT NULL DEFAULT '', error TEXT NOT NULL DEFAULT '',
  log TEXT NOT NULL DEFAULT '');
CREATE TABLE ranks (
  run_id INTEGER NOT NULL REFERENCES runs(id), rank INTEGER NOT NULL, host TEXT NOT NULL DEFAULT '',
  device TEXT NOT NULL DEFAULT '', offset_ns INTEGER NOT NULL DEFAULT 0,
  uncertainty_ns INTEGER NOT NULL DEFAULT 0, t0_ns INTEGER NOT NULL DEFAULT 0,
  events_recorded INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (run_id, rank));
CREATE TABLE events (
  run_id INTEGER NOT NULL, rank INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
  kind INTEGER NOT NULL, stream INTEGER NOT NULL, step INTEGER NOT NULL, layer INTEGER NOT NULL,
  peer INTEGER NOT NULL, message INTEGER NOT NULL, microbatch INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE INDEX events_by_rank_time ON events (run_id, rank, start_ns);
CREATE TABLE metrics (
  run_id INTEGER NOT NULL, rank INTEGER NOT NULL, step INTEGER NOT NULL, t_ns INTEGER NOT NULL,
  name TEXT NOT NULL, value REAL NOT NULL);
CREATE INDEX metrics_by_name_step ON metrics (run_id, name, step);
CREATE TABLE updates (
  run_id INTEGER NOT NULL, worker INTEGER NOT NULL, server INTEGER NOT NULL, step INTEGER NOT NULL,
  version_read INTEGER NOT NULL, version_applied INTEGER NOT NULL, staleness INTEGER NOT NULL,
  t_ns INTEGER NOT NULL);
CREATE INDEX updates_by_run ON updates (run_id, step);
INSERT INTO runs (name, status, world_size) VALUES ('old-dp2', 'completed', 2);
INSERT INTO ranks (run_id, rank, host, device, offset_ns, uncertainty_ns, t0_ns, events_recorded)
  VALUES (1, 0, 'n0', 'cpu', 0, 0, 10, 5), (1, 1, 'n1', 'cpu', -2500, 40, 20, 7);
)sql";
}  // namespace

void TestRunStore::version1FileMigrates() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("v1.db").toStdString();
  {
    auto db = must(loom::store::Database::open(path));
    must_ok(db.exec(kVersion1Schema));
  }
  RunStore store = must(RunStore::open(path));
  QCOMPARE(store.schema_version(), loom::store::kSchemaVersion);
  auto ranks = must(store.load_ranks(1));
  QCOMPARE(ranks.size(), std::size_t(2));
  QCOMPARE(ranks[1].host, std::string("n1"));
  QCOMPARE(ranks[1].offset_ns, std::int64_t(-2500));
  QCOMPARE(ranks[1].uncertainty_ns, std::int64_t(40));
  QCOMPARE(ranks[1].events_recorded, std::int64_t(7));
  QCOMPARE(ranks[1].offset_end_ns, std::int64_t(0));  // the new columns default to 0
  QCOMPARE(ranks[1].sync_end_ns, std::int64_t(0));
  QCOMPARE(ranks[1].pid, 0);
  RankRecord updated = ranks[1];
  updated.offset_end_ns = -2600;
  updated.sync_start_ns = 100;
  updated.sync_end_ns = 200;
  updated.pid = 77;
  must_ok(store.upsert_rank(1, updated));
  RunStore reopened = must(RunStore::open(path));  // already current: no second migration
  QCOMPARE(reopened.schema_version(), loom::store::kSchemaVersion);
  auto run = must(reopened.load_run(1));  // v3's training figures default to 0: not computed
  QCOMPARE(run.train_s, 0.0);
  QCOMPARE(run.train_samples, std::int64_t(0));
  must_ok(reopened.set_training_figures(1, 2.5, 5000));
  run = must(reopened.load_run(1));
  QCOMPARE(run.samples_per_s(), 2000.0);
  auto again = must(reopened.load_ranks(1));
  QCOMPARE(again[1].offset_end_ns, std::int64_t(-2600));
  QCOMPARE(again[1].sync_start_ns, std::int64_t(100));
  QCOMPARE(again[1].sync_end_ns, std::int64_t(200));
  QCOMPARE(again[1].pid, 77);
  QCOMPARE(must(reopened.load_run(1)).name, std::string("old-dp2"));
}

namespace {
// A GPU rank's identity with every field set and distinct, so a dropped column shows.
trace::DeviceInfo h200() {
  trace::DeviceInfo d;
  d.kind = "gpu";
  d.name = "NVIDIA H200";
  d.memory_bytes = 150'011'707'392LL;
  d.compute_major = 9;
  d.compute_minor = 0;
  d.driver = "580.159.04";
  d.cuda_driver = "13.1";
  d.cuda_runtime = "13.0";
  d.nccl = "2.28.3";
  return d;
}
}  // namespace

// Schema v7: each rank's device identity survives a reopen, a later upsert of the same
// rank replaces it, and a damaged value reads as not recorded instead of failing the run.
void TestRunStore::deviceIdentityRoundTrip() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("runs.db").toStdString();
  trace::DeviceInfo cpu;
  cpu.kind = "cpu";
  cpu.name = "AMD EPYC 7B13";
  cpu.memory_bytes = 25'000'000'000LL;
  cpu.logical_cores = 2;
  cpu.blas_threads = 1;
  std::int64_t id = 0, other = 0;
  {
    RunStore store = must(RunStore::open(path));
    id = must(store.create_run({}));
    other = must(store.create_run({}));
    RankRecord r0{0, "n0", "gpu 0"};
    r0.device_info = h200();
    RankRecord r1{1, "n0", "cpu"};
    r1.device_info = cpu;
    must_ok(store.upsert_rank(id, r0));
    must_ok(store.upsert_rank(id, r1));
    must_ok(store.upsert_rank(id, RankRecord{2, "n1", "cpu"}));  // said nothing
    must_ok(store.upsert_rank(other, RankRecord{0, "n1", "cpu"}));
  }
  RunStore store = must(RunStore::open(path));
  auto ranks = must(store.load_ranks(id));
  QCOMPARE(ranks.size(), std::size_t(3));
  QVERIFY(ranks[0].device_info == h200());
  QVERIFY(ranks[1].device_info == cpu);
  QVERIFY(!ranks[2].device_info.recorded());
  auto all = must(store.load_all_devices());
  QCOMPARE(all.size(), std::size_t(1));  // `other` recorded none
  QCOMPARE(all[id].size(), std::size_t(2));
  QCOMPARE(all[id][1].first, 1);
  QVERIFY(all[id][1].second == cpu);
  // An upsert without an identity (a clock update that lost it) would erase it: the feeder
  // keeps the record whole; here the store just does as told.
  RankRecord cleared = ranks[0];
  cleared.device_info = {};
  must_ok(store.upsert_rank(id, cleared));
  QVERIFY(!must(store.load_ranks(id))[0].device_info.recorded());
  Database raw = must(Database::open(path));
  for (const char* damaged : {"{not json", "{\"kind\":\"tpu\",\"name\":\"x\"}", "[1,2]", "\"gpu\""}) {
    auto q = must(raw.prepare("UPDATE ranks SET device_info = ? WHERE run_id = ? AND rank = 1"));
    q.bind(1, std::string(damaged)).bind(2, id);
    QVERIFY(q.step().ok());
    auto read = must(store.load_ranks(id));
    QVERIFY2(!read[1].device_info.recorded(), damaged);
  }
  // Fields of the wrong type or out of range are dropped one by one; the rest is kept.
  must_ok(raw.exec("UPDATE ranks SET device_info = '{\"kind\":\"gpu\",\"name\":\"A\",\"memory_bytes\":-4,"
                   "\"logical_cores\":\"many\",\"blas_threads\":99999999,\"compute_capability\":\"x.y\"}' "
                   "WHERE rank = 1"));
  const trace::DeviceInfo partial = must(store.load_ranks(id))[1].device_info;
  QCOMPARE(partial.name, std::string("A"));
  QCOMPARE(partial.memory_bytes, std::int64_t(0));
  QCOMPARE(partial.logical_cores, 0);
  QCOMPARE(partial.blas_threads, 0);
  QCOMPARE(partial.compute_major, 0);
}

// A file from the Loom before device identities (schema v6): it opens, migrates, its ranks
// read as "not recorded", and a rank written afterwards keeps its identity.
void TestRunStore::version6FileMigrates() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("v6.db").toStdString();
  std::int64_t id = 0;
  {
    RunStore store = must(RunStore::open(path));
    id = must(store.create_run({}));
    must_ok(store.upsert_rank(id, RankRecord{0, "n0", "gpu 0", -5}));
  }
  {
    // Back to v6 exactly: v7 and v8 only added these columns.
    auto db = must(Database::open(path));
    must_ok(db.exec("ALTER TABLE ranks DROP COLUMN device_info; ALTER TABLE runs DROP COLUMN kind; "
                    "UPDATE schema_version SET version = 6;"));
  }
  RunStore store = must(RunStore::open(path));
  QCOMPARE(store.schema_version(), loom::store::kSchemaVersion);
  QVERIFY(!must(store.load_run(id)).predicted());  // every run before v8 was measured
  auto ranks = must(store.load_ranks(id));
  QCOMPARE(ranks.size(), std::size_t(1));
  QCOMPARE(ranks[0].offset_ns, std::int64_t(-5));
  QVERIFY(!ranks[0].device_info.recorded());
  QCOMPARE(trace::describe_device(ranks[0].device_info), std::string("not recorded"));
  QVERIFY(must(store.load_all_devices()).empty());
  ranks[0].device_info = h200();
  must_ok(store.upsert_rank(id, ranks[0]));
  QVERIFY(must(store.load_ranks(id))[0].device_info == h200());
}

// A status no Loom writes (a damaged file) lists as failed with the text in
// its error, rather than refusing the store or passing for a running run.
void TestRunStore::unknownStatusTextReadsAsFailed() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("runs.db").toStdString();
  RunStore store = must(RunStore::open(path));
  std::int64_t id = must(store.create_run({}));
  QVERIFY(store.finish_run(id, RunStatus::Completed, 1, 1, "").ok());
  QCOMPARE(std::string(trace::to_text(must(store.load_run(id)).status)), std::string("completed"));
  Database raw = must(Database::open(path));
  // The schema's CHECK keeps such text out; a damaged file is simulated past it.
  QVERIFY(raw.exec("PRAGMA ignore_check_constraints = ON").ok());
  QVERIFY(raw.exec("UPDATE runs SET status = 'done', error = 'x'").ok());
  RunRecord run = must(store.load_run(id));
  QCOMPARE(run.status, RunStatus::Failed);
  QCOMPARE(run.error, std::string("the store holds an unknown status 'done'; x"));
  QCOMPARE(must(store.load_run_state(id, 0)).status, RunStatus::Failed);
  QCOMPARE(must(store.list_runs()).front().status, RunStatus::Failed);
}

void TestRunStore::defaultPathFollowsEnvironment() {
  const QByteArray old_db = qgetenv("LOOM_DB"), old_xdg = qgetenv("XDG_DATA_HOME"), old_home = qgetenv("HOME");
  qputenv("LOOM_DB", "/tmp/x/loom.db");
  QCOMPARE(RunStore::default_path(), std::string("/tmp/x/loom.db"));
  qunsetenv("LOOM_DB");
  qputenv("XDG_DATA_HOME", "/data");
  QCOMPARE(RunStore::default_path(), std::string("/data/loom/runs.db"));
  qunsetenv("XDG_DATA_HOME");
  qputenv("HOME", "/home/u");
  QCOMPARE(RunStore::default_path(), std::string("/home/u/.local/share/loom/runs.db"));
  auto restore = [](const char* name, const QByteArray& v) { v.isNull() ? qunsetenv(name) : qputenv(name, v); };
  restore("LOOM_DB", old_db);
  restore("XDG_DATA_HOME", old_xdg);
  restore("HOME", old_home);
}

// Two connections behave like two processes as far as SQLite locking goes: the reader
// must never see an error or a partial batch while the writer commits.
void TestRunStore::readerWhileWriterWrites() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("runs.db").toStdString();
  RunStore writer = must(RunStore::open(path));
  std::int64_t id = must(writer.create_run({}));
  RunStore reader = must(RunStore::open(path));
  constexpr int kBatches = 40;
  constexpr std::size_t kBatch = 2'500;
  auto batch = make_events(0, kBatch);
  std::atomic<bool> write_failed{false};
  std::thread writing([&] {
    for (int b = 0; b < kBatches; ++b)
      if (!writer.append_events(id, 0, batch.data(), batch.size()).ok()) write_failed = true;
  });
  std::int64_t last = 0;
  int reads = 0;
  while (last < static_cast<std::int64_t>(kBatches * kBatch) && !write_failed) {
    auto n = reader.count_events(id);
    QVERIFY2(n.ok(), n.ok() ? "" : n.error().describe().c_str());
    QVERIFY(*n >= last);
    QCOMPARE(*n % static_cast<std::int64_t>(kBatch), std::int64_t(0));  // whole transactions only
    last = *n;
    ++reads;
  }
  writing.join();
  QVERIFY(!write_failed);
  QCOMPARE(must(reader.count_events(id)), std::int64_t(kBatches * kBatch));
  QVERIFY(reads > 1);
}

// A launcher creates the store while a viewer (or a test) opens it: both connections
// race to switch the new file to WAL, where SQLite does not wait on its busy handler.
void TestRunStore::concurrentOpensOfANewFile() {
  QTemporaryDir dir;
  for (int i = 0; i < 60; ++i) {
    const std::string path = dir.filePath(QString("race-%1.db").arg(i)).toStdString();
    std::string errors[2];
    std::thread first([&] {
      auto s = RunStore::open(path);
      if (!s.ok()) errors[0] = s.error().describe();
    });
    auto second = RunStore::open(path);
    if (!second.ok()) errors[1] = second.error().describe();
    first.join();
    QVERIFY2(errors[0].empty() && errors[1].empty(), (errors[0] + errors[1]).c_str());
  }
}

void TestRunStore::storeIsMovable() {
  QTemporaryDir dir;
  RunStore a = must(RunStore::open(dir.filePath("runs.db").toStdString()));
  std::int64_t id = must(a.create_run({}));
  auto events = make_events(0, 100);
  must_ok(a.append_events(id, 0, events.data(), events.size()));  // caches statements
  RunStore b = std::move(a);
  must_ok(b.append_events(id, 0, events.data(), events.size()));
  QCOMPARE(must(b.count_events(id)), std::int64_t(200));
}

// A live view reads what arrived since its last read: every row exactly once, in the order
// stored, with its rank, only from its own run, and in pages no larger than asked for.
void TestRunStore::incrementalReadsFollowAppends() {
  TempStore store;
  std::int64_t id = must(store.create_run({}));
  std::int64_t other = must(store.create_run({}));
  auto rank0 = make_events(0, 300);
  auto rank1 = make_events(1, 200);
  must_ok(store.append_events(id, 0, rank0.data(), 150));
  must_ok(store.append_events(other, 0, rank0.data(), 50));
  must_ok(store.append_events(id, 1, rank1.data(), rank1.size()));

  auto first = must(store.load_events_after(id, 0, 100));
  QCOMPARE(first.events.size(), std::size_t(100));
  auto second = must(store.load_events_after(id, first.last_seq, 1000));
  QCOMPARE(second.events.size(), std::size_t(250));
  QCOMPARE(second.ranks.front(), 0);
  QCOMPARE(second.ranks.back(), 1);
  QCOMPARE(second.events.back().message, rank1.back().message);
  QVERIFY(std::memcmp(&first.events[7], &rank0[7], sizeof(Event)) == 0);

  auto nothing = must(store.load_events_after(id, second.last_seq, 1000));
  QVERIFY(nothing.events.empty());
  QCOMPARE(nothing.last_seq, second.last_seq);
  must_ok(store.append_events(id, 0, rank0.data() + 150, 150));
  auto rest = must(store.load_events_after(id, second.last_seq, 1000));
  QCOMPARE(rest.events.size(), std::size_t(150));
  QCOMPARE(rest.events.front().start_ns, rank0[150].start_ns);

  must_ok(store.append_metrics(id, {{0, 3, 30, "loss", 1.5}, {1, 3, 31, "loss", 2.5}}));
  must_ok(store.append_metrics(other, {{0, 0, 0, "loss", 9.0}}));
  must_ok(store.append_metrics(id, {{0, 4, 40, "test_accuracy", 0.75}}));
  auto m1 = must(store.load_metrics_after(id, 0, 2));
  QCOMPARE(m1.metrics.size(), std::size_t(2));
  QCOMPARE(m1.metrics[1].rank, 1);
  QCOMPARE(m1.metrics[1].value, 2.5);
  auto m2 = must(store.load_metrics_after(id, m1.last_seq, 10));
  QCOMPARE(m2.metrics.size(), std::size_t(1));
  QCOMPARE(m2.metrics[0].name, std::string("test_accuracy"));
  QCOMPARE(m2.metrics[0].step, std::int64_t(4));

  const auto updates = make_updates(5);
  must_ok(store.append_updates(id, {updates[0], updates[1], updates[2]}));
  must_ok(store.append_updates(other, {updates[4]}));
  must_ok(store.append_updates(id, {updates[3]}));
  auto u1 = must(store.load_updates_after(id, 0, 2));
  QCOMPARE(u1.updates.size(), std::size_t(2));
  QVERIFY(same_update(u1.updates[1], updates[1]));
  auto u2 = must(store.load_updates_after(id, u1.last_seq, 10));
  QCOMPARE(u2.updates.size(), std::size_t(2));  // not the other run's
  QVERIFY(same_update(u2.updates[0], updates[2]) && same_update(u2.updates[1], updates[3]));
  QCOMPARE(must(store.load_updates_after(id, u2.last_seq, 10)).last_seq, u2.last_seq);

  // The polled run state: the log from a byte offset (multi-byte text counted in bytes).
  const std::string first_line = "launch: caf\xc3\xa9 \xe2\x86\x92 mpirun\n";
  must_ok(store.append_log(id, first_line));
  must_ok(store.append_log(id, "rank 1 done\n"));
  auto whole = must(store.load_run_state(id, 0));
  QCOMPARE(whole.status, loom::trace::RunStatus::Running);
  QCOMPARE(whole.log_tail, first_line + "rank 1 done\n");
  auto tail = must(store.load_run_state(id, first_line.size()));
  QCOMPARE(tail.log_tail, std::string("rank 1 done\n"));
  QVERIFY(must(store.load_run_state(id, whole.log_tail.size())).log_tail.empty());
  QCOMPARE(store.load_run_state(4242, 0).error().code, ErrorCode::NotFound);
}

// The run browser's edits: a rename and tags survive reopening; a bad tag changes nothing;
// deleting a run removes its rows from every table and leaves the other run whole; a
// running run is not deleted.
void TestRunStore::renameTagAndDelete() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("runs.db").toStdString();
  std::int64_t keep = 0, gone = 0;
  {
    RunStore store = must(RunStore::open(path));
    for (std::int64_t* id : {&keep, &gone}) {
      RunRecord run;
      run.name = "r";
      *id = must(store.create_run(run));
      const auto events = make_events(0, 100);
      must_ok(store.append_events(*id, 0, events.data(), events.size()));
      must_ok(store.append_metrics(*id, {{0, 1, 2, "loss", 0.5}}));
      must_ok(store.append_updates(*id, make_updates(3)));
      must_ok(store.upsert_rank(*id, {0, "h", "cpu"}));
      must_ok(store.set_tags(*id, {"b", "a", "b"}));
    }
    QCOMPARE(store.delete_run(gone).error().code, ErrorCode::InvalidArgument);  // still running
    must_ok(store.finish_run(gone, loom::trace::RunStatus::Completed, 1.0, 10, ""));
    must_ok(store.rename_run(keep, "baseline, 4 ranks"));
    QCOMPARE(store.set_tags(keep, {"ok", "no,comma"}).error().code, ErrorCode::InvalidArgument);
    QCOMPARE(store.set_tags(keep, {""}).error().code, ErrorCode::InvalidArgument);
    QCOMPARE(store.rename_run(999, "x").error().code, ErrorCode::NotFound);
    QCOMPARE(store.delete_run(999).error().code, ErrorCode::NotFound);
    // Each run's checkpoints lie in its own folder beside the store: deleting the run
    // deletes them, and leaves the other run's.
    for (std::int64_t id : {keep, gone}) {
      const std::filesystem::path step = loom::store::checkpoint_dir(path, id) + "/step-2";
      std::filesystem::create_directories(step);
      std::ofstream(step / "rank-0.ckpt") << "weights";
    }
    must_ok(store.delete_run(gone));
    QVERIFY(!std::filesystem::exists(loom::store::checkpoint_dir(path, gone)));
    QVERIFY(std::filesystem::exists(loom::store::checkpoint_dir(path, keep) + "/step-2/rank-0.ckpt"));
  }
  RunStore store = must(RunStore::open(path));
  QCOMPARE(must(store.load_run(keep)).name, std::string("baseline, 4 ranks"));
  QCOMPARE(must(store.load_tags(keep)), (std::vector<std::string>{"a", "b"}));  // the bad call changed nothing
  QCOMPARE(store.load_run(gone).error().code, ErrorCode::NotFound);
  QCOMPARE(must(store.count_events(gone)), std::int64_t(0));
  QCOMPARE(must(store.count_events(keep)), std::int64_t(100));
  auto db = must(loom::store::Database::open(path));
  for (const char* table : {"event_blocks", "metrics", "updates", "ranks", "run_tags"}) {
    auto q = must(db.prepare(std::string("SELECT COUNT(*) FROM ") + table + " WHERE run_id = ?"));
    q.bind(1, gone);
    QVERIFY(must(q.step()));
    QVERIFY2(q.column_int64(0) == 0, table);
  }
  QCOMPARE(must(store.load_all_tags()).size(), std::size_t(1));
  QCOMPARE(must(store.load_updates(keep)).size(), std::size_t(3));
}

namespace {
std::int64_t count_where(Database& db, const std::string& sql, std::int64_t run_id) {
  auto q = must(db.prepare(sql));
  q.bind(1, run_id);
  must(q.step());
  return q.column_int64(0);
}

bool same_events(const std::vector<Event>& a, const std::vector<Event>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Event)) == 0;
}
}  // namespace

// finish_run packs the events into blocks; reads from blocks give exactly the rows' events,
// and a damaged or foreign block, or events appended later, send readers back to the rows.
void TestRunStore::packedEventsMatchTheRows() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("runs.db").toStdString();
  RunStore store = must(RunStore::open(path));
  const std::int64_t id = must(store.create_run(RunRecord{}));
  const auto rank0 = make_events(0, 140'000);  // three blocks of 65,536
  const auto rank1 = make_events(1, 100);
  must_ok(store.append_events(id, 0, rank0.data(), rank0.size()));
  must_ok(store.append_events(id, 1, rank1.data(), rank1.size()));
  auto db = must(Database::open(path));
  const std::string blocks_sql = "SELECT COUNT(*) FROM event_blocks WHERE run_id = ?";
  QCOMPARE(count_where(db, blocks_sql, id), std::int64_t(0));  // running: rows only
  must_ok(store.finish_run(id, RunStatus::Completed, 1.0, 0, ""));
  QCOMPARE(count_where(db, blocks_sql, id), std::int64_t(4));

  QVERIFY(same_events(must(store.load_events(id, 0)), rank0));
  QVERIFY(same_events(must(store.load_events(id, 1)), rank1));
  std::vector<Event> both = rank0;
  both.insert(both.end(), rank1.begin(), rank1.end());
  QVERIFY(same_events(must(store.load_events(id)), both));
  std::vector<Event> steps;
  std::copy_if(rank0.begin(), rank0.end(), std::back_inserter(steps),
               [](const Event& e) { return e.kind == trace::EventKind::Step; });
  QVERIFY(same_events(must(store.load_events_of_kind(id, 0, trace::EventKind::Step)), steps));

  // A count no block holds (a damaged file) reads the rows, without sizing anything by it.
  must_ok(db.exec("UPDATE event_blocks SET events = 4000000000000000 WHERE rank = 0 AND block = 0"));
  QVERIFY(same_events(must(store.load_events(id, 0)), rank0));
  must_ok(store.pack_events(id));
  // A block cut short reads from the rows, whole and unchanged.
  must_ok(db.exec("UPDATE event_blocks SET data = zeroblob(100) WHERE rank = 0 AND block = 1"));
  QVERIFY(same_events(must(store.load_events(id, 0)), rank0));
  must_ok(store.pack_events(id));
  must_ok(db.exec("UPDATE event_blocks SET format = 2 WHERE rank = 1"));  // a later Loom's layout
  QVERIFY(same_events(must(store.load_events(id, 1)), rank1));

  // A rank flushing after the run ended: the blocks go, its event is read.
  must_ok(store.pack_events(id));
  const auto late = make_events(1, 101);
  must_ok(store.append_events(id, 1, &late.back(), 1));
  QCOMPARE(count_where(db, blocks_sql, id), std::int64_t(0));
  QVERIFY(same_events(must(store.load_events(id, 1)), late));
}

namespace {
// Runs `read` in a child process that cannot write `dir`'s store: as root (whom file
// modes do not stop) the child becomes nobody; otherwise the modes are taken away.
// Returns the child's exit code (0: every check passed).
int as_a_reader(const std::string& dir, const std::string& db, bool folder_writable,
                const std::function<int()>& read) {
  const bool root = ::geteuid() == 0;
  constexpr uid_t kNobody = 65534;
  ::chmod(dir.c_str(), folder_writable && !root ? 0755 : 0555);
  ::chmod(db.c_str(), 0444);
  if (root && folder_writable && ::chown(dir.c_str(), kNobody, kNobody) != 0) return 90;
  const pid_t child = ::fork();
  if (child == 0) {
    if (root && (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0)) ::_exit(91);
    ::_exit(read());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ::chmod(dir.c_str(), 0700);  // for QTemporaryDir's cleanup
  ::chmod(db.c_str(), 0644);
  if (root) (void)::chown(dir.c_str(), 0, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}
}  // namespace

// A store on a read-only mount, or one this user may not write, is still listed and read:
// it opens read-only, leaves no file beside it, and a write fails naming the file.
// (With a folder that cannot be written, SQLite could not make its -shm file: the store
// used to fail to open at all.)
void TestRunStore::storeThatCannotBeWrittenIsRead() {
  for (const bool folder_writable : {false, true}) {
    QTemporaryDir dir;
    const std::string folder = dir.path().toStdString(), path = folder + "/runs.db";
    std::int64_t id = 0;
    {
      RunStore store = must(RunStore::open(path));
      RunRecord run;
      run.name = "kept";
      id = must(store.create_run(run));
      must_ok(store.append_metrics(id, {{0, 1, 2, "loss", 0.5}}));
      must_ok(store.finish_run(id, loom::trace::RunStatus::Completed, 1.0, 10, ""));
    }
    const int rc = as_a_reader(folder, path, folder_writable, [&] {
      auto store = RunStore::open(path);
      if (!store.ok()) {
        std::fprintf(stderr, "open: %s\n", store.error().describe().c_str());
        return 1;
      }
      if (!store->read_only()) return 2;
      auto runs = store->list_runs();
      if (!runs.ok() || runs->size() != 1 || runs->front().name != "kept") return 3;
      auto metrics = store->load_metrics(id);
      if (!metrics.ok() || metrics->size() != 1) return 4;
      RunRecord another;
      auto written = store->create_run(another);
      if (written.ok() || written.error().message.find(path) == std::string::npos) return 5;
      return 0;
    });
    QVERIFY2(rc == 0, qPrintable(QStringLiteral("folder writable %1: the reader failed check %2").arg(folder_writable).arg(rc)));
    if (!folder_writable) {
      QVERIFY(!std::filesystem::exists(path + "-shm"));
      QVERIFY(!std::filesystem::exists(path + "-wal"));
    }
  }
}

// A server rank's applied updates reach the store within a period while training goes
// on, and those added just before finish() are not lost; every field survives.
void TestRunStore::runWriterShipsUpdates() {
#if !LOOM_TRACING
  QSKIP("tracing compiled out (LOOM_TRACING=0)");
#endif
  QTemporaryDir dir;
  const std::string path = dir.filePath("runs.db").toStdString();
  auto store = loom::store::RunStore::open(path);
  auto reader = loom::store::RunStore::open(path);  // one connection per thread
  QVERIFY(store.ok() && reader.ok());
  const std::int64_t id = *store->create_run({});
  loom::store::StoreSink sink(*store, id);
  loom::trace::Recorder recorder;
  loom::trace::RunWriter writer(sink, 2, recorder, std::chrono::milliseconds(10));
  auto update = [](int i) {
    return loom::trace::UpdateRecord{i % 2, 1, 100 + i, 40 + i, 43 + 2 * i, 3 + i, 1'000'000'000LL * i + 7};
  };
  writer.add_updates({update(0), update(1)});
  writer.add_updates({update(2)});
  QVERIFY(QTest::qWaitFor([&] { return reader->load_updates(id)->size() == 3; }, 5000));
  writer.add_updates({update(3)});
  QVERIFY(writer.finish().ok());
  auto stored = reader->load_updates(id);
  QVERIFY(stored.ok());
  QCOMPARE(stored->size(), std::size_t(4));
  for (int i = 0; i < 4; ++i) QVERIFY2((*stored)[std::size_t(i)] == update(i), qPrintable(QString("update %1").arg(i)));
}

QTEST_GUILESS_MAIN(TestRunStore)
#include "test_run_store.moc"
