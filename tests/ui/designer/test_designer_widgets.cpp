// Designer panel tests, offscreen: the strategy form edits the document, follows undo
// without feeding back, shows validation errors under the field and enables fields by
// strategy, explains every field in a tooltip, shows a 0.25 MiB bucket as 0.25 and
// shrinks into a narrow dock (one column, scrolling); the layer, placement and device
// panels act through the document and list their errors in the window's words. With
// LOOM_DESIGNER_SNAPSHOT_DIR set, each panel is also rendered to a PNG there so a person
// can check the layout.
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLocale>
#include <QSpinBox>
#include <QTableView>
#include <QToolTip>
#include <QtTest>

#include "loom/ui/designer/designer_panel.h"
#include "loom/ui/designer/devices_panel.h"
#include "loom/ui/designer/layer_list_model.h"
#include "loom/ui/designer/placement_panel.h"
#include "loom/ui/designer/plan_document.h"
#include "loom/ui/designer/plan_help.h"
#include "loom/ui/designer/strategy.h"
#include "loom/ui/designer/strategy_panel.h"

using namespace loom::ui;

namespace {

// Two replicas of two stages, one on another host, with a straggler: every panel has
// something to show, and the plan is valid on a build without a GPU path.
loom::Plan fourDevicePlan() {
  loom::Plan plan = loom::default_plan();
  plan.parallel.stages = 2;
  for (std::size_t i = 3; i < plan.model.layers.size(); ++i) plan.model.layers[i].stage = 1;
  loom::ui::setDataParallel(plan, 2);
  plan.parallel.microbatches = 4;
  plan.parallel.devices[3] = {loom::DeviceKind::Cpu, "node1", 0};
  plan.parallel.stragglers.push_back({3, 1.5, loom::DelayDistribution::Exponential, 20.0});
  return plan;
}

void snapshot(QWidget& widget, const char* name) {
  const QByteArray dir = qgetenv("LOOM_DESIGNER_SNAPSHOT_DIR");
  if (dir.isEmpty()) return;
  widget.show();
  QCoreApplication::processEvents();
  QVERIFY(widget.grab().save(QString::fromUtf8(dir) + "/designer-" + name + ".png"));
}

}  // namespace

class TestDesignerWidgets : public QObject {
  Q_OBJECT
 private slots:
  void spinBoxEditsDocumentAndUndoRestoresIt();
  void typingMergesIntoOneStep();
  void invalidValueShowsErrorLabel();
  void fieldsEnabledByStrategy();
  void stragglerRowsFollowDocument();
  void designerPanelAddsLayer();
  void designerPanelShowsBranches();
  void layerSizePastTheLimitIsSaid();
  void placementDragIsOneStep();
  void devicesPanelAddsReplica();
  void everyFieldHasATooltip();
  void bucketShowsItsDecimals();
  void strategyFitsANarrowDock();
  void panelsListTheirErrors();
};

void TestDesignerWidgets::everyFieldHasATooltip() {
  PlanDocument doc;
  doc.reset(fourDevicePlan());
  StrategyPanel panel(&doc);
  QStringList paths = strategyFieldPaths();
  for (const char* key : {"rank", "slowdown", "delay", "delay_ms"}) paths << QStringLiteral("/parallel/stragglers/0/%1").arg(key);
  for (const QString& path : paths) {
    QWidget* editor = panel.fieldEditor(path);
    QVERIFY2(editor, qPrintable(path));
    QVERIFY2(editor->toolTip().size() > 40, qPrintable(path + ": " + editor->toolTip()));
    QCOMPARE(panel.fieldLabel(path)->toolTip(), editor->toolTip());
    QCOMPARE(panel.fieldLabel(path)->text(), strategyFieldName(path));
  }
  // The line computed for the plan follows it.
  QVERIFY(panel.fieldEditor("/parallel/microbatches")->toolTip().contains("p = 2, m = 4"));
  qobject_cast<QSpinBox*>(panel.fieldEditor("/parallel/microbatches"))->setValue(8);
  QVERIFY(panel.fieldEditor("/parallel/microbatches")->toolTip().contains("p = 2, m = 8"));
}

