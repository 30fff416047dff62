// Designer model tests: what a person sees and gets when editing through the layer
// table, the device table and the placement grid: rows and parameter counts after
// insert/remove/move, setData as an undoable step, branches as editable rows, the
// device list following the strategy, and placement moving stages. Every model also
// runs under QAbstractItemModelTester while it is edited.
#include <QAbstractItemModelTester>
#include <QRegularExpression>
#include <QtTest>

#include "loom/test/plans.h"
#include "loom/ui/designer/device_table_model.h"
#include "loom/ui/designer/layer_list_model.h"
#include "loom/ui/designer/placement_model.h"
#include "loom/ui/designer/plan_document.h"
#include "loom/ui/designer/strategy.h"
#include "loom/ui/colors.h"
#include "loom/ui/item_roles.h"

using loom::ui::DeviceTableModel;
using loom::ui::LayerListModel;
using loom::ui::PlacementModel;
using loom::ui::PlanDocument;
using loom::testing::branch_plan;

namespace {

QString cell(const QAbstractItemModel& m, int row, int column, int role = Qt::DisplayRole) {
  return m.data(m.index(row, column), role).toString();
}

// Four devices: two replicas of two stages, on named hosts so moves are visible.
loom::Plan fourDevicePlan() {
  loom::Plan plan = loom::default_plan();
  plan.parallel.data_parallel = 2;
  plan.parallel.stages = 2;
  plan.training.batch = 96;  // divisible by 2 and 3 replicas
  for (std::size_t i = 3; i < plan.model.layers.size(); ++i) plan.model.layers[i].stage = 1;
  plan.parallel.devices.clear();
  for (int r = 0; r < 4; ++r) plan.parallel.devices.push_back({loom::DeviceKind::Cpu, "host" + std::to_string(r), -1});
  return plan;
}

std::vector<std::string> hosts(const loom::Plan& plan) {
  std::vector<std::string> out;
  for (const auto& d : plan.parallel.devices) out.push_back(d.host);
  return out;
}

}  // namespace

class TestDesignerModels : public QObject {
  Q_OBJECT
 private slots:
  void init() { QTest::failOnWarning(QRegularExpression(".*")); }
  void layerRowsAndParams();
  void insertRemoveMoveLayers();
  void setDataIsUndoable();
  void branchesAreEditableRows();
  void errorsMarkTheirRow();
  void deviceTotalsPerRank();
  void devicesFollowDataParallel();
  void deviceEditsAndRemoval();
  void placementChecksAndMovesStage();
  void placementDragIsOneStep();
  void modelTesterSurvivesEdits();
};

void TestDesignerModels::layerRowsAndParams() {
  PlanDocument doc;
  LayerListModel m(&doc);
  QCOMPARE(m.rowCount(), 6);
  QCOMPARE(cell(m, 1, LayerListModel::Name), QString("linear_1"));
  QCOMPARE(cell(m, 1, LayerListModel::Type), QString("linear"));
  QCOMPARE(cell(m, 1, LayerListModel::Settings), QString("out 256"));
  QCOMPARE(cell(m, 1, LayerListModel::Output), QString("256"));
  QCOMPARE(cell(m, 1, LayerListModel::Params), QString("200,960"));  // 784*256 + 256
  QCOMPARE(cell(m, 5, LayerListModel::Params), QString("1,290"));
  QCOMPARE(cell(m, 0, LayerListModel::Settings), QString());
  QVERIFY(!(m.flags(m.index(0, LayerListModel::Settings)) & Qt::ItemIsEditable));  // flatten has none
  QVERIFY(m.flags(m.index(1, LayerListModel::Settings)) & Qt::ItemIsEditable);
}

void TestDesignerModels::insertRemoveMoveLayers() {
  PlanDocument doc;
  LayerListModel m(&doc);
  const int row = m.insertLayer(4, loom::LayerKind::Dropout);  // after relu_4
  QCOMPARE(row, 5);
  QCOMPARE(m.rowCount(), 7);
  QCOMPARE(cell(m, 5, LayerListModel::Type), QString("dropout"));
  QCOMPARE(cell(m, 5, LayerListModel::Settings), QString("p 0.1"));
  QCOMPARE(cell(m, 5, LayerListModel::Name), QString("dropout_5"));
  QCOMPARE(m.insertLayer(-1, loom::LayerKind::Relu), 0);
  QCOMPARE(doc.plan().model.layers.front().kind, loom::LayerKind::Relu);
  QVERIFY(m.removeLayer(0));
  QVERIFY(m.removeLayer(5));
  QCOMPARE(m.rowCount(), 6);
  QVERIFY(doc.plan().model == loom::default_plan().model);
  // Moving linear_3 above relu_2 keeps the params with the layer that owns them.
  QCOMPARE(m.moveLayer(3, -1), 2);
  QCOMPARE(cell(m, 2, LayerListModel::Name), QString("linear_3"));
  QCOMPARE(cell(m, 2, LayerListModel::Params), QString("32,896"));  // 256*128 + 128
  QCOMPARE(m.moveLayer(0, -1), -1);                                   // nothing above the first
  QCOMPARE(m.moveLayer(5, 1), -1);
  QVERIFY(!m.removeLayer(6));
  QCOMPARE(doc.undoStack()->count(), 5);
}

