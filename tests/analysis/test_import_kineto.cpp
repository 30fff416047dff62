// PyTorch trace import: the real 2-rank gloo DDP fixture (tests/data/kineto, made by
// bench/kineto/make_ddp_trace.py; rank 1 gzip) gives 2 ranks, its ProfilerStep#N steps,
// phases and collectives; hand-written snippets cover the newer Kineto form (object,
// distributedInfo, baseTimeNanoseconds, GPU categories, record_param_comms args with
// bytes), bare lists, string pids, no `cat`; malformed and truncated files are refused
// naming the file, and a refused import leaves the store as it was.
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "loom/analysis/import_kineto.h"
#include "loom/store/sqlite_db.h"
#include "loom/test/expect.h"

using loom::ErrorCode;
using loom::kineto::ImportedRun;
using loom::kineto::RankTrace;
using loom::trace::Event;
using loom::trace::EventKind;
using loom::trace::Stream;
using loom::testing::must;

namespace {

const std::string kData = std::string(LOOM_SOURCE_DIR) + "/tests/data/kineto/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

int count(const std::vector<Event>& events, EventKind kind, Stream stream) {
  return int(std::count_if(events.begin(), events.end(), [&](const Event& e) { return e.kind == kind && e.stream == stream; }));
}

// A newer Kineto export of rank 1 of 2 on a GPU: times relative to baseTimeNanoseconds,
// a step with a forward op, a backward op launching a kernel (External id 7), a
// record_param_comms all-reduce of 1000 floats whose NCCL kernel runs later, a memcpy,
// and entries that are not imported (runtime launches, GPU annotations, flows, metadata).
// Its deviceProperties (as Kineto writes them) list two GPUs; its kernels ran on device 0.
const char* kKinetoGpu = R"({
  "schemaVersion": 1,
  "deviceProperties": [
    {"id": 1, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 84929347584, "computeMajor": 9, "computeMinor": 0,
     "maxThreadsPerBlock": 1024, "numSms": 132},
    {"id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42505273344, "computeMajor": 8, "computeMinor": 0,
     "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
     "sharedMemPerBlock": 49152, "numSms": 108}
  ],
  "cupti_version": 24,
  "cuda_runtime_version": 12040,
  "cuda_driver_version": 12020,
  "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 12, "tid": 12, "ts": 100, "dur": 1000},
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 12, "tid": 12, "ts": 110, "dur": 50, "args": {"External id": 5}},
    {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: AddmmBackward0", "pid": 12, "tid": 12,
     "ts": 200, "dur": 100, "args": {"External id": 6}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 12, "tid": 12, "ts": 210, "dur": 20, "args": {"External id": 7}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 12, "tid": 12, "ts": 212, "dur": 5, "args": {"correlation": 70, "External id": 7}},
    {"ph": "X", "cat": "kernel", "name": "sgemm_128x64", "pid": 0, "tid": 7, "ts": 230, "dur": 40, "args": {"correlation": 70, "External id": 7}},
    {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 70, "pid": 12, "tid": 12, "ts": 212},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 70, "pid": 0, "tid": 7, "ts": 230, "bp": "e"},
    {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 12, "tid": 12, "ts": 320, "dur": 30,
     "args": {"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000, "dtype": "Float",
              "Group size": 2, "Seq": 3, "Process Group Name": "0"}},
    {"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce", "pid": 12, "tid": 12, "ts": 322, "dur": 20},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 20, "ts": 400, "dur": 300},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 105, "dur": 3},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#7", "pid": 0, "tid": 7, "ts": 100, "dur": 900},
    {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 12, "tid": 12, "ts": 900, "dur": 80},
    {"ph": "i", "cat": "cpu_instant_event", "name": "marker", "pid": 12, "tid": 12, "ts": 950, "s": "t"}
  ]
})";

// An old export: a bare list, string pid, no `cat`, a broadcast, times from profiler start.
const char* kLegacyList = R"([
  {"name": "ProfilerStep#0", "ph": "X", "ts": 10, "dur": 100, "tid": 1, "pid": "CPU functions", "args": {}},
  {"name": "aten::addmm", "ph": "X", "ts": 12, "dur": 10, "tid": 1, "pid": "CPU functions", "args": {}},
  {"name": "c10d::broadcast_", "ph": "X", "ts": 30, "dur": 5, "tid": "1", "pid": "CPU functions"},
  {"name": "gloo:broadcast", "ph": "X", "ts": 31, "dur": 40, "tid": "worker", "pid": "CPU functions"},
  {"name": "ProfilerStep#1", "ph": "X", "ts": 110, "dur": 100, "tid": 1, "pid": "CPU functions", "args": {}}
])";

