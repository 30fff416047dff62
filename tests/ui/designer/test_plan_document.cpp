// PlanDocument tests: edits land in the plan JSON, undo/redo return exactly to earlier
// plans (200 seeded random edit sequences through every model), merge keys make one
// step, invalid values block the run naming the field, and a malformed file leaves the
// document untouched.
#include <QFile>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <random>

#include "loom/ui/designer/device_table_model.h"
#include "loom/ui/designer/layer_list_model.h"
#include "loom/ui/designer/placement_model.h"
#include "loom/ui/designer/plan_document.h"
#include "loom/ui/designer/strategy.h"

using loom::ui::PlanDocument;

namespace {

QString json(const loom::Plan& plan) { return QString::fromStdString(loom::plan_to_json(plan)); }

// One random edit through the models or the strategy functions, as a person would make it.
void randomEdit(std::mt19937& rng, PlanDocument& doc, loom::ui::LayerListModel& layers,
                loom::ui::DeviceTableModel& devices, loom::ui::PlacementModel& placement) {
  auto pick = [&rng](int n) { return n <= 0 ? 0 : std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const int rows = layers.rowCount();
  switch (pick(12)) {
    case 0: layers.insertLayer(pick(rows + 1) - 1, static_cast<loom::LayerKind>(pick(9))); break;
    case 1: if (rows > 1) layers.removeLayer(pick(rows)); break;
    case 2: layers.moveLayer(pick(rows), pick(2) == 0 ? -1 : 1); break;
    case 3: layers.setData(layers.index(pick(rows), loom::ui::LayerListModel::Settings),
                           QVariantMap{{"out", pick(300)}, {"kernel", pick(5)}, {"p", pick(10) / 10.0}});
      break;
    case 4: layers.addBranch(pick(rows)); break;
    case 5: {
      placement.beginDrag();
      for (int k = pick(4); k >= 0; --k) placement.place(pick(placement.rowCount()), pick(placement.columnCount()));
      placement.endDrag();
      break;
    }
    case 6: doc.edit("dp", [&](loom::Plan& p) { loom::ui::setDataParallel(p, 1 + pick(3)); }); break;
    case 7: doc.edit("stages", [&](loom::Plan& p) { loom::ui::setStages(p, 1 + pick(3)); }); break;
    case 8: doc.edit("sync", [&](loom::Plan& p) { loom::ui::setSyncMode(p, static_cast<loom::SyncMode>(pick(4))); }); break;
    case 9: devices.setData(devices.index(pick(devices.rowCount()), loom::ui::DeviceTableModel::Kind),
                            pick(2) ? "gpu" : "cpu");
      break;
    case 10: {  // typing into a spin box: merged steps
      const int key = 1 + pick(2);
      for (int k = pick(4); k >= 0; --k) doc.edit("lr", [&](loom::Plan& p) { p.training.optimizer.lr = pick(100) / 1000.0; }, key);
      if (pick(2)) doc.endMerge();
      break;
    }
    default: doc.edit("straggler", [&](loom::Plan& p) { p.parallel.stragglers.push_back({pick(4), 1.0 + pick(3), {}, 0.0}); });
  }
}

}  // namespace

class TestPlanDocument : public QObject {
  Q_OBJECT
 private slots:
  void startsWithDefaultPlan();
  void editChangesPlanAndUndoRestores();
  void noOpEditPushesNothing();
  void mergeKeyMakesOneStep();
  void invalidLinearOutBlocksRun();
  void modelBeyondThisMachinesMemoryBlocksRun();
  void stagesWithoutLayersBlockRun();
  void malformedFileLeavesDocumentUnchanged();
  void saveThenLoadRoundTrips();
  void randomEditSequencesUndoAndRedoExactly();
};

void TestPlanDocument::startsWithDefaultPlan() {
  PlanDocument doc;
  QCOMPARE(json(doc.plan()), json(loom::default_plan()));
  QVERIFY(!doc.isModified());
  QCOMPARE(doc.runBlockedReason(), QString());
  QCOMPARE(doc.info().layers.size(), std::size_t(6));
}

void TestPlanDocument::editChangesPlanAndUndoRestores() {
  PlanDocument doc;
  QSignalSpy changed(&doc, &PlanDocument::planChanged);
  QSignalSpy modified(&doc, &PlanDocument::modifiedChanged);
  doc.edit("lr", [](loom::Plan& p) { p.training.optimizer.lr = 0.25; });
  QVERIFY(json(doc.plan()).contains("\"lr\": 0.25"));
  QCOMPARE(changed.count(), 1);
  QVERIFY(doc.isModified());
  QCOMPARE(modified.count(), 1);
  QCOMPARE(modified.last().at(0).toBool(), true);
  doc.undoStack()->undo();
  QCOMPARE(json(doc.plan()), json(loom::default_plan()));
  QVERIFY(!doc.isModified());
  QCOMPARE(changed.count(), 2);
  doc.undoStack()->redo();
  QCOMPARE(doc.plan().training.optimizer.lr, 0.25);
}

void TestPlanDocument::noOpEditPushesNothing() {
  PlanDocument doc;
  QSignalSpy changed(&doc, &PlanDocument::planChanged);
  doc.edit("nothing", [](loom::Plan& p) { p.training.batch = 64; });
  QCOMPARE(doc.undoStack()->count(), 0);
  QCOMPARE(changed.count(), 0);
  QVERIFY(!doc.isModified());
}

void TestPlanDocument::mergeKeyMakesOneStep() {
  PlanDocument doc;
  for (int batch : {1, 12, 128}) doc.edit("batch", [&](loom::Plan& p) { p.training.batch = batch; }, 5);
  QCOMPARE(doc.undoStack()->count(), 1);
  doc.endMerge();
  doc.edit("batch", [](loom::Plan& p) { p.training.batch = 256; }, 5);
  QCOMPARE(doc.undoStack()->count(), 2);
  doc.edit("other field", [](loom::Plan& p) { p.training.steps = 3; }, 6);  // another key: its own step
  QCOMPARE(doc.undoStack()->count(), 3);
  doc.undoStack()->undo();
  doc.undoStack()->undo();
  QCOMPARE(doc.plan().training.batch, std::int64_t(128));
  doc.undoStack()->undo();
  QCOMPARE(doc.plan().training.batch, std::int64_t(64));
  // Typing a value and then the original back leaves no step at all.
  doc.undoStack()->clear();
  doc.edit("batch", [](loom::Plan& p) { p.training.batch = 32; }, 9);
  doc.edit("batch", [](loom::Plan& p) { p.training.batch = 64; }, 9);
  QCOMPARE(doc.undoStack()->count(), 0);
}

// 16 million outputs after the 784 inputs: within every per-field limit, but with Adam
// about 225 GiB for the rank: the designer refuses to run it, as loom-cli does.
void TestPlanDocument::modelBeyondThisMachinesMemoryBlocksRun() {
  PlanDocument doc;
  doc.edit("out", [](loom::Plan& p) { p.model.layers[1].out = 16'000'000; });
  const QStringList errors = doc.errorsAt("/model");
  QCOMPARE(errors.size(), 1);
  QVERIFY2(errors[0].contains("more than this machine's"), qPrintable(errors[0]));
  QVERIFY(!doc.runBlockedReason().isEmpty());
  doc.undoStack()->undo();
  QCOMPARE(doc.runBlockedReason(), QString());
}

void TestPlanDocument::invalidLinearOutBlocksRun() {
  PlanDocument doc;
  doc.edit("out", [](loom::Plan& p) { p.model.layers[1].out = 0; });
  const QString reason = doc.runBlockedReason();
  // In the window's words: where the field is, not its JSON path.
  QVERIFY2(reason.startsWith("Model › linear_1 › Settings › out: expected a positive integer, got 0"),
           qPrintable(reason));
  QVERIFY(!doc.errorsAt("/model/layers/1/out").isEmpty());
  QVERIFY(!doc.errorsAt("/model/layers/1").isEmpty());
  QVERIFY(doc.errorsAt("/model/layers/2").isEmpty());
  QVERIFY(doc.errorsAt("/training").isEmpty());
  doc.undoStack()->undo();
  QCOMPARE(doc.runBlockedReason(), QString());
  QVERIFY(doc.errorsAt("/model/layers/1/out").isEmpty());
}

void TestPlanDocument::stagesWithoutLayersBlockRun() {
  PlanDocument doc;
  doc.edit("stages", [](loom::Plan& p) { loom::ui::setStages(p, 3); });
  QCOMPARE(doc.plan().parallel.devices.size(), std::size_t(3));  // the device list followed
  const QString reason = doc.runBlockedReason();
  QVERIFY2(reason.startsWith("Strategy › Pipeline › Stages: stage 1 has no layers; place some layers on stage 1 "
                             "in the Placement tab"),
           qPrintable(reason));
  QVERIFY2(!reason.contains("\"stage\""), qPrintable(reason));  // no JSON advice
  QVERIFY2(reason.endsWith("(and 1 more)"), qPrintable(reason));  // stage 2 as well
  QCOMPARE(doc.errorsAt("/parallel/stages").size(), 2);
  QVERIFY(doc.errorsAt("/parallel/devices").isEmpty());
}

void TestPlanDocument::malformedFileLeavesDocumentUnchanged() {
  QTemporaryDir dir;
  const QString path = dir.filePath("bad.json");
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(R"({"format": "loom-plan/1", "name": "bad",
    "model": {"input": [1, 28, 28], "layers": [{"type": "flatten"}, {"type": "linear", "out": "many"}]},
    "parallel": {"devices": [{"kind": "cpu"}]}})");
  file.close();
  PlanDocument doc;
  doc.edit("lr", [](loom::Plan& p) { p.training.optimizer.lr = 0.5; });
  const loom::Plan before = doc.plan();
  QSignalSpy changed(&doc, &PlanDocument::planChanged);
  const loom::Status status = doc.load(path);
  QVERIFY(!status.ok());
  const QString message = QString::fromStdString(status.error().describe());
  QVERIFY2(message.contains("/model/layers/1/out"), qPrintable(message));
  QVERIFY2(message.contains("bad.json"), qPrintable(message));
  // In the designer's words first, and what to do without leaving for loom-cli.
  QVERIFY2(message.contains("Model › layer 2 › Settings › out (at /model/layers/1/out in the file)"), qPrintable(message));
  QVERIFY2(message.contains("fix that value in the file") && !message.contains("loom-cli"), qPrintable(message));
  QVERIFY(doc.plan() == before);
  QCOMPARE(changed.count(), 0);
  QCOMPARE(doc.undoStack()->count(), 1);
  QVERIFY(doc.isModified());
  QCOMPARE(doc.filePath(), QString());
}