void TestDesignerModels::setDataIsUndoable() {
  PlanDocument doc;
  LayerListModel m(&doc);
  QVERIFY(m.setData(m.index(1, LayerListModel::Settings), QVariantMap{{"out", 512}}));
  QCOMPARE(doc.plan().model.layers[1].out, std::int64_t(512));
  QCOMPARE(cell(m, 1, LayerListModel::Params), QString("401,920"));
  QCOMPARE(m.data(m.index(1, LayerListModel::Settings), Qt::EditRole).toMap().value("out").toLongLong(), 512);
  QVERIFY(m.setData(m.index(1, LayerListModel::Name), "hidden"));
  QVERIFY(!m.setData(m.index(1, LayerListModel::Name), "  "));
  QVERIFY(m.setData(m.index(2, LayerListModel::Type), "gelu"));
  QVERIFY(!m.setData(m.index(2, LayerListModel::Type), "softmax"));
  QCOMPARE(doc.plan().model.layers[2].kind, loom::LayerKind::Gelu);
  QCOMPARE(doc.plan().model.layers[1].name, std::string("hidden"));
  QCOMPARE(doc.undoStack()->count(), 3);
  doc.undoStack()->undo();
  doc.undoStack()->undo();
  doc.undoStack()->undo();
  QCOMPARE(cell(m, 1, LayerListModel::Params), QString("200,960"));
  QVERIFY(doc.plan() == loom::default_plan());
}

void TestDesignerModels::branchesAreEditableRows() {
  PlanDocument doc;
  doc.reset(branch_plan());
  LayerListModel m(&doc);
  // flatten, parallel, branch 0, linear, relu, branch 1, linear, linear
  QCOMPARE(m.rowCount(), 8);
  QVERIFY(m.data(m.index(2, 0), loom::ui::IsBranchRole).toBool());
  QCOMPARE(m.data(m.index(3, 0), loom::ui::DepthRole).toInt(), 1);
  QCOMPARE(cell(m, 1, LayerListModel::Output), QString("48"));  // 32 + 16 concatenated
  QCOMPARE(m.addBranch(1), 7);  // after branch 1's last layer
  QCOMPARE(doc.plan().model.layers[1].branches.size(), std::size_t(3));
  QCOMPARE(cell(m, 1, LayerListModel::Output), QString("832"));  // + relu of 784
  QVERIFY(m.removeLayer(7));  // the header row: removes branch 2 again
  QCOMPARE(doc.plan().model.layers[1].branches.size(), std::size_t(2));
  // A layer inserted at a branch header goes first in that branch.
  QCOMPARE(m.insertLayer(5, loom::LayerKind::Linear), 6);
  QCOMPARE(doc.plan().model.layers[1].branches[1].layers.size(), std::size_t(2));
  QCOMPARE(m.moveLayer(5, -1), 2);  // branch 1 swaps with branch 0
  QCOMPARE(doc.plan().model.layers[1].branches[0].layers.size(), std::size_t(2));
  QCOMPARE(doc.plan().model.layers[1].branches[0].layers[0].out, std::int64_t(64));
}

void TestDesignerModels::errorsMarkTheirRow() {
  PlanDocument doc;
  doc.reset(branch_plan());
  LayerListModel m(&doc);
  QVERIFY(m.setData(m.index(6, LayerListModel::Settings), QVariantMap{{"out", 0}}));  // branch 1's linear
  QVERIFY(m.data(m.index(6, 0), loom::ui::HasErrorRole).toBool());
  QVERIFY(!m.data(m.index(1, 0), loom::ui::HasErrorRole).toBool());  // not the block around it
  QVERIFY(cell(m, 6, 0, Qt::ToolTipRole).contains("expected a positive integer, got 0"));
  QVERIFY(m.rowErrors(5).isEmpty());
}

