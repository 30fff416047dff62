// Item model tests: QAbstractItemModelTester checks each model's contract while the
// tests check what a user sees: the default MLP's rows and parameter counts, branch
// depth, errors on the right row, and the run list read from a real SQLite store
// (newest first, status text, a failed reload keeping the old rows).
#include <QAbstractItemModelTester>
#include <QDateTime>
#include <QFile>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/store/run_store.h"
#include "loom/test/expect.h"
#include "loom/test/plans.h"
#include "loom/ui/item_roles.h"
#include "loom/ui/metric_series_model.h"
#include "loom/ui/model_table_model.h"
#include "loom/ui/run_list_model.h"

using loom::ui::MetricSeriesModel;
using loom::ui::ModelTableModel;
using loom::ui::RunListModel;
using loom::testing::branch_plan;
using loom::testing::must;
using loom::testing::must_ok;

namespace {

QVariant cell(const QAbstractItemModel& m, int row, int column, int role = Qt::DisplayRole) {
  return m.data(m.index(row, column), role);
}

std::string tempPath(const QTemporaryDir& dir, const char* name) { return dir.filePath(name).toStdString(); }

}  // namespace

class TestUiModels : public QObject {
  Q_OBJECT
 private slots:
  // Any Qt warning (an invalid index from checkIndex, a model tester complaint) fails the
  // test: such a query returns an empty QVariant that could make a comparison pass.
  void init() { QTest::failOnWarning(QRegularExpression(".*")); }
  void defaultPlanRowsAndParams();
  void branchLayersHaveDepthOne();
  void invalidLayerMarksItsRow();
  void nestedErrorMarksBranchLayerNotBlock();
  void runListNewestFirstWithStatus();
  void runListNamesTheDevice();
  void runListReloadErrorKeepsRows();
  void runListMissingFileIsNotCreated();
  void metricSeriesAveragesRanks();
};

void TestUiModels::defaultPlanRowsAndParams() {
  ModelTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  const loom::Plan plan = loom::default_plan();
  model.setPlan(plan);

  std::vector<loom::PlanError> errors;
  const loom::ModelInfo expected = loom::infer_model(plan, &errors);
  QVERIFY(errors.empty());
  QVERIFY(model.errors().empty());
  QCOMPARE(model.rowCount(), 6);
  QCOMPARE(int(expected.layers.size()), 6);
  const QStringList types = {"flatten", "linear", "relu", "linear", "relu", "linear"};
  for (int r = 0; r < 6; ++r) {
    QCOMPARE(cell(model, r, ModelTableModel::Type).toString(), types[r]);
    QCOMPARE(cell(model, r, ModelTableModel::Name).toString(),
             QString::fromStdString(expected.layers[size_t(r)].name));
    QCOMPARE(cell(model, r, ModelTableModel::Params, loom::ui::SortRole).toLongLong(),
             qlonglong(expected.layers[size_t(r)].params));
    QCOMPARE(cell(model, r, ModelTableModel::Name, loom::ui::DepthRole).toInt(), 0);
    QCOMPARE(cell(model, r, ModelTableModel::Name, loom::ui::HasErrorRole).toBool(), false);
    QVERIFY(!cell(model, r, ModelTableModel::Name, Qt::ForegroundRole).isValid());
  }
  QCOMPARE(cell(model, 1, ModelTableModel::Params, loom::ui::SortRole).toLongLong(), 200960LL);  // 784*256+256
  QCOMPARE(cell(model, 1, ModelTableModel::Params).toString(), QString("200,960"));
  QCOMPARE(cell(model, 0, ModelTableModel::Input).toString(), QString("1x28x28"));
  QCOMPARE(cell(model, 0, ModelTableModel::Output).toString(), QString("784"));
  QCOMPARE(cell(model, 5, ModelTableModel::Output).toString(), QString("10"));
  // Memory = weights + activations for the global batch of 64, fp32.
  QCOMPARE(cell(model, 1, ModelTableModel::Memory, loom::ui::SortRole).toLongLong(),
           qlonglong(200960 * 4 + 256 * 64 * 4));
  QCOMPARE(cell(model, 1, ModelTableModel::Memory).toString(),
           QString::fromStdString(loom::format_bytes(200960 * 4 + 256 * 64 * 4)));
  QCOMPARE(model.totalParams(), std::int64_t(235146));
  QCOMPARE(model.stageCount(), 1);
  QCOMPARE(model.stageParams(0), std::int64_t(235146));
  QCOMPARE(model.stageMemoryBytes(0), expected.stage_memory_bytes[0]);
  QCOMPARE(model.stageMemoryBytes(1), std::int64_t(0));
  QCOMPARE(model.headerData(ModelTableModel::Params, Qt::Horizontal).toString(), QString("Params"));
}

