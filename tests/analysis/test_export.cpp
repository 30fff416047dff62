// Chrome trace export tests: the document has a named process per rank and named
// threads, every slice nests on its thread (checked with a stack, in integer ns), times
// are relative and non-negative, a rank whose clock is 1 s ahead lands where rank 0's
// clock says, a crossing slice moves to a second lane with its length intact, and the file written from a store
// parses to the same trace; a matched send/receive gets one flow arrow, an unmatched one none.
#include <QtTest>

#include <fstream>
#include <map>

#include "loom/analysis/export_chrome.h"
#include "loom/test/events.h"

using loom::chrome::RankEvents;
using loom::trace::Event;
using loom::trace::EventKind;
using loom::trace::Stream;
using nlohmann::json;

namespace {
constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kS = 1'000'000'000;

// Step 0; a layer when given.
Event span(EventKind kind, Stream stream, std::int64_t start_ns, std::int64_t end_ns, int layer = -1) {
  return loom::testing::span_ns(kind, stream, start_ns, end_ns, 0, layer);
}

// Rank 0 on its own clock, starting at 5 s: a step with nested forwards, a zero-length
// event, and two all-reduce buckets in flight at once (the second crosses the first).
std::vector<Event> rank0_events() {
  const std::int64_t t = 5 * kS;
  std::vector<Event> v = {
      span(EventKind::Step, Stream::Host, t, t + 100 * kMs),
      span(EventKind::Forward, Stream::Compute, t + 10 * kMs, t + 40 * kMs),
      span(EventKind::Forward, Stream::Compute, t + 10 * kMs, t + 20 * kMs, 0),
      span(EventKind::Forward, Stream::Compute, t + 20 * kMs, t + 40 * kMs, 1),
      span(EventKind::Backward, Stream::Compute, t + 40 * kMs, t + 70 * kMs, 1),
      span(EventKind::AllReduce, Stream::Comm, t + 50 * kMs, t + 80 * kMs),
      span(EventKind::AllReduce, Stream::Comm, t + 60 * kMs, t + 90 * kMs),  // crosses: a second lane
      span(EventKind::Wait, Stream::Comm, t + 90 * kMs, t + 90 * kMs),        // zero length
  };
  v[5].bytes = 4096;
  return v;
}

// Rank 1's clock is 1 s ahead of rank 0's: its forward at rank-1 time 6.01 s happened at
// rank-0 time 5.01 s, with rank 0's forward.
std::vector<Event> rank1_events() {
  return {span(EventKind::Forward, Stream::Compute, 6 * kS + 10 * kMs, 6 * kS + 30 * kMs, 0)};
}

std::vector<RankEvents> two_ranks() {
  RankEvents r0, r1;
  r0.record.rank = 0;
  r0.record.host = "node0";
  r0.events = rank0_events();
  r1.record.rank = 1;
  r1.record.host = "node1";
  r1.record.offset_ns = kS;
  r1.events = rank1_events();
  return {r1, r0};  // any order
}

loom::trace::RunRecord run_record() {
  loom::trace::RunRecord run;
  run.id = 7;
  run.name = "dp2";
  run.status = loom::trace::RunStatus::Completed;
  run.world_size = 2;
  run.version = "0.1.0";
  run.plan_json = R"({"parallel": {"backend": "nccl"}})";
  return run;
}

std::int64_t ns(const json& us) { return std::llround(us.get<double>() * 1e3); }

// Checks strict nesting per (pid, tid) in file order after sorting like a viewer would.
void check_nesting(const json& trace) {
  std::map<std::pair<int, int>, std::vector<std::pair<std::int64_t, std::int64_t>>> threads;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    QVERIFY(ns(e["ts"]) >= 0);
    QVERIFY(ns(e["dur"]) >= 0);
    threads[{e["pid"].get<int>(), e["tid"].get<int>()}].emplace_back(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]));
  }
  for (auto& [thread, slices] : threads) {
    std::stable_sort(slices.begin(), slices.end(), [](auto& a, auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<std::int64_t> stack;
    for (const auto& [start, end] : slices) {
      while (!stack.empty() && stack.back() <= start) stack.pop_back();
      QVERIFY2(stack.empty() || end <= stack.back(),
               qPrintable(QString("pid %1 tid %2: [%3, %4) crosses its parent").arg(thread.first)
                              .arg(thread.second).arg(start).arg(end)));
      stack.push_back(end);
    }
  }
}

const json* find_slice(const json& trace, int pid, const std::string& name) {
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == pid && e["name"] == name) return &e;
  return nullptr;
}
// Rank 0 sends pipeline message kMsg to rank 1 at [10,12) ms and message 99 (never
// received) at [30,31) ms; it also receives a message 99 from rank 1, which is the
// other direction and so no match. Rank 1 (clock 1 s ahead) receives kMsg over [11,20) ms.
constexpr std::int32_t kMsg = (1 << 28) + (4095 * 256 + 3) * 256 + 1;