void TestDesignerModels::deviceTotalsPerRank() {
  PlanDocument doc;
  doc.reset(fourDevicePlan());
  LayerListModel m(&doc);
  QCOMPARE(m.deviceParams(0), std::int64_t(200960));  // stage 0: flatten, linear_1, relu_2
  QCOMPARE(m.deviceParams(1), std::int64_t(200960));
  QCOMPARE(m.deviceParams(2), std::int64_t(32896 + 1290));
  QCOMPARE(m.deviceMemoryBytes(3), doc.info().stage_memory_bytes[1]);
  QVERIFY(m.deviceTotals(2).startsWith(QString::fromUtf8("rank 2 (stage 1 \u00b7 replica 0): 34,186 params")));
}

void TestDesignerModels::devicesFollowDataParallel() {
  PlanDocument doc;
  doc.reset(fourDevicePlan());
  DeviceTableModel m(&doc);
  QCOMPARE(m.rowCount(), 4);
  QCOMPARE(cell(m, 2, DeviceTableModel::Role), QString::fromUtf8("stage 1 \u00b7 replica 0"));
  QCOMPARE(m.data(m.index(3, 0), Qt::DecorationRole).value<QColor>(), loom::ui::device_color(3));
  // Three replicas: each (stage, replica) keeps its device, new ones copy the last host.
  doc.edit("dp", [](loom::Plan& p) { loom::ui::setDataParallel(p, 3); });
  QCOMPARE(m.rowCount(), 6);
  QCOMPARE(hosts(doc.plan()), (std::vector<std::string>{"host0", "host1", "host3", "host2", "host3", "host3"}));
  QCOMPARE(doc.runBlockedReason(), QString());
  doc.edit("dp", [](loom::Plan& p) { loom::ui::setDataParallel(p, 1); });
  QCOMPARE(hosts(doc.plan()), (std::vector<std::string>{"host0", "host2"}));
  // Asynchronous modes replicate the whole model: the two stages fold into one.
  doc.edit("ps", [](loom::Plan& p) { loom::ui::setSyncMode(p, loom::SyncMode::ParameterServer); });
  QCOMPARE(doc.plan().parallel.stages, 1);
  QCOMPARE(m.rowCount(), 2);
  QCOMPARE(cell(m, 1, DeviceTableModel::Role), QString("server 0"));
  QCOMPARE(doc.runBlockedReason(), QString());
  doc.undoStack()->setIndex(0);
  QCOMPARE(hosts(doc.plan()), (std::vector<std::string>{"host0", "host1", "host2", "host3"}));
}

void TestDesignerModels::deviceEditsAndRemoval() {
  PlanDocument doc;
  doc.reset(fourDevicePlan());
  DeviceTableModel m(&doc);
  QVERIFY(m.setData(m.index(1, DeviceTableModel::Kind), "gpu"));
  QCOMPARE(doc.plan().parallel.devices[1].gpu, 0);  // a gpu needs an index: chosen
  QVERIFY(m.flags(m.index(1, DeviceTableModel::Gpu)) & Qt::ItemIsEditable);
  QVERIFY(!(m.flags(m.index(0, DeviceTableModel::Gpu)) & Qt::ItemIsEditable));
  QVERIFY(m.setData(m.index(1, DeviceTableModel::Gpu), 3));
  QVERIFY(m.setData(m.index(1, DeviceTableModel::Host), "node7"));
  QVERIFY(!m.setData(m.index(1, DeviceTableModel::Host), ""));
  QVERIFY(!m.setData(m.index(1, DeviceTableModel::Kind), "tpu"));
  QCOMPARE(doc.plan().parallel.devices[1], (loom::DeviceSpec{loom::DeviceKind::Gpu, "node7", 3}));
  m.addDevice();  // a third replica: one device per stage
  QCOMPARE(m.rowCount(), 6);
  QCOMPARE(doc.plan().parallel.devices[2], (loom::DeviceSpec{loom::DeviceKind::Cpu, "host3", -1}));
  QVERIFY(m.removeDevice(4));  // stage 1 replica 1 -> replica 1 of both stages goes
  QCOMPARE(hosts(doc.plan()), (std::vector<std::string>{"host0", "host3", "host2", "host3"}));
  QVERIFY(m.removeDevice(0));
  QVERIFY(!m.removeDevice(0));  // the last replica stays
  QCOMPARE(doc.plan().parallel.data_parallel, 1);
  QCOMPARE(doc.runBlockedReason(), QString());
}