void TestDesignerWidgets::bucketShowsItsDecimals() {
  PlanDocument doc;
  QVERIFY(doc.load(LOOM_SOURCE_DIR "/resources/plans/dp4_mlp_fashion.json").ok());
  StrategyPanel panel(&doc);
  auto* bucket = qobject_cast<QDoubleSpinBox*>(panel.fieldEditor("/parallel/bucket_mb"));
  QVERIFY(bucket);
  QCOMPARE(bucket->text(), QString("0.25"));
  QCOMPARE(doc.plan().parallel.bucket_mb, 0.25);
  bucket->setValue(25);
  QCOMPARE(bucket->text(), QString("25"));
  QCOMPARE(doc.undoStack()->undoText(), QString("Change Bucket (MiB) to 25"));
}

void TestDesignerWidgets::strategyFitsANarrowDock() {
  PlanDocument doc;
  doc.reset(fourDevicePlan());
  StrategyPanel panel(&doc);
  QVERIFY2(panel.minimumSizeHint().width() <= 300 && panel.minimumSizeHint().height() <= 200,
           qPrintable(QStringLiteral("%1x%2").arg(panel.minimumSizeHint().width()).arg(panel.minimumSizeHint().height())));
  panel.resize(360, 500);
  panel.show();
  QVERIFY(QTest::qWaitForWindowExposed(&panel));
  QCOMPARE(panel.columns(), 1);
  panel.resize(1200, 700);
  QTRY_COMPARE(panel.columns(), 2);
  snapshot(panel, "strategy-wide");
}

void TestDesignerWidgets::panelsListTheirErrors() {
  PlanDocument doc;
  doc.reset(fourDevicePlan());
  DesignerPanel layers(&doc);
  PlacementPanel placement(&doc);
  auto* placementErrors = placement.findChild<QLabel*>("errorList");
  QVERIFY(layers.errorList()->isHidden() && placementErrors->isHidden());
  doc.edit("out 0", [](loom::Plan& p) { p.model.layers[1].out = 0; });
  QVERIFY(!layers.errorList()->isHidden());
  QVERIFY2(layers.errorList()->text().contains("Settings › out: expected a positive integer"),
           qPrintable(layers.errorList()->text()));
  doc.undoStack()->undo();
  doc.edit("all on stage 0", [](loom::Plan& p) {
    for (auto& l : p.model.layers) l.stage = 0;
  });
  QVERIFY(layers.errorList()->isHidden());  // a placement matter: listed under Placement
  QVERIFY2(placementErrors->text().contains("stage 1 has no layers") && !placementErrors->text().contains("\""),
           qPrintable(placementErrors->text()));
}

void TestDesignerWidgets::spinBoxEditsDocumentAndUndoRestoresIt() {
  PlanDocument doc;
  StrategyPanel panel(&doc);
  auto* batch = qobject_cast<QSpinBox*>(panel.fieldEditor("/training/batch"));
  QVERIFY(batch);
  QCOMPARE(batch->value(), 64);
  batch->setValue(128);
  QCOMPARE(doc.plan().training.batch, std::int64_t(128));
  doc.undoStack()->undo();
  QCOMPARE(batch->value(), 64);
  QCOMPARE(doc.undoStack()->index(), 0);  // refreshing the widget did not push an edit
  doc.undoStack()->redo();
  QCOMPARE(batch->value(), 128);
  auto* replicas = qobject_cast<QSpinBox*>(panel.fieldEditor("/parallel/data_parallel"));
  replicas->setValue(4);
  QCOMPARE(doc.plan().parallel.devices.size(), std::size_t(4));
}