void TestUiModels::branchLayersHaveDepthOne() {
  ModelTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  model.setPlan(loom::default_plan());  // a second setPlan must reset cleanly
  model.setPlan(branch_plan());
  QVERIFY2(model.errors().empty(), model.errors().empty() ? "" : model.errors()[0].reason.c_str());
  QCOMPARE(model.rowCount(), 6);
  const QList<int> depths = {0, 0, 1, 1, 1, 0};
  const QStringList types = {"flatten", "parallel", "linear", "relu", "linear", "linear"};
  for (int r = 0; r < 6; ++r) {
    QCOMPARE(cell(model, r, ModelTableModel::Name, loom::ui::DepthRole).toInt(), depths[r]);
    QCOMPARE(cell(model, r, ModelTableModel::Type).toString(), types[r]);
    const QString name = QString::fromStdString(model.layer(r).name);
    QCOMPARE(cell(model, r, ModelTableModel::Name).toString(), QString(2 * depths[r], ' ') + name);
  }
  QCOMPARE(cell(model, 1, ModelTableModel::Output).toString(), QString("48"));  // 32 + 16 concatenated
  QCOMPARE(cell(model, 4, ModelTableModel::Params, loom::ui::SortRole).toLongLong(), 784LL * 16 + 16);
  QCOMPARE(model.totalParams(), std::int64_t(784 * 32 + 32 + 784 * 16 + 16 + 48 * 10 + 10));
  QCOMPARE(cell(model, 4, 0, loom::ui::JsonPathRole).toString(), QString("/model/layers/1/branches/1/layers/0"));
  QCOMPARE(model.rowForJsonPath("/model/layers/1/branches/1/layers/0"), 4);
  QCOMPARE(model.rowForJsonPath("/model/layers/9"), -1);
}

void TestUiModels::invalidLayerMarksItsRow() {
  loom::Plan plan = loom::default_plan();
  plan.model.layers.erase(plan.model.layers.begin());  // linear straight onto a 1x28x28 image
  ModelTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  model.setPlan(plan);
  QCOMPARE(model.rowCount(), 5);
  QVERIFY(!model.errors().empty());
  QCOMPARE(model.errors()[0].path, std::string("/model/layers/0"));
  QVERIFY(cell(model, 0, ModelTableModel::Name, loom::ui::HasErrorRole).toBool());
  QCOMPARE(cell(model, 0, ModelTableModel::Name, Qt::ForegroundRole).value<QColor>(), QColor(Qt::red));
  QVERIFY(cell(model, 0, ModelTableModel::Name, Qt::ToolTipRole).toString().contains("flatten"));
  QCOMPARE(model.rowErrors(0).size(), size_t(1));
  for (int r = 1; r < model.rowCount(); ++r) {
    QVERIFY2(!cell(model, r, ModelTableModel::Name, loom::ui::HasErrorRole).toBool(), qPrintable(QString::number(r)));
    QVERIFY(model.rowErrors(r).empty());
  }
  QVERIFY(model.modelErrors().empty());
}

void TestUiModels::nestedErrorMarksBranchLayerNotBlock() {
  loom::Plan plan = branch_plan();
  plan.model.layers[1].branches[1].layers[0].out = 0;  // "/model/layers/1/branches/1/layers/0/out"
  plan.model.input = {};                               // "/model/input": belongs to no row
  ModelTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  model.setPlan(plan);
  QCOMPARE(model.rowCount(), 6);
  QCOMPARE(model.rowErrors(4).size(), size_t(1));
  QCOMPARE(model.rowErrors(4)[0].path, std::string("/model/layers/1/branches/1/layers/0/out"));
  QVERIFY(cell(model, 4, ModelTableModel::Params, loom::ui::HasErrorRole).toBool());
  QVERIFY(!cell(model, 1, ModelTableModel::Params, loom::ui::HasErrorRole).toBool());  // the block
  QCOMPARE(model.modelErrors().size(), size_t(1));
  QCOMPARE(model.modelErrors()[0].path, std::string("/model/input"));
}