void TestPlanDocument::saveThenLoadRoundTrips() {
  QTemporaryDir dir;
  const QString path = dir.filePath("plan.json");
  PlanDocument doc;
  doc.edit("dp", [](loom::Plan& p) { loom::ui::setDataParallel(p, 2); });
  QVERIFY(doc.isModified());
  QVERIFY(doc.save(path).ok());
  QVERIFY(!doc.isModified());
  QCOMPARE(doc.filePath(), path);
  PlanDocument other;
  QVERIFY(other.load(path).ok());
  QVERIFY(other.plan() == doc.plan());
  QCOMPARE(other.filePath(), path);
  QCOMPARE(other.undoStack()->count(), 0);
  QVERIFY(!doc.save(dir.filePath("missing/dir/plan.json")).ok());
}

void TestPlanDocument::randomEditSequencesUndoAndRedoExactly() {
  std::mt19937 rng(20261121);
  for (int sequence = 0; sequence < 200; ++sequence) {
    PlanDocument doc;
    loom::ui::LayerListModel layers(&doc);
    loom::ui::DeviceTableModel devices(&doc);
    loom::ui::PlacementModel placement(&doc);
    const QString initial = json(doc.plan());
    const int edits = 5 + static_cast<int>(rng() % 20);
    for (int e = 0; e < edits; ++e) randomEdit(rng, doc, layers, devices, placement);
    const QString final = json(doc.plan());
    doc.undoStack()->setIndex(0);
    QCOMPARE(json(doc.plan()), initial);
    QVERIFY(!doc.isModified());
    QCOMPARE(layers.rowCount(), 6);  // the models followed the undo
    doc.undoStack()->setIndex(doc.undoStack()->count());
    QCOMPARE(json(doc.plan()), final);
  }
}

QTEST_GUILESS_MAIN(TestPlanDocument)
#include "test_plan_document.moc"