Event message(EventKind kind, std::int64_t start_ns, std::int64_t end_ns, int peer, std::int32_t id) {
  Event e = span(kind, Stream::Host, start_ns, end_ns);
  e.peer = peer;
  e.message = id;
  e.bytes = 1024;
  return e;
}

std::vector<RankEvents> messaging_ranks() {
  const std::int64_t t = 5 * kS;
  RankEvents r0, r1;
  r0.record.rank = 0;
  r0.events = {span(EventKind::Step, Stream::Host, t, t + 100 * kMs),
               message(EventKind::Send, t + 10 * kMs, t + 12 * kMs, 1, kMsg),
               message(EventKind::Send, t + 30 * kMs, t + 31 * kMs, 1, 99),
               message(EventKind::Recv, t + 40 * kMs, t + 41 * kMs, 1, 99)};
  r1.record.rank = 1;
  r1.record.offset_ns = kS;
  r1.events = {span(EventKind::Step, Stream::Host, t + kS, t + kS + 100 * kMs),
               message(EventKind::Recv, t + kS + 11 * kMs, t + kS + 20 * kMs, 0, kMsg)};
  return {r0, r1};
}

// The flow events of a trace, by phase.
std::map<std::string, std::vector<json>> flows_of(const json& trace) {
  std::map<std::string, std::vector<json>> out;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "s" || e["ph"] == "f") out[e["ph"].get<std::string>()].push_back(e);
  return out;
}

void check_message_flow(const json& trace) {
  auto flows = flows_of(trace);
  QCOMPARE(flows["s"].size(), std::size_t(1));
  QCOMPARE(flows["f"].size(), std::size_t(1));
  const json& s = flows["s"][0];
  const json& f = flows["f"][0];
  QCOMPARE(s["id"], f["id"]);
  QVERIFY(s["cat"] == "message" && f["cat"] == "message" && s["name"] == "message" && f["name"] == "message");
  QVERIFY(f["bp"] == "e");
  QCOMPARE(s["pid"].get<int>(), 0);
  QCOMPARE(s["tid"].get<int>(), 2);  // host stream
  QCOMPARE(f["pid"].get<int>(), 1);
  QCOMPARE(f["tid"].get<int>(), 2);
  QCOMPARE(ns(s["ts"]), 10 * kMs);  // the send slice's start
  QCOMPARE(ns(f["ts"]), 20 * kMs);  // the receive slice's end, on rank 0's clock
}
}  // namespace

