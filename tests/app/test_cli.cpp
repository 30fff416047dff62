// loom-cli end to end: validate, run, runs, show --json and export --chrome against a
// fresh run store in a temporary directory, plus the exit codes and messages for bad input.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "cli_runner.h"
#include "loom/core/plan.h"
#include "loom/store/run_store.h"

#include <algorithm>
#include <map>

namespace {

using loom::test::Result;
using loom::test::last_json_line;
using loom::test::run_cli;

const char* kSpiralsPlan = R"({
  "format": "loom-plan/1", "name": "cli-spirals",
  "model": {"input": [2], "layers": [{"type": "linear", "out": 16}, {"type": "tanh"}, {"type": "linear", "out": 3}]},
  "data": {"source": "synthetic", "kind": "spirals", "classes": 3, "train_samples": 640, "test_samples": 128},
  "training": {"batch": 32, "steps": 40, "optimizer": {"type": "adam", "lr": 0.01}, "threads": 1}
})";

}  // namespace

class CliTest : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  QString write(const QString& name, const QByteArray& text) {
    QFile f(dir_.filePath(name));
    f.open(QIODevice::WriteOnly);
    f.write(text);
    return f.fileName();
  }
  QString db() const { return dir_.filePath("runs.db"); }
  QString run_id_;  // the spirals run recorded by runRecordsAndShowsTheRun, reused by export

 private slots:
  void validatePrintsTheModelTable() {
    const Result r = run_cli({"validate", write("ok.json", kSpiralsPlan)});
    QCOMPARE(r.exit_code, 0);
    QVERIFY2(r.out.contains("is valid"), qPrintable(r.out));
    QVERIFY2(r.out.contains("99 parameters"), qPrintable(r.out));  // 2*16+16 + 16*3+3
  }

  void validateReportsEveryErrorWithItsPath() {
    QByteArray bad = kSpiralsPlan;
    bad.replace("\"out\": 16", "\"out\": -4").replace("\"batch\": 32", "\"batch\": \"big\"");
    const Result r = run_cli({"validate", write("bad.json", bad)});
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("/model/layers/0/out"), qPrintable(r.err));
    QVERIFY2(r.err.contains("/training/batch"), qPrintable(r.err));
  }

  void runRecordsAndShowsTheRun() {
    const Result r = run_cli({"run", write("run.json", kSpiralsPlan), "--db", db(), "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonObject summary = last_json_line(r.out);
    for (const char* key : {"id", "status", "plan", "world_size", "steps", "wall_s", "samples_per_s", "final_loss",
                            "test_accuracy", "ranks", "allreduce", "clock", "scaling"}) {
      QVERIFY2(summary.contains(key), key);
    }
    QCOMPARE(summary["status"].toString(), QString("completed"));
    QCOMPARE(summary["ranks"].toArray()[0].toObject()["device"].toString(), QString("cpu"));
    QCOMPARE(summary["steps"].toInt(), 40);
    QCOMPARE(summary["world_size"].toInt(), 1);
    QVERIFY(summary["samples_per_s"].toDouble() > 0);
    const QJsonObject rank = summary["ranks"].toArray().at(0).toObject();
    for (const char* key : {"rank", "compute_s", "comm_s", "optimizer_s", "data_s", "idle_s", "events_recorded",
                            "events_stored", "exposed_comm_s"}) {
      QVERIFY2(rank.contains(key), key);
    }
    QVERIFY(rank["events_recorded"].toInteger() > 0);
    QCOMPARE(rank["events_stored"].toInteger(), rank["events_recorded"].toInteger());
    QVERIFY(rank["compute_s"].toDouble() > 0);

    const Result runs = run_cli({"runs", "--db", db(), "--json"});
    QCOMPARE(runs.exit_code, 0);
    const QJsonArray list = QJsonDocument::fromJson(runs.out.toUtf8()).array();
    QVERIFY(!list.isEmpty());
    QCOMPARE(list.at(0).toObject()["id"].toInteger(), summary["id"].toInteger());

    const QString id = QString::number(summary["id"].toInteger());
    run_id_ = id;
    const Result show = run_cli({"show", id, "--db", db(), "--json"});
    QCOMPARE(show.exit_code, 0);
    const QJsonObject shown = last_json_line(show.out);
    QCOMPARE(shown["final_loss"].toDouble(), summary["final_loss"].toDouble());
    for (const char* key : {"bytes", "count", "seconds", "algbw_gbs", "busbw_gbs", "p2p_gbs", "hidden_fraction"})
      QVERIFY2(shown["allreduce"].toObject().contains(key), key);
    QVERIFY(shown["allreduce"].toObject()["busbw_gbs"].isNull());  // one rank: no bus bandwidth
    QVERIFY(shown["clock"].isArray());
    QVERIFY(shown["scaling"].isNull());  // single-rank runs have no scaling efficiency
    QVERIFY(shown["ranks"].toArray().at(0).toObject().contains("exposed_comm_s"));
    QCOMPARE(shown["plan"].toObject()["name"].toString(), QString("cli-spirals"));
    QVERIFY(!shown.contains("staleness"));  // all-reduce: no updates
    QVERIFY(!shown.contains("divergence"));

    const Result text = run_cli({"show", id, "--db", db()});
    QCOMPARE(text.exit_code, 0);
    QVERIFY(text.out.contains("cli-spirals"));
  }

  // The real run above trained on this machine's CPU: `show` names the CPU model that
  // /proc/cpuinfo names, the plan's one BLAS thread, and --json carries the same identity;
  // the Chrome export copies it beside the rank.
  void showNamesThisMachinesCpu() {
    if (run_id_.isEmpty()) QSKIP("needs the run recorded by runRecordsAndShowsTheRun");
    QFile cpuinfo("/proc/cpuinfo");
    QVERIFY(cpuinfo.open(QIODevice::ReadOnly));
    QString model;
    for (const QByteArray& line : cpuinfo.readAll().split('\n'))
      if (line.startsWith("model name") && model.isEmpty()) model = QString::fromUtf8(line.mid(line.indexOf(':') + 1)).trimmed();
    const Result text = run_cli({"show", run_id_, "--db", db()});
    QCOMPARE(text.exit_code, 0);
    const QString expected = "  device:        rank 0: cpu, " + (model.isEmpty() ? QString() : model + ", ");
    QVERIFY2(text.out.contains(expected), qPrintable(expected + "\nnot in:\n" + text.out));
    QVERIFY2(text.out.contains("1 BLAS thread\n"), qPrintable(text.out));  // "threads": 1
    const QJsonObject info =
        last_json_line(run_cli({"show", run_id_, "--db", db(), "--json"}).out)["ranks"].toArray()[0].toObject()["device_info"].toObject();
    QCOMPARE(info["kind"].toString(), QString("cpu"));
    QCOMPARE(info["name"].toString(), model);
    QCOMPARE(info["blas_threads"].toInt(), 1);
    QVERIFY(info["logical_cores"].toInt() >= 1);
    const QString trace = dir_.filePath("device-trace.json");
    QCOMPARE(run_cli({"export", run_id_, "--chrome", trace, "--db", db()}).exit_code, 0);
    const QJsonObject exported = loom::test::read_json_file(trace);
    QCOMPARE(exported["distributedInfo"]["ranks"][0]["device_info"]["name"].toString(), model);
  }

  // A GPU run, written through the store API as a rank on an H200 writes it (this machine
  // has no GPU; what is tested is that the stored identity reaches the words), beside the
  // real CPU run: `show` and `compare` name the GPU, its memory, driver, CUDA and NCCL.
  void showAndCompareNameAStoredGpu() {
    if (run_id_.isEmpty()) QSKIP("needs the run recorded by runRecordsAndShowsTheRun");
    auto store = loom::store::RunStore::open(db().toStdString());
    QVERIFY(store.ok());
    auto source = store->load_run(run_id_.toLongLong());
    QVERIFY(source.ok());
    loom::trace::RunRecord record = *source;
    record.name = "cli-spirals-h200";
    const std::int64_t gpu_run = *store->create_run(record);
    loom::trace::RankRecord rank{0, "gpu-node", "gpu 0"};
    rank.device_info.kind = "gpu";
    rank.device_info.name = "NVIDIA H200";
    rank.device_info.memory_bytes = 150'011'707'392LL;
    rank.device_info.compute_major = 9;
    rank.device_info.driver = "580.159.04";
    rank.device_info.cuda_driver = "13.0";
    rank.device_info.cuda_runtime = "13.0";
    rank.device_info.nccl = "2.28.3";
    QVERIFY(store->upsert_rank(gpu_run, rank).ok());
    QVERIFY(store->finish_run(gpu_run, loom::trace::RunStatus::Completed, 1.0, 0, "").ok());
    const QString id = QString::number(gpu_run);
    const Result show = run_cli({"show", id, "--db", db()});
    QVERIFY2(show.out.contains("  device:        rank 0: NVIDIA H200, 139.7 GiB, compute 9.0, driver 580.159.04, "
                               "CUDA 13.0, NCCL 2.28.3\n"),
             qPrintable(show.out));
    const Result compare = run_cli({"compare", run_id_, id, "--db", db()});
    QVERIFY2(compare.exit_code == 0, qPrintable(compare.err));
    QVERIFY2(compare.out.contains("one process on cpu; 1 rank") && compare.out.contains("one process on NVIDIA H200; 1 rank"),
             qPrintable(compare.out));
    QVERIFY2(compare.out.contains("             rank 0: NVIDIA H200, 139.7 GiB"), qPrintable(compare.out));
    const QJsonArray runs = last_json_line(run_cli({"compare", run_id_, id, "--db", db(), "--json"}).out)["runs"].toArray();
    QCOMPARE(runs[0].toObject()["device"].toString(), QString("cpu"));
    QCOMPARE(runs[1].toObject()["device"].toString(), QString("NVIDIA H200"));
    QCOMPARE(runs[1].toObject()["devices"].toArray()[0].toObject()["device_info"].toObject()["nccl"].toString(),
             QString("2.28.3"));
    QVERIFY(store->delete_run(gpu_run).ok());  // later tests count this store's runs
  }

  void exportWritesANestedChromeTrace() {
    if (run_id_.isEmpty()) QSKIP("needs the run recorded by runRecordsAndShowsTheRun");
    const QString path = dir_.filePath("trace.json");
    const Result r = run_cli({"export", run_id_, "--chrome", path, "--db", db()});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("from 1 ranks to " + path), qPrintable(r.out));
    const qint64 reported = r.out.section(' ', 1, 1).toLongLong();  // "wrote N events ..."
    QVERIFY(reported > 0);

    QFile file(path);
    QVERIFY(file.open(QIODevice::ReadOnly));
    QJsonParseError error{};
    const QJsonObject trace = QJsonDocument::fromJson(file.readAll(), &error).object();
    QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
    QCOMPARE(trace["otherData"].toObject()["run_id"].toInteger(), run_id_.toLongLong());
    bool named_rank0 = false;
    qint64 slices = 0;
    std::map<std::pair<int, int>, std::vector<std::pair<qint64, qint64>>> threads;
    for (const QJsonValue& v : trace["traceEvents"].toArray()) {
      const QJsonObject e = v.toObject();
      if (e["ph"] == "M" && e["name"] == "process_name" && e["pid"].toInt() == 0) named_rank0 = true;
      if (e["ph"] != "X") continue;
      ++slices;
      QCOMPARE(e["pid"].toInt(), 0);
      QVERIFY(e["tid"].toInt() >= 0 && e["tid"].toInt() <= 2);
      const qint64 ts = qRound64(e["ts"].toDouble() * 1e3), dur = qRound64(e["dur"].toDouble() * 1e3);
      QVERIFY(ts >= 0 && dur >= 0);
      threads[{e["pid"].toInt(), e["tid"].toInt()}].emplace_back(ts, ts + dur);
    }
    QVERIFY(named_rank0);
    QCOMPARE(slices, reported);
    for (auto& [thread, spans] : threads) {  // parents first, then every child inside its parent
      std::stable_sort(spans.begin(), spans.end(),
                       [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
      std::vector<qint64> open;
      for (const auto& [start, end] : spans) {
        while (!open.empty() && open.back() <= start) open.pop_back();
        QVERIFY2(open.empty() || end <= open.back(), "a slice crosses its parent");
        open.push_back(end);
      }
    }

    const Result eq = run_cli({"export", run_id_, "--chrome=" + dir_.filePath("eq.json"), "--db", db()});
    QCOMPARE(eq.exit_code, 0);
    QVERIFY(QFile::exists(dir_.filePath("eq.json")));
  }

  void exportErrors() {
    const Result unknown = run_cli({"export", "99999", "--chrome", dir_.filePath("x.json"), "--db", db()});
    QCOMPARE(unknown.exit_code, 2);
    QVERIFY2(unknown.err.contains("99999") && unknown.err.contains("loom-cli runs"), qPrintable(unknown.err));
    const Result no_file = run_cli({"export", "1", "--db", db()});
    QCOMPARE(no_file.exit_code, 2);
    QVERIFY2(no_file.err.contains("usage"), qPrintable(no_file.err));
    if (run_id_.isEmpty()) QSKIP("needs the run recorded by runRecordsAndShowsTheRun");
    const QString bad = dir_.filePath("no/such/dir/trace.json");
    const Result unwritable = run_cli({"export", run_id_, "--chrome", bad, "--db", db()});
    QCOMPARE(unwritable.exit_code, 1);
    QVERIFY2(unwritable.err.contains(bad), qPrintable(unwritable.err));
  }

  // A dataset path that does not exist is a plan error, found before anything starts:
  // exit 2 naming the field and the path, and no run stored.
  void missingDatasetIsRefusedAtValidation() {
    const QByteArray plan = R"({"format": "loom-plan/1", "name": "no-data",
      "model": {"input": [1, 28, 28], "layers": [{"type": "flatten"}, {"type": "linear", "out": 10}]},
      "data": {"source": "fashion-mnist", "path": "/nonexistent/fmnist"}, "training": {"steps": 5}})";
    const Result r = run_cli({"run", write("nodata.json", plan), "--db", db(), "--json"});
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("/data/path: '/nonexistent/fmnist' does not exist"), qPrintable(r.err));
    QVERIFY2(r.err.contains("apt-get install dataset-fashion-mnist"), qPrintable(r.err));
    const Result validated = run_cli({"validate", write("nodata.json", plan)});
    QCOMPARE(validated.exit_code, 2);
  }

  // An ssp run written straight into a store (no training needed): `show` reports its
  // staleness and parameter divergence, and `show --json` carries them under their keys.
  void showReportsStalenessAndDivergence() {
    loom::Plan plan = loom::default_plan();
    plan.parallel.data_parallel = 2;
    plan.parallel.sync.mode = loom::SyncMode::Ssp;
    plan.parallel.sync.bound = 2;
    plan.parallel.devices.assign(std::size_t(loom::world_size(plan)), loom::DeviceSpec{});
    auto store = loom::store::RunStore::open(db().toStdString());
    QVERIFY(store.ok());
    loom::trace::RunRecord run = loom::store::new_run_record(plan, "test");
    const std::int64_t id = *store->create_run(run);
    // Worker 0: staleness 0, 1, 2, 3; worker 1: 4.
    std::vector<loom::trace::UpdateRecord> updates;
    for (int i = 0; i < 4; ++i) updates.push_back({0, 0, i, 10, 10 + i, i, i});
    updates.push_back({1, 0, 0, 6, 10, 4, 9});
    QVERIFY(store->append_updates(id, updates).ok());
    QVERIFY(store->append_metrics(id, {{0, 0, 1, "param_divergence", 1.0}, {0, 1, 2, "param_divergence", 3.0}}).ok());
    QVERIFY(store->finish_run(id, loom::trace::RunStatus::Completed, 1.0, 64, "").ok());

    const Result json = run_cli({"show", QString::number(id), "--db", db(), "--json"});
    QCOMPARE(json.exit_code, 0);
    const QJsonObject shown = last_json_line(json.out);
    const QJsonObject st = shown["staleness"].toObject();
    QCOMPARE(st["mode"].toString(), QString("ssp"));
    QCOMPARE(st["bound"].toInt(), 2);
    const QJsonObject overall = st["overall"].toObject();
    QCOMPARE(overall["mean"].toDouble(), 2.0);
    QCOMPARE(overall["p50"].toDouble(), 2.0);  // nearest rank: 3rd of 5
    QCOMPARE(overall["p95"].toDouble(), 4.0);
    QCOMPARE(overall["max"].toInt(), 4);
    const QJsonArray workers = st["workers"].toArray();
    QCOMPARE(workers.size(), 2);
    for (const char* key : {"rank", "updates", "mean", "p50", "p95", "max", "wait_s"})
      QVERIFY2(workers[0].toObject().contains(key), key);
    QCOMPARE(workers[0].toObject()["updates"].toInt(), 4);
    QCOMPARE(workers[0].toObject()["p50"].toDouble(), 1.0);
    QCOMPARE(workers[1].toObject()["rank"].toInt(), 1);
    QCOMPARE(workers[1].toObject()["mean"].toDouble(), 4.0);
    const QJsonObject divergence = shown["divergence"].toObject();
    QCOMPARE(divergence["count"].toInt(), 2);
    QCOMPARE(divergence["mean"].toDouble(), 2.0);
    QCOMPARE(divergence["last"].toDouble(), 3.0);

    const Result text = run_cli({"show", QString::number(id), "--db", db()});
    QCOMPARE(text.exit_code, 0);
    for (const char* part : {"Staleness (ssp): mean 2.00, p50 2, p95 4, max 4 (bound 2)", "wait_s",
                             "divergence:    2 samples, last 3, mean 2"})
      QVERIFY2(text.out.contains(part), qPrintable(text.out));
  }

  // `--help` anywhere after a command prints that command's usage to stdout and exits 0.
  // Plans that once crashed `validate` or exhausted memory, each given to loom-cli under a
  // 1 GiB address-space limit: every one exits 2 naming its field, within seconds.
  void absurdPlansExit2UnderAMemoryLimit() {
    const QJsonObject base = loom::test::read_json_file(QString(LOOM_SOURCE_DIR) + "/resources/plans/gpipe_mlp.json");
    auto with = [&](const QString& section, const QString& key, const QJsonValue& value) {
      QJsonObject plan = base, part = plan[section].toObject();
      part[key] = value;
      plan[section] = part;
      return QJsonDocument(plan).toJson();
    };
    QJsonObject huge_stage = base;
    QJsonObject model = huge_stage["model"].toObject();
    QJsonArray layers = model["layers"].toArray();
    QJsonObject layer = layers[1].toObject();
    layer["stage"] = 2147483647;
    layers[1] = layer;
    model["layers"] = layers;
    huge_stage["model"] = model;
    QJsonObject wide = huge_stage;
    layer["stage"] = 0;
    layer["out"] = 16000000;  // within the per-layer limit, 225 GiB with Adam: not this machine
    layers[1] = layer;
    model["layers"] = layers;
    wide["model"] = model;
    const std::vector<std::pair<QByteArray, QString>> cases{
        {QJsonDocument(huge_stage).toJson(), "/model/layers/1/stage"},
        {with("parallel", "stages", 2000000000), "/parallel/stages"},
        {with("parallel", "data_parallel", 2000000000), "/parallel/data_parallel"},
        {with("training", "batch", QJsonValue(qint64(1) << 62)), "/training/batch"},
        {QJsonDocument(wide).toJson(), "/model: a rank of stage 0 needs about"},
        {"{\"format\": \"loom-plan/1\", \"model\": " + QByteArray(200000, '[') + QByteArray(200000, ']') + "}",
         "(document): the document nests"},
    };
    for (const auto& [text, expected] : cases) {
      QProcess p;
      p.setChildProcessModifier([] {
        const rlimit limit{1ull << 30, 1ull << 30};
        ::setrlimit(RLIMIT_AS, &limit);
      });
      p.start(LOOM_CLI, {"validate", write("absurd.json", text)});
      QVERIFY(p.waitForFinished(30000));
      const QString err = QString::fromUtf8(p.readAllStandardError());
      QCOMPARE(p.exitStatus(), QProcess::NormalExit);
      QCOMPARE(p.exitCode(), 2);
      QVERIFY2(err.contains(expected), qPrintable(err));
    }
  }

  // Plan files that are not small text files are refused before they are read, with exit
  // 2, under a 1 GiB address-space limit, within 2 s: a 2 GB (sparse) file, /dev/zero, a
  // FIFO nobody writes (validate and run would block on it), and text after a NUL byte.
  void fileThatIsNoPlanIsRefusedUnread() {
    QTemporaryDir dir;
    const QString big = dir.filePath("big.json"), fifo = dir.filePath("plan.fifo"), nul = dir.filePath("nul.json");
    QFile sparse(big);
    QVERIFY(sparse.open(QIODevice::WriteOnly));
    sparse.write("{");
    sparse.close();
    QVERIFY(::truncate(QFile::encodeName(big).constData(), off_t(2) << 30) == 0);
    QVERIFY(::mkfifo(QFile::encodeName(fifo).constData(), 0600) == 0);
    const QByteArray plan = QJsonDocument(loom::test::read_json_file(QString(LOOM_SOURCE_DIR) +
                                                                     "/resources/plans/mlp_fashion.json")).toJson();
    QFile f(nul);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(plan + QByteArray(1, '\0') + "garbage");
    f.close();
    const std::vector<std::pair<QString, QString>> cases{{big, "bytes; a plan is at most 16 MiB"},
                                                         {"/dev/zero", "is not a regular file"},
                                                         {fifo, "is not a regular file"},
                                                         {nul, "holds a NUL byte at offset"}};
    for (const auto& [path, expected] : cases) {
      for (const char* command : {"validate", "run"}) {
        QProcess p;
        p.setChildProcessModifier([] {
          const rlimit limit{1ull << 30, 1ull << 30};
          ::setrlimit(RLIMIT_AS, &limit);
        });
        QElapsedTimer timer;
        timer.start();
        p.start(LOOM_CLI, {command, path, "--db", db()});
        QVERIFY2(p.waitForFinished(10000), qPrintable(path));
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QVERIFY2(p.exitCode() == 2, qPrintable(QString("%1 %2: exit %3: %4").arg(command, path).arg(p.exitCode()).arg(err)));
        QVERIFY2(err.contains(expected), qPrintable(err));
        QVERIFY2(timer.elapsed() < 2000, qPrintable(QString("%1 ms").arg(timer.elapsed())));
      }
    }
  }

  void helpOnEveryCommand() {
    for (const char* command : {"validate", "run", "runs", "show", "compare", "rename", "tag", "delete", "export",
                                "resume"}) {
      for (const char* flag : {"--help", "-h"}) {
        const Result r = run_cli({command, flag});
        QVERIFY2(r.exit_code == 0, qPrintable(QString("%1 %2: %3").arg(command, flag, r.err)));
        QVERIFY2(r.out.startsWith(QString("usage: loom-cli ") + command), qPrintable(r.out));
        QVERIFY2(r.err.isEmpty(), qPrintable(r.err));
      }
    }
    const Result late = run_cli({"run", "no-such-plan.json", "--db", db(), "--help"});
    QCOMPARE(late.exit_code, 0);  // nothing is run or opened
    QVERIFY(late.out.contains("--json"));
    const Result top = run_cli({"--help"});
    QCOMPARE(top.exit_code, 0);
    QVERIFY(top.out.contains("<command> --help"));
    const Result bad = run_cli({"runs", "--bogus"});
    QCOMPARE(bad.exit_code, 2);
    QVERIFY2(bad.err.contains("unknown option '--bogus'") && bad.err.contains("usage: loom-cli runs"),
             qPrintable(bad.err));
    QCOMPARE(run_cli({"frobnicate", "--help"}).exit_code, 2);
  }

  // No silent substitution. No build has the NCCL communicator yet: an nccl plan is refused
  // before anything runs, naming the field. A gpu device is refused where the build has no
  // CUDA backend; in a CUDA build it is accepted and opened at the run's start: on a
  // machine without a usable GPU (this project's) the run fails there with CUDA's error
  // and a hint and is stored as failed; with a GPU it trains.
  void gpuAndNcclPlansFollowTheBuild() {
    const QString fresh = dir_.filePath("gpu.db");
    QByteArray gpu = kSpiralsPlan;
    gpu.replace("\"threads\": 1}", "\"threads\": 1},\n \"parallel\": {\"devices\": [{\"kind\": \"gpu\", \"gpu\": 0}]}");
    QByteArray nccl = kSpiralsPlan;
    nccl.replace("\"threads\": 1}", "\"threads\": 1},\n \"parallel\": {\"backend\": \"nccl\"}");
    auto refused = [&](const QByteArray& text, const QString& expected) {
      const QString file = write("refused.json", text);
      for (const char* command : {"validate", "run"}) {
        const Result r = run_cli({command, file, "--db", fresh});
        QVERIFY2(r.exit_code == 2, qPrintable(QString("%1: exit %2\n%3").arg(command).arg(r.exit_code).arg(r.err)));
        QVERIFY2(r.err.contains(expected), qPrintable(r.err));
        QVERIFY2(r.err.contains("nothing was run"), qPrintable(r.err));
      }
    };
    // The spirals plan's cpu device: an NCCL build names the device, any other the backend.
    refused(nccl, loom::this_build().nccl ? "/parallel/devices/0/kind: the nccl backend needs gpu devices"
                                          : "/parallel/backend: this build has no NCCL communicator");
    const auto stored = [&] { return QJsonDocument::fromJson(run_cli({"runs", "--db", fresh, "--json"}).out.toUtf8()).array(); };
    QCOMPARE(stored().size(), 0);
    if (!loom::this_build().cuda) {
      refused(gpu, "/parallel/devices/0/kind: this build has no CUDA support");
      QCOMPARE(stored().size(), 0);
      return;
    }
    const QString file = write("gpu.json", gpu);
    const Result checked = run_cli({"validate", file});
    QVERIFY2(checked.exit_code == 0, qPrintable(checked.err));
    const Result r = run_cli({"run", file, "--db", fresh});
    const QJsonArray runs = stored();
    QCOMPARE(runs.size(), 1);
    if (r.exit_code == 0) {  // a machine with a GPU: `show` names it as CUDA does
      QCOMPARE(runs[0].toObject()["status"].toString(), QString("completed"));
      const Result show = run_cli({"show", QString::number(runs[0].toObject()["id"].toInteger()), "--db", fresh});
      QVERIFY2(show.out.contains("  device:        rank 0: NVIDIA "), qPrintable(show.out));
      return;
    }
    QVERIFY2(r.err.contains("cannot open gpu 0: cudaSetDevice"), qPrintable(r.err));
    QVERIFY2(r.err.contains("hint: check the driver with nvidia-smi"), qPrintable(r.err));
    QCOMPARE(runs[0].toObject()["status"].toString(), QString("failed"));
    const Result shown = run_cli({"show", QString::number(runs[0].toObject()["id"].toInt()), "--db", fresh, "--json"});
    const QJsonObject summary = last_json_line(shown.out);
    QCOMPARE(summary["ranks"].toArray()[0].toObject()["device"].toString(), QString("gpu 0"));
  }

  // `runs` prints names whole, however long, and each run's last test accuracy.
  void runsShowsWholeNamesAndAccuracy() {
    const QString file = dir_.filePath("names.db");
    auto store = loom::store::RunStore::open(file.toStdString());
    QVERIFY(store.ok());
    loom::Plan plan = loom::default_plan();
    plan.name = "a-rather-long-plan-name-that-used-to-be-cut-at-twenty";
    const std::int64_t long_id = *store->create_run(loom::store::new_run_record(plan, "test"));
    QVERIFY(store->append_metrics(long_id, {{0, 9, 1, "test_accuracy", 0.5}, {0, 19, 2, "test_accuracy", 0.875}}).ok());
    QVERIFY(store->finish_run(long_id, loom::trace::RunStatus::Completed, 2.0, 640, "").ok());
    plan.name = "caf\u00e9";
    const std::int64_t short_id = *store->create_run(loom::store::new_run_record(plan, "test"));
    QVERIFY(store->finish_run(short_id, loom::trace::RunStatus::Failed, 1.0, 0, "boom").ok());

    const Result text = run_cli({"runs", "--db", file});
    QCOMPARE(text.exit_code, 0);
    const QStringList lines = text.out.split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 3);
    QVERIFY2(lines[0].contains("test acc"), qPrintable(text.out));
    const QString long_line = lines[1].contains("long") ? lines[1] : lines[2];
    const QString short_line = lines[1].contains("long") ? lines[2] : lines[1];
    QVERIFY2(long_line.contains("a-rather-long-plan-name-that-used-to-be-cut-at-twenty  "), qPrintable(text.out));
    QVERIFY2(long_line.trimmed().endsWith("87.50%"), qPrintable(text.out));
    QVERIFY2(short_line.trimmed().endsWith("-"), qPrintable(text.out));
    // Columns line up: the status starts at the same character on every line.
    QCOMPARE(long_line.indexOf("completed"), short_line.indexOf("failed"));
    QCOMPARE(lines[0].indexOf("status"), long_line.indexOf("completed"));

    const Result json = run_cli({"runs", "--db", file, "--json"});
    QCOMPARE(json.exit_code, 0);
    std::map<qint64, QJsonObject> by_id;
    for (const auto& v : QJsonDocument::fromJson(json.out.toUtf8()).array()) by_id[v.toObject()["id"].toInteger()] = v.toObject();
    QCOMPARE(by_id[long_id]["test_accuracy"].toDouble(), 0.875);
    QVERIFY(by_id[short_id]["test_accuracy"].isNull());
    QCOMPARE(by_id[long_id]["name"].toString(), QString("a-rather-long-plan-name-that-used-to-be-cut-at-twenty"));
  }

  // A stored run says that its ranks shared cores (the host's metrics), in text and JSON.
  void showSaysAStoredRunWasOversubscribed() {
    loom::Plan plan = loom::default_plan();
    plan.parallel.data_parallel = 4;
    plan.parallel.devices.assign(4, loom::DeviceSpec{});
    auto store = loom::store::RunStore::open(db().toStdString());
    QVERIFY(store.ok());
    const std::int64_t over = *store->create_run(loom::store::new_run_record(plan, "test"));
    QVERIFY(store->append_metrics(over, {{0, -1, 0, "oversubscribed_ranks", 4}, {0, -1, 0, "oversubscribed_cores", 2}}).ok());
    QVERIFY(store->finish_run(over, loom::trace::RunStatus::Completed, 1.0, 64, "").ok());
    const std::int64_t fine = *store->create_run(loom::store::new_run_record(plan, "test"));
    QVERIFY(store->finish_run(fine, loom::trace::RunStatus::Completed, 1.0, 64, "").ok());

    const Result text = run_cli({"show", QString::number(over), "--db", db()});
    QCOMPARE(text.exit_code, 0);
    QVERIFY2(text.out.contains("oversubscribed: 4 ranks shared 2 cores on one machine: ranks took turns"),
             qPrintable(text.out));
    const Result json = run_cli({"show", QString::number(over), "--db", db(), "--json"});
    QCOMPARE(last_json_line(json.out)["oversubscription"].toObject()["ranks"].toInt(), 4);
    QCOMPARE(last_json_line(json.out)["oversubscription"].toObject()["cores"].toInt(), 2);
    const Result plain = run_cli({"show", QString::number(fine), "--db", db()});
    QVERIFY(!plain.out.contains("oversubscribed"));
    QVERIFY(last_json_line(run_cli({"show", QString::number(fine), "--db", db(), "--json"}).out)["oversubscription"].isNull());
  }

  // Two real runs of the spirals plan, the second with twice the batch: compare --json
  // names both, every metric row has one value per run with ratios against the first, the
  // step-time row marks the faster run, and the phase diff lines up the same layers.
  void compareTwoRealRuns() {
    QByteArray bigger = kSpiralsPlan;
    bigger.replace("\"batch\": 32", "\"batch\": 64");
    bigger.replace("cli-spirals", "cli-spirals-64");
    const Result a = run_cli({"run", write("a.json", kSpiralsPlan), "--db", db(), "--json"});
    const Result b = run_cli({"run", write("b.json", bigger), "--db", db(), "--json"});
    QVERIFY2(a.exit_code == 0 && b.exit_code == 0, qPrintable(a.err + b.err));
    const QString id_a = QString::number(last_json_line(a.out)["id"].toInteger());
    const QString id_b = QString::number(last_json_line(b.out)["id"].toInteger());
    const Result r = run_cli({"compare", id_a, id_b, "--db", db(), "--json", "--target-accuracy", "0.3"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonObject c = last_json_line(r.out);
    const QJsonArray runs = c["runs"].toArray();
    QCOMPARE(runs.size(), 2);
    QCOMPARE(QString::number(runs[0].toObject()["id"].toInteger()), id_a);
    QCOMPARE(runs[1].toObject()["name"].toString(), QString("cli-spirals-64"));
    QCOMPARE(runs[0].toObject()["mode"].toString(), QString("one process"));
    std::map<QString, QJsonObject> metrics;
    for (const auto& v : c["metrics"].toArray()) metrics[v.toObject()["key"].toString()] = v.toObject();
    for (const char* key : {"step_time_median_ms", "step_time_p95_ms", "samples_per_s", "compute_ms", "idle_ms",
                            "final_loss", "test_accuracy_pct", "load_balance_pct", "time_to_target_s"}) {
      QVERIFY2(metrics.count(key), key);
      QCOMPARE(metrics[key]["values"].toArray().size(), 2);
    }
    const QJsonObject step = metrics["step_time_median_ms"];
    const double step_a = step["values"][0].toDouble(), step_b = step["values"][1].toDouble();
    QVERIFY(step_a > 0 && step_b > 0);
    QCOMPARE(step["ratio"][0].toDouble(), 1.0);
    QVERIFY(std::abs(step["ratio"][1].toDouble() - step_b / step_a) < 1e-9);
    QCOMPARE(step["best"].toInt(), step_a < step_b ? 0 : 1);
    QCOMPARE(step["better"].toString(), QString("lower"));
    QVERIFY(!metrics.count("staleness_p50"));  // applies to neither run: left out
    QCOMPARE(metrics["path_bubble_ms"]["values"][0].toDouble(-1), 0.0);  // no stages: no fill and drain
    bool forward_rows = false;
    for (const auto& v : c["phases"].toArray()) {
      const QJsonObject row = v.toObject();
      if (row["role"] != "worker" || !row["phase"].toString().startsWith("forward ")) continue;
      forward_rows = true;
      QVERIFY(row["median_ms"][0].toDouble() > 0 && row["median_ms"][1].toDouble() > 0);
      QCOMPARE(row["samples"][0].toInt(), 39);  // 40 steps less the warm-up step
    }
    QVERIFY(forward_rows);
    const Result ranged = run_cli({"compare", id_a, id_b, "--db", db(), "--json", "--steps", "10:20"});
    for (const auto& v : last_json_line(ranged.out)["phases"].toArray())
      QCOMPARE(v.toObject()["samples"][0].toInt(), 10);
    const Result text = run_cli({"compare", id_a, id_b, "--db", db()});
    QVERIFY2(text.out.contains("B/A") && text.out.contains("step time, median") && text.out.contains("phase diff"),
             qPrintable(text.out));
    for (const QStringList& bad : {QStringList{"compare", id_a}, QStringList{"compare", id_a, id_a},
                                   QStringList{"compare", id_a, "9999"}, QStringList{"compare", id_a, "x"},
                                   QStringList{"compare", id_a, id_b, "--steps", "20:10"},
                                   QStringList{"compare", id_a, id_b, "--target-accuracy", "-1"}}) {
      const Result e = run_cli(bad + QStringList{"--db", db()});
      QVERIFY2(e.exit_code == 2, qPrintable(bad.join(' ') + ": " + e.err));
      QVERIFY2(e.err.startsWith("loom-cli: "), qPrintable(e.err));
    }
  }

  // The run browser's edits from the terminal on a real run: tags and a new name show in
  // `runs --json`; delete without --yes (no terminal) refuses and keeps the run; with
  // --yes the run is gone and `show` says so.
  void renameTagAndDeleteARun() {
    const Result r = run_cli({"run", write("edit.json", kSpiralsPlan), "--db", db(), "--json"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QString id = QString::number(last_json_line(r.out)["id"].toInteger());
    QCOMPARE(run_cli({"tag", id, "baseline", "adam", "--db", db()}).exit_code, 0);
    QCOMPARE(run_cli({"rename", id, "spirals baseline", "--db", db()}).exit_code, 0);
    const Result bad = run_cli({"tag", id, "a,b", "--db", db()});
    QCOMPARE(bad.exit_code, 2);
    QVERIFY2(bad.err.contains("tag 'a,b'"), qPrintable(bad.err));
    auto find = [&]() {
      const QJsonArray runs = QJsonDocument::fromJson(run_cli({"runs", "--db", db(), "--json"}).out.toUtf8()).array();
      for (const auto& v : runs)
        if (QString::number(v.toObject()["id"].toInteger()) == id) return v.toObject();
      return QJsonObject();
    };
    QJsonObject listed = find();
    QCOMPARE(listed["name"].toString(), QString("spirals baseline"));
    QCOMPARE(listed["tags"].toArray(), (QJsonArray{"adam", "baseline"}));
    QCOMPARE(run_cli({"tag", id, "--clear", "--db", db()}).exit_code, 0);
    QVERIFY(find()["tags"].toArray().isEmpty());

    const Result refused = run_cli({"delete", id, "--db", db()});  // stdin is not a terminal here
    QCOMPARE(refused.exit_code, 2);
    QVERIFY2(refused.err.contains("--yes"), qPrintable(refused.err));
    QVERIFY(!find().isEmpty());
    const Result deleted = run_cli({"delete", id, "--yes", "--db", db()});
    QVERIFY2(deleted.exit_code == 0, qPrintable(deleted.err));
    QVERIFY(find().isEmpty());
    QCOMPARE(run_cli({"show", id, "--db", db()}).exit_code, 2);
    QCOMPARE(run_cli({"delete", id, "--yes", "--db", db()}).exit_code, 2);
    QCOMPARE(run_cli({"rename", id, "--db", db()}).exit_code, 2);  // no name
  }

  void badArgumentsAndUnknownRuns() {
    QCOMPARE(run_cli({"frobnicate"}).exit_code, 2);
    QCOMPARE(run_cli({"show", "abc", "--db", db()}).exit_code, 2);
    const Result missing = run_cli({"show", "99999", "--db", db()});
    QCOMPARE(missing.exit_code, 2);
    QVERIFY(missing.err.contains("99999"));
    const Result garbage = run_cli({"runs", "--db", write("garbage.db", "this is not a database")});
    QCOMPARE(garbage.exit_code, 1);
    QVERIFY2(garbage.err.contains("garbage.db"), qPrintable(garbage.err));
  }
};

QTEST_GUILESS_MAIN(CliTest)
#include "test_cli.moc"