void TestDesignerWidgets::typingMergesIntoOneStep() {
  PlanDocument doc;
  StrategyPanel panel(&doc);
  auto* steps = qobject_cast<QSpinBox*>(panel.fieldEditor("/training/steps"));
  steps->setFocus();
  steps->selectAll();
  QTest::keyClicks(steps, "250");
  QCOMPARE(doc.plan().training.steps, std::int64_t(250));
  QCOMPARE(doc.undoStack()->count(), 1);
  emit steps->editingFinished();
  steps->setValue(300);
  QCOMPARE(doc.undoStack()->count(), 2);
}

void TestDesignerWidgets::invalidValueShowsErrorLabel() {
  PlanDocument doc;
  StrategyPanel panel(&doc);
  QLabel* error = panel.errorLabel("/training/batch");
  QVERIFY(error);
  QVERIFY(error->isHidden());
  qobject_cast<QSpinBox*>(panel.fieldEditor("/training/batch"))->setValue(0);
  QCOMPARE(error->text(), QString("expected a positive integer, got 0"));
  QVERIFY(!error->isHidden());
  QVERIFY(panel.errorLabel("/training/epochs")->isHidden());  // only the field at fault
  doc.undoStack()->undo();
  QVERIFY(error->isHidden());
}

void TestDesignerWidgets::fieldsEnabledByStrategy() {
  PlanDocument doc;
  StrategyPanel panel(&doc);
  QWidget* bound = panel.fieldEditor("/parallel/sync/bound");
  QVERIFY(!bound->isEnabled());
  auto* mode = qobject_cast<QComboBox*>(panel.fieldEditor("/parallel/sync/mode"));
  mode->setCurrentText("ssp");
  QCOMPARE(doc.plan().parallel.sync.mode, loom::SyncMode::Ssp);
  QVERIFY(bound->isEnabled());
  QVERIFY(panel.fieldEditor("/parallel/sync/servers")->isEnabled());
  QVERIFY(!panel.fieldEditor("/parallel/sync/period")->isEnabled());
  QCOMPARE(doc.plan().parallel.devices.size(), std::size_t(2));  // a server joined
  doc.undoStack()->undo();
  QCOMPARE(mode->currentText(), QString("allreduce"));
  QVERIFY(!bound->isEnabled());
}

void TestDesignerWidgets::stragglerRowsFollowDocument() {
  PlanDocument doc;
  doc.reset(fourDevicePlan());
  StrategyPanel panel(&doc);
  snapshot(panel, "strategy");
  auto* rank = qobject_cast<QSpinBox*>(panel.fieldEditor("/parallel/stragglers/0/rank"));
  QVERIFY(rank);
  rank->setValue(9);
  QCOMPARE(panel.errorLabel("/parallel/stragglers/0/rank")->text(),
           QString("rank 9 is out of range: the plan has ranks 0..3"));
  doc.edit("no stragglers", [](loom::Plan& p) { p.parallel.stragglers.clear(); });
  QCoreApplication::processEvents();  // the old rows are deleted later
  QVERIFY(panel.fieldEditor("/parallel/stragglers/0/rank") == nullptr);
  doc.undoStack()->undo();
  QVERIFY(panel.fieldEditor("/parallel/stragglers/0/rank") != nullptr);
}

void TestDesignerWidgets::designerPanelAddsLayer() {
  PlanDocument doc;
  doc.reset(fourDevicePlan());
  DesignerPanel panel(&doc);
  panel.resize(900, 420);
  snapshot(panel, "layers");
  QCOMPARE(panel.view()->model()->rowCount(), 6);
  QVERIFY(panel.totalsLabel()->text().contains("rank 3 (stage 1"));
  panel.model()->insertLayer(1, loom::LayerKind::Dropout);
  QCOMPARE(panel.view()->model()->rowCount(), 7);
  doc.undoStack()->undo();
  QCOMPARE(panel.view()->model()->rowCount(), 6);
}