void TestDesignerModels::placementChecksAndMovesStage() {
  PlanDocument doc;
  doc.reset(fourDevicePlan());
  PlacementModel m(&doc);
  QCOMPARE(m.rowCount(), 6);
  QCOMPARE(m.columnCount(), 4);
  auto state = [&](int row, int col) { return m.data(m.index(row, col), Qt::CheckStateRole).toInt(); };
  QCOMPARE(state(2, 0), int(Qt::Checked));
  QCOMPARE(state(2, 1), int(Qt::Checked));  // replica 1 of stage 0 as well
  QCOMPARE(state(2, 2), int(Qt::Unchecked));
  QVERIFY(m.data(m.index(2, 0), Qt::BackgroundRole).isValid());
  QVERIFY(!m.data(m.index(2, 2), Qt::BackgroundRole).isValid());
  QVERIFY(m.setData(m.index(2, 3), Qt::Checked, Qt::CheckStateRole));  // relu_2 -> stage 1
  QCOMPARE(doc.plan().model.layers[2].stage, 1);
  QCOMPARE(state(2, 2), int(Qt::Checked));
  QVERIFY(!m.setData(m.index(2, 3), Qt::Unchecked, Qt::CheckStateRole));
  QCOMPARE(doc.runBlockedReason(), QString());
  // Servers hold no layers (the parameter server folds the pipeline into one stage).
  doc.edit("ps", [](loom::Plan& p) { loom::ui::setSyncMode(p, loom::SyncMode::ParameterServer); });
  QCOMPARE(m.columnCount(), 3);
  QVERIFY(!m.data(m.index(0, 2), Qt::CheckStateRole).isValid());
  QVERIFY(!m.setData(m.index(0, 2), Qt::Checked, Qt::CheckStateRole));
  // A branch layer moves its whole branch.
  doc.reset(branch_plan());
  doc.edit("stages", [](loom::Plan& p) { loom::ui::setStages(p, 2); });
  QVERIFY(m.place(4, 1));  // flatten, parallel, linear, relu, [linear] of branch 1 -> stage 1
  QCOMPARE(doc.plan().model.layers[1].branches[1].stage, 1);
  QCOMPARE(doc.plan().model.layers[1].branches[1].layers[0].stage, 1);
  QCOMPARE(doc.plan().model.layers[1].branches[0].stage, -1);
}

void TestDesignerModels::placementDragIsOneStep() {
  PlanDocument doc;
  doc.reset(fourDevicePlan());
  PlacementModel m(&doc);
  m.beginDrag();
  for (int row = 1; row < 6; ++row) m.setData(m.index(row, 2), Qt::Checked, Qt::CheckStateRole);
  m.endDrag();
  QCOMPARE(doc.undoStack()->count(), 1);
  for (int row = 1; row < 6; ++row) QCOMPARE(doc.plan().model.layers[static_cast<std::size_t>(row)].stage, 1);
  m.beginDrag();  // a second drag is a second step
  m.setData(m.index(1, 0), Qt::Checked, Qt::CheckStateRole);
  m.endDrag();
  QCOMPARE(doc.undoStack()->count(), 2);
  m.setData(m.index(2, 0), Qt::Checked, Qt::CheckStateRole);  // clicks outside a drag do not merge
  m.setData(m.index(3, 0), Qt::Checked, Qt::CheckStateRole);
  QCOMPARE(doc.undoStack()->count(), 4);
  doc.undoStack()->setIndex(1);
  QCOMPARE(doc.plan().model.layers[1].stage, 1);
}

void TestDesignerModels::modelTesterSurvivesEdits() {
  PlanDocument doc;
  LayerListModel layers(&doc);
  DeviceTableModel devices(&doc);
  PlacementModel placement(&doc);
  QAbstractItemModelTester t1(&layers, QAbstractItemModelTester::FailureReportingMode::QtTest);
  QAbstractItemModelTester t2(&devices, QAbstractItemModelTester::FailureReportingMode::QtTest);
  QAbstractItemModelTester t3(&placement, QAbstractItemModelTester::FailureReportingMode::QtTest);
  doc.reset(fourDevicePlan());
  layers.insertLayer(0, loom::LayerKind::Parallel);
  layers.addBranch(1);
  devices.addDevice();
  placement.place(0, 5);
  doc.edit("ps", [](loom::Plan& p) { loom::ui::setSyncMode(p, loom::SyncMode::Ssp); });
  doc.undoStack()->setIndex(0);
  QCOMPARE(layers.rowCount(), 6);
}

QTEST_GUILESS_MAIN(TestDesignerModels)
#include "test_designer_models.moc"
