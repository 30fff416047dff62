// `loom-cli predict` and `loom-cli calibration` end to end: with an empty store the
// prediction names every cost it lacks (exit 1); after one real run of the spirals plan
// it predicts that plan, with its layers by name, close to what the run measured; a plan
// it does not cover is refused with exit 2.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "cli_runner.h"
#include "loom/core/plan.h"

namespace {

using loom::test::Result;
using loom::test::last_json_line;
using loom::test::run_cli;

const char* kSpiralsPlan = R"({
  "format": "loom-plan/1", "name": "cli-spirals",
  "model": {"input": [2], "layers": [{"type": "linear", "out": 64}, {"type": "tanh"}, {"type": "linear", "out": 3}]},
  "data": {"source": "synthetic", "kind": "spirals", "classes": 3, "train_samples": 6400, "test_samples": 128},
  "training": {"batch": 64, "steps": 300, "optimizer": {"type": "adam", "lr": 0.01}, "threads": 1}
})";

const char* kParameterServerPlan = R"({
  "format": "loom-plan/1", "name": "cli-ps",
  "model": {"input": [2], "layers": [{"type": "linear", "out": 3}]},
  "data": {"source": "synthetic", "kind": "spirals", "classes": 3, "train_samples": 640, "test_samples": 128},
  "training": {"batch": 32, "steps": 20, "threads": 1},
  "parallel": {"devices": [{"kind": "cpu"}, {"kind": "cpu"}, {"kind": "cpu"}], "data_parallel": 2,
               "sync": {"mode": "parameter_server"}}
})";

// Every kind of tensor the pipeline trainer keeps: a convolution's scratch, a max-pool's
// argmax, a dropout's mask, a parallel block split over the two stages (the block's input
// sent to stage 1, a branch's gradient sent back, the concatenation on stage 1), and
// GPipe's four micro-batches in flight.
const char* kSplitPipelinePlan = R"({
  "format": "loom-plan/1", "name": "cli-split-pipeline",
  "model": {"input": [1, 28, 28], "layers": [
    {"type": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1, "stage": 0}, {"type": "relu", "stage": 0},
    {"type": "maxpool2d", "kernel": 2, "stage": 0},
    {"type": "parallel", "stage": 0, "branches": [
      {"layers": [{"type": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1}, {"type": "relu"}]},
      {"stage": 1, "layers": [{"type": "dropout", "p": 0.1}, {"type": "conv2d", "out_channels": 2, "kernel": 5, "padding": 2}]}]},
    {"type": "flatten", "stage": 1}, {"type": "linear", "out": 10, "stage": 1}]},
  "data": {"source": "fashion-mnist", "train_limit": 640, "test_limit": 64},
  "training": {"batch": 64, "steps": 8, "eval_every": 0, "optimizer": {"type": "momentum", "lr": 0.01, "momentum": 0.9}},
  "parallel": {"stages": 2, "microbatches": 4, "schedule": "gpipe", "devices": [{"kind": "cpu"}, {"kind": "cpu"}]}
})";

}  // namespace

class CliPredictTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString db() const { return dir_.filePath("runs.db"); }
  QString write(const QString& name, const QByteArray& bytes) {
    QFile f(dir_.filePath(name));
    f.open(QIODevice::WriteOnly);
    f.write(bytes);
    return f.fileName();
  }

 private slots:
  void predictsFromTheStoreOnly() {
    const QString plan = write("spirals.json", kSpiralsPlan);
    const Result empty = run_cli({"predict", plan, "--db", db()});
    QCOMPARE(empty.exit_code, 1);
    QVERIFY2(empty.err.contains("no calibration for") && empty.err.contains("forward linear 2->64 @cpu 1t"), qPrintable(empty.err));

    const Result ran = run_cli({"run", plan, "--db", db(), "--json"});
    QVERIFY2(ran.exit_code == 0, qPrintable(ran.err));
    const QString id = QString::number(last_json_line(ran.out)["id"].toInteger());
    const Result predicted = run_cli({"predict", plan, "--db", db(), "--json"});
    QVERIFY2(predicted.exit_code == 0, qPrintable(predicted.err));
    const QJsonObject p = last_json_line(predicted.out);
    QCOMPARE(p["calibration"].toObject()["runs"].toArray().first().toInteger(), id.toLongLong());
    QCOMPARE(p["threads_per_rank"].toInt(), 1);
    QStringList forwards;
    for (const QJsonValue& s : p["spans"].toArray())
      if (s.toObject()["kind"].toString() == "forward") forwards << s.toObject()["layer"].toString();
    QCOMPARE(forwards, (QStringList{"linear_0", "tanh_1", "linear_2"}));
    // Predicting the run it was calibrated on gives back its median step: the calibration's
    // residual is what that run measured beyond its own costs (0.0% in 4 runs; 1% allows
    // for rounding in the JSON).
    const Result again = run_cli({"run", plan, "--db", db(), "--json"});  // compare takes two runs
    QVERIFY2(again.exit_code == 0, qPrintable(again.err));
    const QString other = QString::number(last_json_line(again.out)["id"].toInteger());
    const Result compared = run_cli({"compare", id, other, "--db", db(), "--json"});
    double measured = 0;
    for (const QJsonValue& m : last_json_line(compared.out)["metrics"].toArray())
      if (m.toObject()["key"].toString() == "step_time_median_ms") measured = m.toObject()["values"].toArray()[0].toDouble();
    const double step = p["step_ms"].toDouble();
    qInfo("predicted %.4f ms, measured median %.4f ms (%+.1f%%)", step, measured, 100 * (step / measured - 1));
    QVERIFY2(measured > 0 && std::abs(step / measured - 1) < 0.01, qPrintable(QString("%1 vs %2 ms").arg(step).arg(measured)));
    // Beside the prediction, what the configuration's runs measured: the machine's spread.
    QCOMPARE(p["measured_steps_ms"].toArray().size(), 1);
    QVERIFY(std::abs(p["measured_steps_ms"].toArray()[0].toDouble() / measured - 1) < 0.01);

    // Beside the run: the measured step and per kind both sides.
    const Result against = run_cli({"predict", plan, "--db", db(), "--against", id, "--json"});
    QVERIFY2(against.exit_code == 0, qPrintable(against.err));
    const QJsonObject a = last_json_line(against.out)["against"].toObject();
    QCOMPARE(a["run"].toInteger(), id.toLongLong());
    QVERIFY(a["measured_step_ms"].toDouble() > 0 && a["kinds"].toArray().size() >= 5);
    QCOMPARE(run_cli({"predict", plan, "--db", db(), "--against", "999"}).exit_code, 2);  // no such run

    // Stored, the prediction is a run of its own kind that `compare` puts beside the run.
    const Result stored = run_cli({"predict", plan, "--db", db(), "--store", "--json"});
    QVERIFY2(stored.exit_code == 0, qPrintable(stored.err));
    const QString prediction_id = QString::number(last_json_line(stored.out)["id"].toInteger());
    const QJsonArray runs = QJsonDocument::fromJson(run_cli({"runs", "--db", db(), "--json"}).out.toUtf8()).array();
    QCOMPARE(runs.first().toObject()["kind"].toString(), QString("predicted"));
    const Result beside = run_cli({"compare", id, prediction_id, "--db", db(), "--json"});
    QVERIFY2(beside.exit_code == 0, qPrintable(beside.err));
    QVERIFY(last_json_line(beside.out)["runs"].toArray()[1].toObject()["mode"].toString().startsWith("predicted: "));
    const Result recalibrated = run_cli({"predict", plan, "--db", db(), "--json"});
    QCOMPARE(last_json_line(recalibrated.out)["calibration"].toObject()["runs"].toArray().size(), 2);  // the two runs, not the prediction

    const Result text = run_cli({"predict", plan, "--db", db()});
    QVERIFY2(text.out.contains("step time:") && text.out.contains("throughput:"), qPrintable(text.out));
    QVERIFY2(text.out.contains("measured:    this configuration's 2 runs: "), qPrintable(text.out));
    const Result costs = run_cli({"calibration", "--db", db(), "--json"});
    QVERIFY2(costs.exit_code == 0, qPrintable(costs.err));
    QVERIFY(last_json_line(costs.out)["costs"].toObject().contains("backward tanh 64->64 @cpu 1t"));
    QCOMPARE(last_json_line(costs.out)["configurations"].toArray().size(), 1);  // one plan, measured twice
  }

  // A roofline cluster needs no calibration: a scaling curve to 1,024 devices, a ranked
  // search whose best layout saved as a plan validates, and errors that name the field.
  void clusterScalingAndSearch() {
    const QString plan = write("spirals.json", kSpiralsPlan);
    const QString cluster = write("cluster.json", R"({"name": "test", "hosts": 128, "devices_per_host": 8,)"
                                                  R"("device": {"peak_tflops": 10, "memory_bandwidth_gbs": 1000},)"
                                                  R"("links": {"inside_host": {"bandwidth_gbs": 100, "latency_us": 2},)"
                                                  R"("between_hosts": {"bandwidth_gbs": 10, "latency_us": 5}}})");
    const Result scaled = run_cli({"predict", plan, "--db", db(), "--cluster", cluster, "--scale", "1024", "--json"});
    QVERIFY2(scaled.exit_code == 0, qPrintable(scaled.err));
    const QJsonArray points = last_json_line(scaled.out)["scaling"].toArray();
    QCOMPARE(points.size(), 11);  // 1, 2, 4, ... 1024
    QCOMPARE(points.last().toObject()["devices"].toInt(), 1024);
    QCOMPARE(points.first().toObject()["efficiency"].toDouble(), 1.0);

    const QString saved = dir_.filePath("layouts");
    const Result searched = run_cli({"search", plan, "--db", db(), "--cluster", cluster, "--devices", "8", "--save", saved, "--json"});
    QVERIFY2(searched.exit_code == 0, qPrintable(searched.err));
    const QJsonArray layouts = last_json_line(searched.out)["layouts"].toArray();
    QVERIFY(layouts.size() >= 4);
    for (int i = 1; i < layouts.size(); ++i)
      QVERIFY(layouts[i - 1].toObject()["samples_per_s"].toDouble() >= layouts[i].toObject()["samples_per_s"].toDouble());
    QVERIFY(layouts[1].toObject().contains("why_slower"));
    const Result valid = run_cli({"validate", saved + "/layout-1.json"});
    QVERIFY2(valid.exit_code == 0, qPrintable(valid.out + valid.err));

    const Result size = run_cli({"search", plan, "--db", db(), "--cluster", cluster, "--memory-per-device", "lots"});
    QCOMPARE(size.exit_code, 2);
    const Result broken = run_cli({"predict", plan, "--db", db(), "--cluster", write("bad.json", R"({"hosts": 2, "device": {"peak_tflops": 1}})")});
    QCOMPARE(broken.exit_code, 2);
    QVERIFY2(broken.err.contains("device.memory_bandwidth_gbs is missing"), qPrintable(broken.err));
  }

  // calibrate on an empty store: real short runs in the layouts predict needs, tagged
  // "calibration", after which the plan and its two-replica layout are predicted.
  void calibrateMakesTheHistoryPredictNeeds() {
    QTemporaryDir fresh;
    const QString store = fresh.filePath("calibrate.db");
    const QString plan = write("spirals-calibrate.json", kSpiralsPlan);
    const Result calibrated = run_cli({"calibrate", plan, "--db", store, "--steps", "20", "--json"});
    QVERIFY2(calibrated.exit_code == 0, qPrintable(calibrated.err));
    const QJsonObject summary = last_json_line(calibrated.out);
    // as planned, one process, two replicas (each also at 4x the batch), two stages
    QCOMPARE(summary["runs"].toArray().size(), 6);
    QVERIFY(summary["predicts_plan"].toBool());
    const QJsonArray runs = QJsonDocument::fromJson(run_cli({"runs", "--db", store, "--json"}).out.toUtf8()).array();
    QCOMPARE(runs.size(), 6);
    // Sizes, not one point scaled: the first layer on one thread at a quarter, half, one and
    // two times the batch (a micro-batch, a replica, the plan, a replica of 4x the batch);
    // all-reduces of 1 KB buckets (the first layer's weights, 512 bytes; the rest, 1036)
    // and of the whole gradient (1548).
    const QJsonObject costs = last_json_line(run_cli({"calibration", "--db", store, "--json"}).out)["costs"].toObject();
    const auto sizes = [&](const char* key) {
      QList<double> out;
      for (const auto& point : costs[key].toObject()["points"].toArray()) out.push_back(point.toArray()[0].toDouble());
      return out;
    };
    QCOMPARE(sizes("forward linear 2->64 @cpu 1t"), (QList<double>{16, 32, 64, 128}));
    QCOMPARE(sizes("all-reduce 2 ranks mpi"), (QList<double>{512, 1036, 1548}));
    for (const auto& r : runs) QVERIFY(r.toObject()["tags"].toArray().contains(QJsonValue("calibration")));
    const Result two = run_cli({"predict", plan, "--db", store, "--replicas", "2", "--json"});
    QVERIFY2(two.exit_code == 0, qPrintable(two.err));
    // An asynchronous plan calibrates from its own run (its crowding, its server's updates
    // and replies) and is predicted with the staleness of its updates.
    const QString ps = write("ps-calibrate.json", kParameterServerPlan);
    const Result ps_calibrated = run_cli({"calibrate", ps, "--db", store, "--steps", "20", "--json"});
    QVERIFY2(ps_calibrated.exit_code == 0, qPrintable(ps_calibrated.err));
    QCOMPARE(last_json_line(ps_calibrated.out)["runs"].toArray().size(), 1);  // as planned: the layouts it needs
    QVERIFY(last_json_line(ps_calibrated.out)["predicts_plan"].toBool());
    const Result ps_predicted = run_cli({"predict", ps, "--db", store, "--json"});
    QVERIFY2(ps_predicted.exit_code == 0, qPrintable(ps_predicted.err));
    const QJsonObject staleness = last_json_line(ps_predicted.out)["staleness"].toObject();
    QCOMPARE(staleness["mode"].toString(), QString("parameter_server"));
    int updates = 0;
    for (const auto& n : staleness["counts"].toArray()) updates += n.toInt();
    QCOMPARE(updates, 2 * 20);  // two workers, 20 steps each
    QCOMPARE(run_cli({"calibrate", plan, "--db", store, "--steps", "3"}).exit_code, 2);
  }

  // What each rank held at the end of a real two-rank run (its backend's bytes in use:
  // buffers only grow, so the peak) is what the predictor counts, to the tensor: 64-byte
  // rounding of each allocation is the only difference (under 1 KiB in 26 plans).
  void memoryIsWhatTheRanksHeld() {
    const QString plan = write("split.json", kSplitPipelinePlan);
    const QString store = dir_.filePath("split.db");
    const Result ran = run_cli({"run", plan, "--db", store, "--json"});
    QVERIFY2(ran.exit_code == 0, qPrintable(ran.err));
    const QString id = QString::number(last_json_line(ran.out)["id"].toInteger());
    const Result against = run_cli({"predict", plan, "--db", store, "--against", id, "--json"});
    QVERIFY2(against.exit_code == 0, qPrintable(against.err));
    const QJsonArray memory = last_json_line(against.out)["against"].toObject()["memory"].toArray();
    QCOMPARE(memory.size(), 2);
    for (const QJsonValue& v : memory) {
      const QJsonObject m = v.toObject();
      const double predicted = m["predicted_bytes"].toDouble(), measured = m["measured_bytes"].toDouble();
      qInfo("rank %d: predicted %.0f bytes, measured %.0f", m["rank"].toInt(), predicted, measured);
      QVERIFY2(measured > 0 && std::abs(predicted - measured) <= 1024,
               qPrintable(QString("rank %1: %2 vs %3 bytes").arg(m["rank"].toInt()).arg(predicted).arg(measured)));
    }
  }

  // `calibration --reset` makes every calibrating run calibrate no more, keeping the runs:
  // predicting then names what it lacks; clearing a run's tags brings it back.
  void resetKeepsTheRuns() {
    const QString plan = write("spirals-reset.json", kSpiralsPlan);
    const QString store = dir_.filePath("reset.db");
    const Result ran = run_cli({"run", plan, "--db", store, "--json"});
    QVERIFY2(ran.exit_code == 0, qPrintable(ran.err));
    const QString id = QString::number(last_json_line(ran.out)["id"].toInteger());
    QCOMPARE(run_cli({"predict", plan, "--db", store}).exit_code, 0);
    const Result reset = run_cli({"calibration", "--db", store, "--reset", "--json"});
    QCOMPARE(reset.exit_code, 0);
    QCOMPARE(last_json_line(reset.out)["reset"].toArray().size(), 1);
    const Result forgotten = run_cli({"predict", plan, "--db", store});
    QCOMPARE(forgotten.exit_code, 1);
    QVERIFY2(forgotten.err.contains("no calibration for"), qPrintable(forgotten.err));
    QCOMPARE(QJsonDocument::fromJson(run_cli({"runs", "--db", store, "--json"}).out.toUtf8()).array().size(), 1);
    QCOMPARE(run_cli({"tag", id, "--clear", "--db", store}).exit_code, 0);
    QCOMPARE(run_cli({"predict", plan, "--db", store}).exit_code, 0);
  }

  // GPU ranks are predicted from this machine's gpu runs: none yet is an error that says
  // so; after one run of the plan on a GPU (here the CUDA backend's code emulating one on
  // the CPU, LOOM_GPU_ON_HOST: the same device-stamped spans and device memory records a
  // GPU gives) the plan is predicted on that GPU, within 1% of the run's step, and its
  // memory within 2 KiB. A plan mixing cpu and gpu ranks is refused.
  void gpuRanksArePredictedFromAGpuRun() {
    QByteArray gpu = kSpiralsPlan;
    gpu.replace(R"("threads": 1})", R"("threads": 1}, "parallel": {"devices": [{"kind": "gpu", "gpu": 0}]})");
    const QString plan = write("gpu.json", gpu);
    const QString store = dir_.filePath("gpu.db");
    const Result none = run_cli({"predict", plan, "--db", store});
    QCOMPARE(none.exit_code, 1);
    QVERIFY2(none.err.contains("no gpu run in the calibration"), qPrintable(none.err));
    QByteArray mixed = kSpiralsPlan;
    mixed.replace(R"("threads": 1})", R"("threads": 1}, "parallel": {"devices": [{"kind": "gpu", "gpu": 0}, {"kind": "cpu"}], "data_parallel": 2})");
    const Result refused = run_cli({"predict", write("mixed.json", mixed), "--db", store});
    QCOMPARE(refused.exit_code, 2);
    QVERIFY2(refused.err.contains("both cpu and gpu ranks"), qPrintable(refused.err));
    if (!loom::this_build().cuda) QSKIP("this build has no CUDA backend to run a gpu rank on");

    qputenv("LOOM_GPU_ON_HOST", "1");
    const Result ran = run_cli({"run", plan, "--db", store, "--json"});
    qunsetenv("LOOM_GPU_ON_HOST");
    QVERIFY2(ran.exit_code == 0, qPrintable(ran.err));
    const QString id = QString::number(last_json_line(ran.out)["id"].toInteger());
    const Result against = run_cli({"predict", plan, "--db", store, "--against", id, "--json"});
    QVERIFY2(against.exit_code == 0, qPrintable(against.err));
    const QJsonObject p = last_json_line(against.out);
    QCOMPARE(p["device"].toString(), QString("gpu a GPU emulated on the CPU (LOOM_GPU_ON_HOST)"));
    const QJsonObject a = p["against"].toObject();
    const double step = p["step_ms"].toDouble(), measured = a["measured_step_ms"].toDouble();
    qInfo("gpu rank: predicted %.4f ms, measured %.4f ms", step, measured);
    QVERIFY2(measured > 0 && std::abs(step / measured - 1) < 0.01, qPrintable(QString("%1 vs %2 ms").arg(step).arg(measured)));
    // Beside the prediction, what the configuration's runs measured: the machine's spread.
    QCOMPARE(p["measured_steps_ms"].toArray().size(), 1);
    QVERIFY(std::abs(p["measured_steps_ms"].toArray()[0].toDouble() / measured - 1) < 0.01);
    const QJsonObject memory = a["memory"].toArray().first().toObject();
    QVERIFY2(std::abs(memory["predicted_bytes"].toDouble() - memory["measured_bytes"].toDouble()) <= 2048,
             qPrintable(QString("%1 vs %2 bytes").arg(memory["predicted_bytes"].toDouble()).arg(memory["measured_bytes"].toDouble())));

    // `calibrate` runs a gpu plan's layouts on the GPU too, after which it is predicted.
    qputenv("LOOM_GPU_ON_HOST", "1");
    const Result calibrated = run_cli({"calibrate", plan, "--db", dir_.filePath("gpu-calibrated.db"), "--steps", "10", "--json"});
    qunsetenv("LOOM_GPU_ON_HOST");
    QVERIFY2(calibrated.exit_code == 0, qPrintable(calibrated.err));
    QVERIFY(last_json_line(calibrated.out)["predicts_plan"].toBool());
  }
};

QTEST_GUILESS_MAIN(CliPredictTest)
#include "test_cli_predict.moc"