class TestExport : public QObject {
  Q_OBJECT
 private slots:
  void documentShape() {
    loom::chrome::ExportStats stats;
    const json trace = loom::chrome::chrome_trace(run_record(), two_ranks(), &stats);
    QCOMPARE(stats.events, std::int64_t(9));
    QCOMPARE(stats.ranks, 2);
    QVERIFY(trace["displayTimeUnit"] == "ms");
    QVERIFY(trace["distributedInfo"]["backend"] == "nccl");
    QVERIFY(trace["distributedInfo"]["world_size"] == 2);
    QCOMPARE(trace["distributedInfo"]["ranks"].size(), std::size_t(2));
    QVERIFY(trace["otherData"]["run_id"] == 7);
    QVERIFY(trace["otherData"]["loom_version"] == "0.1.0");
    std::map<int, std::string> process_names;
    int thread_names = 0;
    for (const json& e : trace["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "process_name") process_names[e["pid"]] = e["args"]["name"];
      if (e["ph"] == "M" && e["name"] == "thread_name") ++thread_names;
    }
    QCOMPARE(process_names.size(), std::size_t(2));
    QCOMPARE(process_names[0], std::string("rank 0 (node0)"));
    QCOMPARE(process_names[1], std::string("rank 1 (node1)"));
    QCOMPARE(thread_names, 4 + 1);  // rank 0: compute, comm, comm #2, host; rank 1: compute
    const json* ar = find_slice(trace, 0, "allreduce");
    QVERIFY(ar);
    QVERIFY((*ar)["tid"] == 1);
    QVERIFY((*ar)["cat"] == "allreduce");
    QVERIFY((*ar)["args"]["bytes"] == 4096);
    QVERIFY(!(*ar)["args"].contains("layer"));
    QVERIFY(find_slice(trace, 0, "forward L1"));  // the plan names no layers
  }

  void slicesNestAndCrossingGetsALane() {
    loom::chrome::ExportStats stats;
    const json trace = loom::chrome::chrome_trace(run_record(), two_ranks(), &stats);
    check_nesting(trace);
    QCOMPARE(stats.extra_lanes, std::int64_t(1));
    QVERIFY(trace["otherData"]["extra_lanes"] == 1);
    // The second all-reduce [60,90) ms keeps its 30 ms, on lane 2 of the comm stream.
    int checked = 0;
    for (const json& e : trace["traceEvents"]) {
      if (e["ph"] != "X" || e["name"] != "allreduce" || ns(e["ts"]) != 60 * kMs) continue;
      QCOMPARE(ns(e["dur"]), 30 * kMs);
      QVERIFY(e["tid"] == 17);
      ++checked;
    }
    bool named = false;
    for (const json& e : trace["traceEvents"])
      named = named || (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 17 && e["args"]["name"] == "comm #2");
    QVERIFY(named);
    QCOMPARE(checked, 1);
    const json* wait = find_slice(trace, 0, "wait");
    QVERIFY(wait);
    QCOMPARE(ns((*wait)["dur"]), std::int64_t(0));  // zero-length slices are kept
  }

  void timesAreRelativeAndAligned() {
    const json trace = loom::chrome::chrome_trace(run_record(), two_ranks());
    QCOMPARE(trace["otherData"]["time_origin_ns"].get<std::int64_t>(), 5 * kS);
    const json* step = find_slice(trace, 0, "step");
    QVERIFY(step);
    QCOMPARE(ns((*step)["ts"]), std::int64_t(0));  // the earliest event starts the trace
    const json* f0 = find_slice(trace, 0, "forward L0");
    const json* f1 = find_slice(trace, 1, "forward L0");
    QVERIFY(f0 && f1);
    QCOMPARE(ns((*f1)["ts"]), 10 * kMs);  // 6.01 s on rank 1 = 5.01 s on rank 0
    QCOMPARE(ns((*f1)["ts"]), ns((*f0)["ts"]));
    QCOMPARE(ns((*f1)["dur"]), 20 * kMs);
  }

  void layerNamesComeFromThePlan() {
    loom::trace::RunRecord run = run_record();
    run.plan_json = R"({"format": "loom-plan/1", "name": "n",
      "model": {"input": [2], "layers": [{"type": "linear", "out": 4, "name": "fc_in"}, {"type": "relu"}]},
      "data": {"source": "synthetic", "kind": "spirals", "classes": 4}, "training": {"steps": 1}})";
    const json trace = loom::chrome::chrome_trace(run, two_ranks());
    QVERIFY(find_slice(trace, 0, "forward fc_in"));
    QVERIFY(find_slice(trace, 0, "forward relu_1"));
    QVERIFY(trace["distributedInfo"]["backend"] == "mpi");
  }

  // Setup spans are named by their phase; descheduled time rides along in the args.
  void setupPhaseAndDescheduledTimeAreShown() {
    auto ranks = two_ranks();
    Event setup = span(EventKind::Setup, Stream::Host, 4 * kS, 4 * kS + 200 * kMs);
    setup.message = static_cast<std::int32_t>(loom::trace::SetupPhase::BandwidthProbe);
    Event wait = span(EventKind::Wait, Stream::Compute, 5 * kS + 95 * kMs, 5 * kS + 99 * kMs);
    wait.descheduled_us = 1500;
    ranks[1].events.push_back(setup);
    ranks[1].events.push_back(wait);
    const json trace = loom::chrome::chrome_trace(run_record(), ranks);
    const json* probe = find_slice(trace, 0, "setup: bandwidth probe");
    QVERIFY(probe);
    QVERIFY(!(*probe)["args"].contains("message"));
    const json* waited = find_slice(trace, 0, "wait");
    QVERIFY(waited);
    QCOMPARE((*waited)["args"]["descheduled_us"].get<int>(), 1500);
  }

  void exportFromStoreWritesTheFile() {
    QTemporaryDir dir;
    auto store = loom::store::RunStore::open(dir.filePath("runs.db").toStdString());
    QVERIFY(store.ok());
    loom::trace::RunRecord run = run_record();
    run.world_size = 3;  // rank 2 never reported: it still gets a process
    const std::int64_t id = *store->create_run(run);
    auto e0 = rank0_events(), e1 = rank1_events();
    QVERIFY(store->append_events(id, 0, e0.data(), e0.size()).ok());
    QVERIFY(store->append_events(id, 1, e1.data(), e1.size()).ok());
    loom::trace::RankRecord r1{1, "node1", "cpu", kS, 0, 0, 1};  // rank 0 has no ranks row
    QVERIFY(store->upsert_rank(id, r1).ok());

    const std::string path = dir.filePath("trace.json").toStdString();
    auto stats = loom::chrome::export_chrome_trace(*store, id, path);
    QVERIFY2(stats.ok(), stats.ok() ? "" : stats.error().describe().c_str());
    QCOMPARE(stats->events, std::int64_t(9));
    QCOMPARE(stats->ranks, 3);
    QVERIFY(!QFile::exists(QString::fromStdString(path + ".tmp")));
    std::ifstream in(path);
    const json trace = json::parse(in, nullptr, /*allow_exceptions=*/false);
    QVERIFY(trace.is_object());
    check_nesting(trace);
    int processes = 0;
    for (const json& e : trace["traceEvents"])
      if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
    QCOMPARE(processes, 3);
    QCOMPARE(ns((*find_slice(trace, 1, "forward L0"))["ts"]), 10 * kMs);

    auto missing = loom::chrome::export_chrome_trace(*store, id + 1, path);
    QVERIFY(!missing.ok());
    QCOMPARE(missing.error().code, loom::ErrorCode::NotFound);
    const std::string bad = dir.filePath("no/such/dir/trace.json").toStdString();
    auto unwritable = loom::chrome::export_chrome_trace(*store, id, bad);
    QVERIFY(!unwritable.ok());
    QVERIFY2(unwritable.error().message.find(bad) != std::string::npos, unwritable.error().message.c_str());
  }

  void messagesBecomeFlows() {
    loom::chrome::ExportStats stats;
    const json trace = loom::chrome::chrome_trace(run_record(), messaging_ranks(), &stats);
    QCOMPARE(stats.flows, std::int64_t(1));
    check_message_flow(trace);

    // The streaming writer emits the same pair.
    QTemporaryDir dir;
    auto store = loom::store::RunStore::open(dir.filePath("runs.db").toStdString());
    QVERIFY(store.ok());
    const std::int64_t id = *store->create_run(run_record());
    for (RankEvents& r : messaging_ranks()) {
      QVERIFY(store->append_events(id, r.record.rank, r.events.data(), r.events.size()).ok());
      QVERIFY(store->upsert_rank(id, r.record).ok());
    }
    const std::string path = dir.filePath("flows.json").toStdString();
    auto written = loom::chrome::export_chrome_trace(*store, id, path);
    QVERIFY2(written.ok(), written.ok() ? "" : written.error().describe().c_str());
    QCOMPARE(written->flows, std::int64_t(1));
    std::ifstream in(path);
    check_message_flow(json::parse(in));
  }

  // Pipeline ids repeat every 4096 steps: a send whose receive was lost (step 0) must not
  // take the receive of the next use of its id (step 4096), nor shift later pairs.
  void repeatedIdsPairByStep() {
    const std::int64_t t = 5 * kS;
    RankEvents r0, r1;
    r0.record.rank = 0;
    r1.record.rank = 1;
    for (int step : {0, 4096, 8192}) {
      Event send = message(EventKind::Send, t + step * kMs, t + step * kMs + 1000, 1, kMsg);
      send.step = step;
      r0.events.push_back(send);
      if (step == 0) continue;  // lost
      Event recv = message(EventKind::Recv, t + step * kMs + 500, t + step * kMs + 2000, 0, kMsg);
      recv.step = step;
      r1.events.push_back(recv);
    }
    const json trace = loom::chrome::chrome_trace(run_record(), {r0, r1});
    auto flows = flows_of(trace);
    QCOMPARE(flows["s"].size(), std::size_t(2));
    for (std::size_t i = 0; i < 2; ++i) {
      const std::int64_t step_ms = (i + 1) * 4096;
      QCOMPARE(ns(flows["s"][i]["ts"]), step_ms * kMs);
      QCOMPARE(flows["f"][i]["id"], flows["s"][i]["id"]);
      QCOMPARE(ns(flows["f"][i]["ts"]), step_ms * kMs + 2000);
    }
  }

  // Parameter server: worker 0's Push arrives as server 1's Recv, server 1's Send as
  // worker 0's Pull. The Pull reuses the Push's message id in the other direction, and a
  // Push from an earlier step has no Recv: neither may pair across.
  void pushPullBecomeFlows() {
    const std::int64_t t = 5 * kS;
    RankEvents worker, server;
    worker.record.rank = 0;
    server.record.rank = 1;
    auto at_step = [](Event e, int step) {
      e.step = step;
      return e;
    };
    worker.events = {span(EventKind::Step, Stream::Host, t, t + 100 * kMs),  // the time origin
                     at_step(message(EventKind::Push, t + 1 * kMs, t + 2 * kMs, 1, 7), 2),
                     at_step(message(EventKind::Push, t + 10 * kMs, t + 11 * kMs, 1, 7), 3),
                     at_step(message(EventKind::Pull, t + 20 * kMs, t + 25 * kMs, 1, 7), 3)};
    server.events = {at_step(message(EventKind::Recv, t + 10 * kMs, t + 12 * kMs, 0, 7), 3),
                     at_step(message(EventKind::Send, t + 21 * kMs, t + 22 * kMs, 0, 7), 3)};
    loom::chrome::ExportStats stats;
    const json trace = loom::chrome::chrome_trace(run_record(), {worker, server}, &stats);
    QCOMPARE(stats.flows, std::int64_t(2));
    auto flows = flows_of(trace);
    QCOMPARE(flows["s"].size(), std::size_t(2));
    std::map<int, std::pair<json, json>> by_sender;  // sender pid -> (start, finish)
    for (std::size_t i = 0; i < 2; ++i) {
      for (const json& f : flows["f"])
        if (f["id"] == flows["s"][i]["id"]) by_sender[flows["s"][i]["pid"].get<int>()] = {flows["s"][i], f};
    }
    QCOMPARE(by_sender.size(), std::size_t(2));
    QCOMPARE(ns(by_sender[0].first["ts"]), 10 * kMs);   // the step-3 Push, not the step-2 one
    QCOMPARE(by_sender[0].second["pid"].get<int>(), 1);
    QCOMPARE(ns(by_sender[0].second["ts"]), 12 * kMs);  // the server's Recv end
    QCOMPARE(ns(by_sender[1].first["ts"]), 21 * kMs);   // the server's Send
    QCOMPARE(by_sender[1].second["pid"].get<int>(), 0);
    QCOMPARE(ns(by_sender[1].second["ts"]), 25 * kMs);  // the worker's Pull end
  }

  void unmatchedSendHasNoFlow() {
    std::vector<RankEvents> ranks = messaging_ranks();
    ranks.pop_back();  // rank 1 and its receive are gone
    loom::chrome::ExportStats stats;
    const json trace = loom::chrome::chrome_trace(run_record(), ranks, &stats);
    QCOMPARE(stats.flows, std::int64_t(0));
    QVERIFY(flows_of(trace).empty());
  }
};

QTEST_GUILESS_MAIN(TestExport)
#include "test_export.moc"