// Two runs with fixed start times: the later one must be listed first.
void TestUiModels::runListNewestFirstWithStatus() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const std::string path = tempPath(dir, "runs.db");
  {
    auto store = must(loom::store::RunStore::open(path));
    loom::trace::RunRecord first;
    first.name = "first";
    first.started_unix_ms = 1'700'000'000'000;
    first.world_size = 1;
    loom::trace::RunRecord second = first;
    second.name = "second";
    second.started_unix_ms = first.started_unix_ms + 60'000;
    second.world_size = 4;
    const auto id1 = must(store.create_run(first));
    const auto id2 = must(store.create_run(second));
    must_ok(store.finish_run(id1, loom::trace::RunStatus::Completed, 10.0, 6400, ""));
    must_ok(store.finish_run(id2, loom::trace::RunStatus::Failed, 2.5, 1000, "rank 3 exited with code 1"));
    // Steps: those with a "loss" value, as show counts them (a run resumed at step 50 trained
    // 50, not its highest step + 1); accuracy from the latest evaluation by step.
    std::vector<loom::trace::MetricRecord> losses;
    for (std::int64_t step = 50; step < 100; ++step) losses.push_back({0, step, step, "loss", 0.5});
    must_ok(store.append_metrics(id1, losses));
    must_ok(store.append_metrics(id1, {{0, 9, 2, "test_accuracy", 0.7},
                                       {0, 19, 3, "test_accuracy", 0.8150}, {0, 4, 4, "test_accuracy", 0.1}}));
    must_ok(store.set_tags(id1, {"baseline", "fast"}));
  }
  RunListModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  const loom::Status s = model.reload(QString::fromStdString(path));
  QVERIFY2(s.ok(), s.ok() ? "" : s.error().describe().c_str());
  QCOMPARE(model.rowCount(), 2);
  QCOMPARE(cell(model, 0, RunListModel::Name).toString(), QString("second"));
  QCOMPARE(cell(model, 1, RunListModel::Name).toString(), QString("first"));
  QCOMPARE(cell(model, 0, RunListModel::Status).toString(), QString("Failed"));
  QCOMPARE(cell(model, 1, RunListModel::Status).toString(), QString("Completed"));
  QCOMPARE(cell(model, 0, RunListModel::Status, Qt::ForegroundRole).value<QColor>(), QColor(Qt::red));
  QCOMPARE(cell(model, 0, RunListModel::Name, Qt::ToolTipRole).toString(), QString("rank 3 exited with code 1"));
  QCOMPARE(cell(model, 0, RunListModel::Ranks).toInt(), 4);
  QCOMPARE(cell(model, 1, RunListModel::WallTime).toString(), QString("10.0 s"));
  QCOMPARE(cell(model, 1, RunListModel::Throughput).toString(), QString("640"));
  QCOMPARE(cell(model, 1, RunListModel::Throughput, loom::ui::SortRole).toDouble(), 640.0);
  QCOMPARE(cell(model, 1, RunListModel::Steps).toLongLong(), 50LL);
  QCOMPARE(cell(model, 0, RunListModel::Steps).toString(), QString());  // none recorded
  QCOMPARE(cell(model, 1, RunListModel::TestAccuracy).toString(), QString("81.5%"));
  QCOMPARE(cell(model, 0, RunListModel::TestAccuracy).toString(), QString());
  QCOMPARE(cell(model, 0, RunListModel::TestAccuracy, loom::ui::SortRole).toDouble(), -1.0);  // unknown sorts last
  QCOMPARE(cell(model, 1, RunListModel::Tags).toString(), QString("baseline, fast"));
  QCOMPARE(cell(model, 1, RunListModel::Mode).toString(), QString("plan unreadable"));  // no plan stored
  QVERIFY(cell(model, 1, 0, loom::ui::FilterRole).toString().contains("baseline"));
  QVERIFY(cell(model, 1, 0, loom::ui::FilterRole).toString().contains("Completed"));
  const QString started = QDateTime::fromMSecsSinceEpoch(1'700'000'000'000).toLocalTime().toString("yyyy-MM-dd hh:mm");
  QCOMPARE(cell(model, 1, RunListModel::Started).toString(), started);
  QVERIFY(model.runId(0) != model.runId(1));
  QCOMPARE(cell(model, 0, 0, loom::ui::RunIdRole).toLongLong(), qlonglong(model.runId(0)));
  QCOMPARE(model.rowForRunId(model.runId(1)), 1);
  QCOMPARE(model.runId(2), std::int64_t(-1));
  QVERIFY(model.errorMessage().isEmpty());
  QCOMPARE(loom::ui::format_duration(187), std::string("3:07"));
  QCOMPARE(loom::ui::format_duration(3723), std::string("1:02:03"));
  QCOMPARE(loom::ui::format_duration(0), std::string());
  QCOMPARE(loom::ui::format_duration(0.0201), std::string("0.020 s"));  // an imported trace's 20 ms
}