// Malformed snippets, each refused below (kept out of the test class: moc misreads raw
// strings there).
const char* kBad0 = R"({"events": []})";
const char* kBad1 = R"({"traceEvents": []})";
const char* kBad2 = R"([{"ph": "X", "name": "a", "ts": "12", "dur": 1, "pid": 1, "tid": 1}])";
const char* kBad3 = R"([{"ph": "X", "name": "a", "ts": 1, "dur": -5, "pid": 1, "tid": 1}])";
const char* kBad4 = R"([{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": [1], "tid": 1}])";
const char* kBad5 = R"([{"name": "a", "ts": 1, "dur": 1}])";
const char* kBad6 = R"([{"ph": "X", "name": "ProfilerStep#x", "ts": 1, "dur": 1}])";
const char* kBad7 = R"([{"ph": "X", "name": "record_param_comms", "ts": 1, "dur": 1,
                                              "args": {"In msg nelems": "many"}}])";
const char* kBad8 = R"({"distributedInfo": {"rank": -1}, "traceEvents": [{"ph": "M"}]})";

}  // namespace

class ImportKinetoTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_.filePath(QString::fromStdString(name)).toStdString();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // Refused with `code`, the message naming the file and containing `what`.
  void expect_refused(const std::vector<std::string>& files, ErrorCode code, const std::string& file, const std::string& what) {
    auto r = loom::kineto::import_kineto_files(files, {});
    QVERIFY2(!r.ok(), what.c_str());
    const std::string message = r.error().describe();
    QVERIFY2(r.error().code == code, message.c_str());
    QVERIFY2(message.find(file) != std::string::npos, message.c_str());
    QVERIFY2(message.find(what) != std::string::npos, message.c_str());
  }

 private slots:
  void realDdpFixtureGivesTwoRanksStepsAndCollectives() {
    const ImportedRun run = must(loom::kineto::import_kineto_files({kData + "rank1.json.gz", kData + "rank0.json"}, {}));
    QCOMPARE(run.ranks.size(), std::size_t(2));
    QCOMPARE(run.run.world_size, 2);
    QCOMPARE(run.run.status, loom::trace::RunStatus::Completed);
    QVERIFY(loom::kineto::is_imported_plan(run.run.plan_json));
    for (int r = 0; r < 2; ++r) {
      QCOMPARE(run.events[std::size_t(r)].first, r);
      const std::vector<Event>& events = run.events[std::size_t(r)].second;
      std::vector<int> steps;
      for (const Event& e : events)
        if (e.kind == EventKind::Step) steps.push_back(e.step);
      QCOMPARE(steps, (std::vector<int>{1, 2, 3, 4}));  // ProfilerStep#1..#4
      // One gradient bucket per step: c10d::allreduce_ issued it, gloo:all_reduce ran it.
      QCOMPARE(count(events, EventKind::AllReduce, Stream::Comm), 4);
      for (EventKind k : {EventKind::Forward, EventKind::Backward, EventKind::Loss, EventKind::Optimizer, EventKind::DataLoad})
        QVERIFY2(count(events, k, Stream::Compute) >= 4, loom::trace::event_kind_name(k).data());
      for (const Event& e : events) {
        QVERIFY(e.end_ns >= e.start_ns);
        QVERIFY(e.step == -1 || (e.step >= 1 && e.step <= 4));
        if (e.kind == EventKind::AllReduce) QVERIFY2(e.step >= 1, "every collective lies in its step");
        // Between steps only the profiler's own step counter runs (aten::zeros).
        if (e.step == -1) QVERIFY(e.kind == EventKind::Forward && e.end_ns - e.start_ns < 1000000);
      }
      QCOMPARE(run.traces[std::size_t(r)].steps, std::int64_t(4));
      QCOMPARE(run.traces[std::size_t(r)].collectives, std::int64_t(4));
    }
    // Older PyTorch files carry no deviceProperties: what the ranks ran on is not recorded.
    QVERIFY(!run.ranks[0].device_info.recorded() && !run.ranks[1].device_info.recorded());
    // Legacy files count from their own profiler start: rank 1 is aligned on collective ends.
    QVERIFY(run.ranks[1].offset_ns != 0);
    QVERIFY(run.ranks[1].uncertainty_ns >= 0 && run.ranks[1].uncertainty_ns < 20000000);
  }

  // A real trace (make_ddp_trace.py --label-layers) whose record_function ranges name each
  // layer's forward as Loom does: each range becomes that layer's forward span, exactly as
  // long as the range, and the rest of the forward stays the whole pass's; nothing overlaps.
  void namedLayerRangesBecomeLayerSpans() {
    const std::string file = kData + "labelled/rank0.json.gz";
    const ImportedRun run = must(loom::kineto::import_kineto_files({file}, {}));
    const std::vector<std::string> names{"flatten_0", "linear_1", "relu_2", "linear_3"};
    QCOMPARE(loom::kineto::imported_layer_names(run.run.plan_json), names);
    const std::vector<Event>& events = run.events[0].second;
    const auto doc = nlohmann::json::parse(must(loom::kineto::read_trace_text(file)));
    std::map<std::string, std::vector<std::int64_t>> range_ns, span_ns;
    for (const auto& e : doc.is_array() ? doc : doc["traceEvents"]) {  // 1.13 writes a bare list
      const std::string name = e.value("name", "");
      if (e.value("ph", "") == "X" && name.starts_with("forward ")) range_ns[name.substr(8)].push_back(std::llround(e["dur"].get<double>() * 1000));
    }
    for (const Event& e : events)
      if (e.layer >= 0) {
        QCOMPARE(e.kind, EventKind::Forward);
        span_ns[names[std::size_t(e.layer)]].push_back(e.end_ns - e.start_ns);
      }
    QCOMPARE(span_ns, range_ns);
    QCOMPARE(range_ns["linear_1"].size(), std::size_t(3));  // one per traced step
    std::vector<const Event*> compute;
    for (const Event& e : events)
      if (e.stream == Stream::Compute) compute.push_back(&e);
    std::sort(compute.begin(), compute.end(), [](const Event* a, const Event* b) { return a->start_ns < b->start_ns; });
    for (std::size_t i = 1; i < compute.size(); ++i) QVERIFY(compute[i]->start_ns >= compute[i - 1]->end_ns);
    QVERIFY(count(events, EventKind::Forward, Stream::Compute) > 3 * 4);  // whole-pass parts stay
  }

  // The innermost named range wins; a name that is only a prefix is no layer.
  void nestedLayerRangesInnermostWins() {
    const char* snippet = R"({"distributedInfo": {"rank": 0}, "traceEvents": [
      {"ph": "X", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
      {"ph": "X", "name": "forward block", "pid": 1, "tid": 1, "ts": 10, "dur": 50},
      {"ph": "X", "name": "forward fc", "pid": 1, "tid": 1, "ts": 20, "dur": 10},
      {"ph": "X", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 21, "dur": 5},
      {"ph": "X", "name": "forward ", "pid": 1, "tid": 1, "ts": 70, "dur": 5}]})";
    const RankTrace t = must(loom::kineto::parse_kineto_trace(snippet, "nested.json", std::nullopt));
    std::vector<std::tuple<std::int64_t, std::int64_t, int>> spans;  // start, end in us; layer
    for (const Event& e : t.events)
      if (e.kind == EventKind::Forward) spans.emplace_back(e.start_ns / 1000, e.end_ns / 1000, e.layer);
    const int fc = int(std::find(t.layer_names.begin(), t.layer_names.end(), "fc") - t.layer_names.begin());
    QCOMPARE(spans, (std::vector<std::tuple<std::int64_t, std::int64_t, int>>{{10, 20, -1}, {20, 30, fc}, {30, 60, -1}, {70, 75, -1}}));
  }

  void kinetoGpuSnippet() {
    const RankTrace t = must(loom::kineto::parse_kineto_trace(kKinetoGpu, "gpu.json", std::nullopt));
    QCOMPARE(t.rank, 1);
    QCOMPARE(t.world_size, 2);
    QCOMPARE(t.backend, std::string("nccl"));
    QVERIFY(t.absolute_clock && t.has_gpu);
    constexpr std::int64_t base = 1700000000000000000;
    std::map<std::pair<EventKind, Stream>, std::vector<Event>> spans;
    for (const Event& e : t.events) spans[{e.kind, e.stream}].push_back(e);
    auto by = [&](EventKind kind, Stream stream) { return spans[{kind, stream}]; };
    QCOMPARE(by(EventKind::Step, Stream::Host).size(), std::size_t(1));
    QCOMPARE(by(EventKind::Step, Stream::Host)[0].start_ns, base + 100000);
    QCOMPARE(by(EventKind::Step, Stream::Host)[0].step, 7);
    // With a GPU the CPU side only launches: its phases sit on the host stream.
    QCOMPARE(by(EventKind::Forward, Stream::Host).size(), std::size_t(1));
    QCOMPARE(by(EventKind::Backward, Stream::Host).size(), std::size_t(1));
    QCOMPARE(by(EventKind::Optimizer, Stream::Host).size(), std::size_t(1));
    // The GEMM kernel takes its launching operator's phase through its External id.
    QCOMPARE(by(EventKind::Backward, Stream::Compute).size(), std::size_t(1));
    QCOMPARE(by(EventKind::Backward, Stream::Compute)[0].start_ns, base + 230000);
    QCOMPARE(by(EventKind::DataLoad, Stream::Comm).size(), std::size_t(1));  // the memcpy
    // record_param_comms and its NCCL kernel: one all-reduce from issue to the kernel's end.
    const auto& ar = by(EventKind::AllReduce, Stream::Comm);
    QCOMPARE(ar.size(), std::size_t(1));
    QCOMPARE(ar[0].bytes, std::int64_t(4000));
    QCOMPARE(ar[0].start_ns, base + 320000);
    QCOMPARE(ar[0].end_ns, base + 700000);
    QCOMPARE(ar[0].step, 7);
    QCOMPARE(t.ignored, std::int64_t(6));  // metadata, launch, GPU annotation, 2 flows, instant
    // The GPU its kernels ran on (pid 0), not the first one listed.
    QCOMPARE(t.device.kind, std::string("gpu"));
    QCOMPARE(t.device.name, std::string("NVIDIA A100-SXM4-40GB"));
    QCOMPARE(t.device.memory_bytes, std::int64_t(42505273344));
    QCOMPARE(t.device.compute_major, 8);
    QCOMPARE(t.device.cuda_runtime, std::string("12.4"));
    QCOMPARE(t.device.cuda_driver, std::string("12.2"));
    QVERIFY(t.device.nccl.empty() && t.device.driver.empty());  // a Kineto file says neither
    // deviceProperties of an unexpected shape is metadata lost, not a refused trace.
    std::string odd = kKinetoGpu;
    odd.replace(odd.find("\"deviceProperties\": ["), 21, "\"deviceProperties\": 7, \"x\": [");
    const RankTrace without = must(loom::kineto::parse_kineto_trace(odd, "gpu.json", std::nullopt));
    QVERIFY(!without.device.recorded());
    QCOMPARE(without.events.size(), t.events.size());
  }

  void legacyBareListWithStringIdsAndNoCat() {
    const RankTrace t = must(loom::kineto::parse_kineto_trace(kLegacyList, "old_3.json", 3));
    QCOMPARE(t.rank, 3);
    QVERIFY(!t.absolute_clock && !t.has_gpu);
    QCOMPARE(t.steps, std::int64_t(2));
    QCOMPARE(count(t.events, EventKind::Broadcast, Stream::Comm), 1);
    QCOMPARE(count(t.events, EventKind::Forward, Stream::Compute), 1);
    for (const Event& e : t.events)
      if (e.kind == EventKind::Broadcast) QCOMPARE(e.end_ns - e.start_ns, std::int64_t(41000));  // 30 .. 71 us
  }

  void rankFromFileName() {
    using loom::kineto::rank_from_file_name;
    QCOMPARE(rank_from_file_name("/x/rank1.json"), std::optional<int>(1));
    QCOMPARE(rank_from_file_name("run_rank_12.pt.trace.json.gz"), std::optional<int>(12));
    QCOMPARE(rank_from_file_name("trace_3.json"), std::optional<int>(3));
    QCOMPARE(rank_from_file_name("host-2.json.gz"), std::optional<int>(2));
    QCOMPARE(rank_from_file_name("trace.json"), std::optional<int>());
    QCOMPARE(rank_from_file_name("rank99999.json"), std::optional<int>());
  }

  void malformedFilesAreRefusedNamingTheFile() {
    const std::string good = slurp(kData + "rank0.json");
    const std::string truncated = write("cut_0.json", good.substr(0, good.size() / 2));
    expect_refused({truncated}, ErrorCode::Corrupt, "cut_0.json", "not valid JSON");
    std::string gz = slurp(kData + "rank1.json.gz");
    expect_refused({write("cut_1.json.gz", gz.substr(0, gz.size() / 2))}, ErrorCode::Corrupt, "cut_1.json.gz", "gzip");
    expect_refused({write("empty.json", "")}, ErrorCode::Corrupt, "empty.json", "empty");
    expect_refused({write("obj.json", kBad0)}, ErrorCode::InvalidArgument, "obj.json", "no traceEvents");
    expect_refused({write("none.json", kBad1)}, ErrorCode::InvalidArgument, "none.json", "no trace events");
    expect_refused({write("ts.json", kBad2)},
                   ErrorCode::InvalidArgument, "ts.json", "traceEvents[0] (a): 'ts'");
    expect_refused({write("dur.json", kBad3)},
                   ErrorCode::InvalidArgument, "dur.json", "'dur'");
    expect_refused({write("pid.json", kBad4)},
                   ErrorCode::InvalidArgument, "pid.json", "'pid'");
    expect_refused({write("ph.json", kBad5)}, ErrorCode::InvalidArgument, "ph.json", "'ph'");
    expect_refused({write("step.json", kBad6)},
                   ErrorCode::InvalidArgument, "step.json", "step number");
    expect_refused({write("nelems.json", kBad7)},
                   ErrorCode::InvalidArgument, "nelems.json", "'In msg nelems'");
    expect_refused({write("info.json", kBad8)},
                   ErrorCode::InvalidArgument, "info.json", "'rank'");
    // Two files that claim the same rank, and files without a rank among several.
    const std::string a = write("a_rank0.json", kLegacyList), b = write("b_rank0.json", kLegacyList);
    expect_refused({a, b}, ErrorCode::InvalidArgument, "b_rank0.json", "is rank 0");
    expect_refused({write("x.json", kLegacyList), write("y.json", kLegacyList)}, ErrorCode::InvalidArgument, "x.json",
                   "does not say its rank");
    expect_refused({kData + "rank0.json", write("gpu_1.json", kKinetoGpu)}, ErrorCode::InvalidArgument, "gpu_1.json",
                   "clocks cannot be matched");
  }

  // A refused import stores nothing; a good one stores one run with every rank's events.
  void nothingHalfImported() {
    auto store = must(loom::store::RunStore::open(dir_.filePath("runs.db").toStdString()));
    const std::string good = slurp(kData + "rank0.json");
    const std::string cut = write("rank1.json", good.substr(0, good.size() - 100));
    QVERIFY(!loom::kineto::import_kineto_files({kData + "rank0.json", cut}, {}).ok());
    QCOMPARE(must(store.list_runs()).size(), std::size_t(0));

    loom::kineto::ImportOptions named;
    named.name = "ddp";
    const ImportedRun run = must(loom::kineto::import_kineto_files({kData + "rank0.json", kData + "rank1.json.gz"}, named));
    const std::int64_t id = must(loom::kineto::store_imported_run(store, run));
    const auto runs = must(store.list_runs());
    QCOMPARE(runs.size(), std::size_t(1));
    QCOMPARE(runs[0].name, std::string("ddp"));
    QCOMPARE(runs[0].status, loom::trace::RunStatus::Completed);
    QCOMPARE(must(store.event_ranks(id)), (std::vector<int>{0, 1}));
    QCOMPARE(must(store.count_events(id)), std::int64_t(run.events[0].second.size() + run.events[1].second.size()));
    QCOMPARE(must(store.load_ranks(id)).size(), std::size_t(2));

    // A write that fails after the run row (a trigger refuses metrics) takes the whole
    // run back with it: one transaction.
    {
      auto db = must(loom::store::Database::open(store.path()));
      QVERIFY(db.exec("CREATE TRIGGER no_metrics BEFORE INSERT ON metrics BEGIN SELECT RAISE(ABORT, 'refused'); END").ok());
    }
    const std::vector<loom::trace::MetricRecord> one_metric{{0, 1, 0, "loss", 1.0}};
    QVERIFY(!store.import_run(run.run, run.ranks, run.events, one_metric).ok());
    QCOMPARE(must(store.list_runs()).size(), std::size_t(1));
    QCOMPARE(must(store.count_events(id + 1)), std::int64_t(0));

    // import_run refuses a running run before writing anything.
    loom::trace::RunRecord running = run.run;
    running.status = loom::trace::RunStatus::Running;
    QVERIFY(!store.import_run(running, run.ranks, run.events, run.metrics).ok());
    QCOMPARE(must(store.list_runs()).size(), std::size_t(1));
  }
};

QTEST_GUILESS_MAIN(ImportKinetoTest)
#include "test_import_kineto.moc"