void TestDesignerWidgets::designerPanelShowsBranches() {
  PlanDocument doc;
  QVERIFY(doc.load(LOOM_SOURCE_DIR "/resources/plans/branches_example.json").ok());
  DesignerPanel panel(&doc);
  panel.resize(900, 520);
  snapshot(panel, "layers-branches");
  // inception, 2 branch headers with 3 layers each, then 5 top-level layers.
  QCOMPARE(panel.view()->model()->rowCount(), 14);
  QCOMPARE(panel.view()->model()->index(1, 0).data().toString(), QString("  branch 0"));
  QCOMPARE(panel.view()->model()->index(2, 0).data().toString(), QString("    narrow_conv"));
  QCOMPARE(panel.view()->model()->index(2, LayerListModel::Settings).data().toString(), QString("8 ch, k3 s1 p1"));
  QCOMPARE(panel.view()->model()->index(0, LayerListModel::Output).data().toString(), QString("16x14x14"));
}

// Typing a layer size past the plan's limit is said, not cut without a word (the spin box
// used to stop at 999,999 silently): the tooltip names the limit, finishing the edit keeps
// the limit, and the plan that then needs more memory than the machine cannot be run.
void TestDesignerWidgets::layerSizePastTheLimitIsSaid() {
  PlanDocument doc;
  doc.reset(loom::default_plan());
  QCOMPARE(doc.plan().model.layers.at(1).kind, loom::LayerKind::Linear);
  DesignerPanel panel(&doc);
  panel.resize(900, 520);
  panel.show();
  QVERIFY(QTest::qWaitForWindowExposed(&panel));
  panel.view()->edit(panel.view()->model()->index(1, LayerListModel::Settings));
  auto* spin = panel.view()->findChild<QSpinBox*>("out");
  QVERIFY(spin);
  spin->setFocus();
  spin->selectAll();
  QTest::keyClicks(spin, "99999999999");
  const QString limit = QLocale().toString(16777216);
  QVERIFY2(QToolTip::text().contains("is at most " + limit), qPrintable(QToolTip::text()));
  QTest::keyClick(spin, Qt::Key_Return);
  QTRY_COMPARE(doc.plan().model.layers.at(1).out, std::int64_t(16777216));
  QVERIFY2(doc.runBlockedReason().contains("memory"), qPrintable(doc.runBlockedReason()));
}

void TestDesignerWidgets::placementDragIsOneStep() {
  PlanDocument doc;
  doc.reset(fourDevicePlan());
  PlacementPanel panel(&doc);
  panel.resize(640, 360);
  panel.show();
  QVERIFY(QTest::qWaitForWindowExposed(&panel));
  snapshot(panel, "placement");
  QTableView* view = panel.view();
  auto centre = [&](int row, int col) { return view->visualRect(view->model()->index(row, col)).center(); };
  QTest::mousePress(view->viewport(), Qt::LeftButton, {}, centre(3, 0));
  for (int row = 4; row < 6; ++row) QTest::mouseMove(view->viewport(), centre(row, 0));
  QTest::mouseRelease(view->viewport(), Qt::LeftButton, {}, centre(5, 0));
  for (std::size_t i = 0; i < 6; ++i) QCOMPARE(doc.plan().model.layers[i].stage, 0);
  QCOMPARE(doc.undoStack()->count(), 1);
}

void TestDesignerWidgets::devicesPanelAddsReplica() {
  PlanDocument doc;
  doc.reset(fourDevicePlan());
  DevicesPanel panel(&doc);
  panel.resize(560, 260);
  snapshot(panel, "devices");
  QCOMPARE(panel.view()->model()->rowCount(), 4);
  doc.edit("dp", [](loom::Plan& p) { loom::ui::setDataParallel(p, 3); });
  QCOMPARE(panel.view()->model()->rowCount(), 6);
}

QTEST_MAIN(TestDesignerWidgets)
#include "test_designer_widgets.moc"