// The mode column says what a run ran on, from the identities its ranks stored: a GPU
// run's rows are written through the store API as a rank on an H200 writes them (no GPU
// here; the model's words are what is tested), a 4-replica cpu run, and a run from before
// identities were stored, which keeps its mode alone.
void TestUiModels::runListNamesTheDevice() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const std::string path = tempPath(dir, "runs.db");
  {
    auto store = must(loom::store::RunStore::open(path));
    loom::Plan one = loom::default_plan();
    loom::Plan four = one;
    four.parallel.data_parallel = 4;
    four.parallel.devices.assign(4, loom::DeviceSpec{});
    loom::trace::RunRecord record = loom::store::new_run_record(one, "test");
    record.started_unix_ms = 1'700'000'000'000;
    const auto old_run = must(store.create_run(record));
    must_ok(store.upsert_rank(old_run, loom::trace::RankRecord{0, "node", "cpu"}));
    record.started_unix_ms += 1000;
    const auto gpu_run = must(store.create_run(record));
    loom::trace::RankRecord gpu{0, "gpu-node", "gpu 0"};
    gpu.device_info.kind = "gpu";
    gpu.device_info.name = "NVIDIA H200";
    gpu.device_info.memory_bytes = 150'011'707'392LL;
    gpu.device_info.cuda_runtime = "13.0";
    must_ok(store.upsert_rank(gpu_run, gpu));
    loom::trace::RunRecord dp = loom::store::new_run_record(four, "test");
    dp.started_unix_ms = record.started_unix_ms + 1000;
    const auto cpu_run = must(store.create_run(dp));
    for (int r = 0; r < 4; ++r) {
      loom::trace::RankRecord cpu{r, "node", "cpu"};
      cpu.device_info.kind = "cpu";
      cpu.device_info.name = "AMD EPYC 7B13";
      cpu.device_info.logical_cores = 2;
      cpu.device_info.blas_threads = 1;
      must_ok(store.upsert_rank(cpu_run, cpu));
    }
    for (auto id : {old_run, gpu_run, cpu_run}) must_ok(store.finish_run(id, loom::trace::RunStatus::Completed, 1, 1, ""));
  }
  RunListModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  QVERIFY(model.reload(QString::fromStdString(path)).ok());
  QCOMPARE(model.rowCount(), 3);
  QCOMPARE(cell(model, 0, RunListModel::Mode).toString(), QString("all-reduce, 4 replicas on cpu"));
  QCOMPARE(cell(model, 1, RunListModel::Mode).toString(), QString("one process on NVIDIA H200"));
  QCOMPARE(cell(model, 2, RunListModel::Mode).toString(), QString("one process"));  // not recorded
  const QString tip = cell(model, 1, RunListModel::Mode, Qt::ToolTipRole).toString();
  QVERIFY2(tip.contains("\nrank 0: NVIDIA H200, 139.7 GiB, CUDA 13.0"), qPrintable(tip));
  QVERIFY2(cell(model, 0, RunListModel::Mode, Qt::ToolTipRole).toString().contains(
               "ranks 0-3: cpu, AMD EPYC 7B13, 2 cores, 1 BLAS thread"),
           qPrintable(cell(model, 0, RunListModel::Mode, Qt::ToolTipRole).toString()));
  QVERIFY(!cell(model, 2, RunListModel::Mode, Qt::ToolTipRole).toString().contains("rank 0"));
  QVERIFY(cell(model, 1, 0, loom::ui::FilterRole).toString().contains("H200"));  // the filter box finds it
  QCOMPARE(cell(model, 1, RunListModel::Mode, loom::ui::SortRole).toString(), QString("one process on NVIDIA H200"));
}

void TestUiModels::runListReloadErrorKeepsRows() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const std::string good = tempPath(dir, "runs.db");
  {
    auto store = must(loom::store::RunStore::open(good));
    loom::trace::RunRecord run;
    run.name = "kept";
    must(store.create_run(run));
  }
  const QString garbage = dir.filePath("garbage.db");
  {
    QFile f(garbage);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(4096, 'x'));  // long enough that SQLite reads a header and refuses it
  }
  RunListModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  QSignalSpy errors(&model, &RunListModel::errorChanged);
  QVERIFY(model.reload(QString::fromStdString(good)).ok());
  QCOMPARE(model.rowCount(), 1);
  const std::int64_t keptId = model.runId(0);

  const loom::Status s = model.reload(garbage);
  QVERIFY(!s.ok());
  QCOMPARE(s.error().code, loom::ErrorCode::Corrupt);
  QCOMPARE(model.rowCount(), 1);
  QCOMPARE(model.runId(0), keptId);
  QCOMPARE(cell(model, 0, RunListModel::Name).toString(), QString("kept"));
  QVERIFY(!model.errorMessage().isEmpty());
  QCOMPARE(model.databasePath(), QString::fromStdString(good));
  QCOMPARE(errors.count(), 1);

  QVERIFY(model.reload(QString::fromStdString(good)).ok());  // recovery clears the error
  QVERIFY(model.errorMessage().isEmpty());
  QCOMPARE(errors.count(), 2);
}

void TestUiModels::runListMissingFileIsNotCreated() {
  QTemporaryDir dir;
  const QString missing = dir.filePath("nope/runs.db");
  RunListModel model;
  const loom::Status s = model.reload(missing);
  QVERIFY(!s.ok());
  QCOMPARE(s.error().code, loom::ErrorCode::NotFound);
  QVERIFY(!QFile::exists(missing));
  QCOMPARE(model.rowCount(), 0);
}

// Two data-parallel ranks report loss for the same steps: the curve is their mean.
void TestUiModels::metricSeriesAveragesRanks() {
  QTemporaryDir dir;
  const std::string path = tempPath(dir, "runs.db");
  std::int64_t id = 0;
  {
    auto store = must(loom::store::RunStore::open(path));
    id = must(store.create_run(loom::trace::RunRecord{}));
    must_ok(store.append_metrics(id, {{0, 0, 10, "loss", 2.0},
                                      {1, 0, 11, "loss", 3.0},
                                      {0, 1, 20, "loss", 1.0},
                                      {1, 1, 21, "loss", 2.0},
                                      {0, 1, 22, "test_accuracy", 0.75},
                                      {0, 1, 23, "samples_per_s", 99.0}}));
  }
  MetricSeriesModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  must_ok(model.load(QString::fromStdString(path), id));
  QCOMPARE(model.rowCount(), 2);
  QCOMPARE(model.points("loss"), (QVector<QPointF>{{0, 2.5}, {1, 1.5}}));
  QCOMPARE(model.points("test_accuracy"), (QVector<QPointF>{{1, 0.75}}));
  QCOMPARE(cell(model, 0, MetricSeriesModel::Last, loom::ui::SortRole).toDouble(), 1.5);
  QCOMPARE(cell(model, 0, MetricSeriesModel::Max, loom::ui::SortRole).toDouble(), 2.5);
  QCOMPARE(cell(model, 1, 0, loom::ui::PointsRole).value<QVector<QPointF>>().size(), 1);
  const loom::Status unknown = model.load(QString::fromStdString(path), id + 100);
  QVERIFY(!unknown.ok());
  QCOMPARE(unknown.error().code, loom::ErrorCode::NotFound);
  QCOMPARE(model.rowCount(), 2);  // kept
}

QTEST_GUILESS_MAIN(TestUiModels)
#include "test_ui_models.moc"
