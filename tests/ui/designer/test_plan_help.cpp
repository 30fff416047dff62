// What the designer says, without a display:
//  - every strategy field has a name and a tooltip, with the formula where there is one
//    and a line computed for the plan (the bubble of a 2-stage, 8-micro-batch plan);
//  - validation errors come in the window's words: the control's place ("Strategy ›
//    Training › Global batch", "Placement › fc2", "Devices › rank 1 › Kind") and advice
//    about controls, never JSON ('"stage": 1', "parallel.stages", "/model/layers/3");
//  - the Placement grid marks the cells an error concerns;
//  - undo steps name the edit ("Change fc2 output to 64", "Move fc2 to stage 1",
//    "Place fc2, relu2 on stage 1", "Change rank 1 host to node2"), and a merged step
//    takes the newest value's text.
#include <QRegularExpression>
#include <QUndoStack>
#include <QtTest>

#include "loom/ui/designer/device_table_model.h"
#include "loom/ui/designer/layer_list_model.h"
#include "loom/ui/designer/placement_model.h"
#include "loom/ui/designer/plan_document.h"
#include "loom/ui/designer/plan_help.h"
#include "loom/ui/designer/strategy.h"
#include "loom/ui/item_roles.h"

using namespace loom::ui;

namespace {

// The default MLP (flatten_0, fc1, relu_2, fc2, relu_4, classifier) with readable names.
loom::Plan mlp() {
  loom::Plan plan = loom::default_plan();
  const char* names[] = {"flatten_0", "fc1", "relu_2", "fc2", "relu_4", "classifier"};
  for (std::size_t i = 0; i < plan.model.layers.size(); ++i) plan.model.layers[i].name = names[i];
  return plan;
}

loom::Plan twoStages(int firstOnStageOne) {
  loom::Plan plan = mlp();
  plan.parallel.stages = 2;
  plan.parallel.microbatches = 8;
  plan.parallel.devices.assign(2, loom::DeviceSpec{});
  for (std::size_t i = 0; i < plan.model.layers.size(); ++i) plan.model.layers[i].stage = int(i) >= firstOnStageOne;
  return plan;
}

// No JSON left in a message a person reads next to a control.
void expectNoJson(const QString& text) {
  static const QRegularExpression key(QStringLiteral("\"\\w+\"\\s*:"));
  QVERIFY2(!key.match(text).hasMatch(), qPrintable(text));
  QVERIFY2(!text.contains("/model/") && !text.contains("/parallel/") && !text.contains("/training/"), qPrintable(text));
  QVERIFY2(!text.contains("parallel.") && !text.contains("data_parallel") && !text.contains("grad_accumulation"),
           qPrintable(text));
}

int rowNamed(const PlacementModel& m, const QString& name) {
  for (int r = 0; r < m.rowCount(); ++r) {
    if (m.headerData(r, Qt::Vertical).toString().trimmed() == name) return r;
  }
  return -1;
}

}  // namespace

class TestPlanHelp : public QObject {
  Q_OBJECT

 private slots:
  void everyStrategyFieldIsExplained() {
    const loom::Plan plan = twoStages(3);
    const loom::ModelInfo info = loom::infer_model(plan, nullptr);
    QVERIFY(strategyFieldPaths().size() >= 18);
    for (const QString& path : strategyFieldPaths()) {
      QVERIFY2(!strategyFieldName(path).isEmpty(), qPrintable(path));
      QVERIFY2(!strategyFieldGroup(path).isEmpty(), qPrintable(path));
      QVERIFY2(strategyFieldHelp(plan, info, path).size() > 40, qPrintable(path));
    }
    for (const char* key : {"rank", "slowdown", "delay", "delay_ms"}) {
      const QString path = QStringLiteral("/parallel/stragglers/0/%1").arg(key);
      QVERIFY2(!strategyFieldName(path).isEmpty() && !strategyFieldHelp(plan, info, path).isEmpty(), qPrintable(path));
    }
    const QString micro = strategyFieldHelp(plan, info, "/parallel/microbatches");
    QVERIFY2(micro.contains("(p-1)/(m+p-1)") && micro.contains("p = 2, m = 8") && micro.contains("1/9 = 11%"),
             qPrintable(micro));
    QVERIFY(strategyFieldHelp(plan, info, "/parallel/microbatches").contains("micro-batches of 8 samples"));  // 64 / 8
    QVERIFY(strategyFieldHelp(plan, info, "/parallel/bucket_mb").contains("bucket size"));
    QVERIFY(strategyFieldHelp(plan, info, "/parallel/grad_accumulation").contains("global batch / (replicas × k)"));
    QVERIFY(strategyFieldHelp(plan, info, "/parallel/sync/bound").contains("fastest step − slowest step ≤ s"));
    QVERIFY(strategyFieldHelp(plan, info, "/parallel/sync/period").contains("1/H"));
  }

  // Resume refusals (host::prepare_resume) as the window shows them: no JSON path, no
  // command-line flag, no plan-file key given as if the window had it.
  void resumeErrorsAreInTheWindowsWords() {
    const loom::Plan plan = loom::default_plan();
    const QString invalid = loom::ui::describeResumeError(
        &plan, loom::make_error(loom::ErrorCode::InvalidArgument,
                                "the resumed plan is not valid: /training/batch: must be at least 1"));
    QVERIFY2(invalid.contains("Strategy › Training › Global batch") && !invalid.contains("/training"), qPrintable(invalid));
    const QString replicas = loom::ui::describeResumeError(
        &plan, loom::make_error(loom::ErrorCode::InvalidArgument,
                                "--replicas changes data-parallel all-reduce runs only; this one has 2 stage(s) and sync mode allreduce",
                                "resume it without --replicas"));
    QVERIFY2(!replicas.contains("--replicas") && replicas.contains("another number of replicas") &&
                 replicas.contains("on its own replica count"),
             qPrintable(replicas));
    const QString checkpoint = loom::ui::describeResumeError(
        nullptr, loom::make_error(loom::ErrorCode::NotFound, "run 7 saved no complete checkpoint (looked in /x)",
                                  "set training.checkpoint_every in the plan; a stopped run also saves one when it stops"));
    QVERIFY2(checkpoint.startsWith("run 7 saved no complete checkpoint") && !checkpoint.contains("training.checkpoint_every") &&
                 checkpoint.contains("the designer has no field for it"),
             qPrintable(checkpoint));
  }

  void errorsAreInTheWindowsWords() {
    struct Case {
      const char* what;
      std::function<void(loom::Plan&)> broken;
      QString place;
      QString advice;
    };
    const std::vector<Case> cases = {
        {"stage without layers", [](loom::Plan& p) { p = twoStages(99); }, "Strategy › Pipeline › Stages",
         "place some layers on stage 1 in the Placement tab"},
        {"batch split", [](loom::Plan& p) {
           p.parallel.data_parallel = 3;
           p.parallel.devices.assign(3, loom::DeviceSpec{});
           p.training.batch = 100;
         }, "Strategy › Training › Global batch", "Replicas × Gradient accumulation = 3"},
        // Core words this one differently as the GPU path evolves: any place, advice about Backend.
        {"nccl on cpu", [](loom::Plan& p) { p.parallel.backend = loom::CommBackend::Nccl; }, {}, "mpi"},
        {"host", [](loom::Plan& p) { p.parallel.devices[0].host.clear(); }, "Devices › rank 0 › Host",
         "Host column"},
        {"stage order", [](loom::Plan& p) {
           p = twoStages(3);
           p.model.layers[4].stage = 0;
         }, "Placement › relu_4", "stages must follow model order"},
        {"sync mode with stages", [](loom::Plan& p) {
           p = twoStages(3);
           p.parallel.sync.mode = loom::SyncMode::Ssp;
           p.parallel.devices.assign(3, loom::DeviceSpec{});
         }, "Strategy › Pipeline › Stages", "set Strategy › Pipeline › Stages to 1"},
        {"duplicate name", [](loom::Plan& p) { p.model.layers[3].name = "fc1"; }, "Model › fc1 › Name",
         "also used by fc1"},
    };
    for (const Case& c : cases) {
      loom::Plan plan = mlp();
      c.broken(plan);
      const auto errors = loom::validate_plan(plan);
      QVERIFY2(!errors.empty(), c.what);
      bool found = false;
      for (const loom::PlanError& e : errors) {
        const ShownError shown = describePlanError(plan, e);
        QVERIFY2(!shown.place.isEmpty(), c.what);
        expectNoJson(shown.place + ": " + shown.text);
        if ((c.place.isEmpty() || shown.place == c.place) && shown.text.contains(c.advice)) found = true;
      }
      QVERIFY2(found, qPrintable(QStringLiteral("%1: %2").arg(c.what).arg(
                          describePlanError(plan, errors.front()).place + ": " + describePlanError(plan, errors.front()).text)));
    }
  }

  void placementMarksTheCellsAnErrorConcerns() {
    PlanDocument doc;
    doc.reset(twoStages(99));  // everything on stage 0: stage 1 (rank 1) is empty
    PlacementModel m(&doc);
    QVERIFY(m.headerData(1, Qt::Horizontal, HasErrorRole).toBool());
    QVERIFY(!m.headerData(0, Qt::Horizontal, HasErrorRole).toBool());
    QVERIFY(m.headerData(1, Qt::Horizontal, Qt::ToolTipRole).toString().contains("Stage 1 has no layers"));
    for (int r = 0; r < m.rowCount(); ++r) {
      QVERIFY(m.data(m.index(r, 1), HasErrorRole).toBool());
      QVERIFY(!m.data(m.index(r, 0), HasErrorRole).toBool());
    }
    QVERIFY(m.data(m.index(0, 1), Qt::ToolTipRole).toString().contains("Stage 1 has no layers"));
    QVERIFY(m.place(rowNamed(m, "classifier"), 1));  // fixes it
    QVERIFY(!m.headerData(1, Qt::Horizontal, HasErrorRole).toBool());
    QVERIFY(!m.data(m.index(0, 1), HasErrorRole).toBool());

    // A layer on an earlier stage than the one before it: its cell is marked, not the others.
    doc.reset(twoStages(3));
    const int relu = rowNamed(m, "relu_4");
    doc.edit("back", [](loom::Plan& p) { p.model.layers[4].stage = 0; });
    QVERIFY(m.data(m.index(relu, 0), HasErrorRole).toBool());   // where it is now
    QVERIFY(!m.data(m.index(relu, 1), HasErrorRole).toBool());
    QVERIFY(!m.data(m.index(relu - 1, 1), HasErrorRole).toBool());
    QVERIFY(m.data(m.index(relu, 0), Qt::ToolTipRole).toString().contains("stages must follow model order"));
  }

  void undoStepsNameTheEdit() {
    PlanDocument doc;
    doc.reset(twoStages(3));
    QUndoStack* undo = doc.undoStack();
    LayerListModel layers(&doc);
    const int fc2 = layers.rowForAddress({3});
    QVERIFY(layers.setData(layers.index(fc2, LayerListModel::Settings), QVariantMap{{"out", 64}, {"bias", true}}));
    QCOMPARE(undo->undoText(), QString("Change fc2 output to 64"));
    QVERIFY(layers.setData(layers.index(fc2, LayerListModel::Settings), QVariantMap{{"out", 64}, {"bias", false}}));
    QCOMPARE(undo->undoText(), QString("Turn off fc2 bias"));
    QVERIFY(layers.setData(layers.index(fc2, LayerListModel::Stage), 0));
    QCOMPARE(undo->undoText(), QString("Move fc2 to stage 0"));
    undo->undo();
    QCOMPARE(layers.moveLayer(fc2, 1), fc2 + 1);
    QCOMPARE(undo->undoText(), QString("Move fc2 down"));
    undo->undo();

    PlacementModel placement(&doc);
    QVERIFY(placement.place(rowNamed(placement, "fc2"), 0));
    QCOMPARE(undo->undoText(), QString("Place fc2 on stage 0"));
    undo->undo();
    placement.beginDrag();
    QVERIFY(placement.place(rowNamed(placement, "relu_2"), 1));
    QVERIFY(placement.place(rowNamed(placement, "fc1"), 1));
    placement.endDrag();
    QCOMPARE(undo->undoText(), QString("Place relu_2, fc1 on stage 1"));
    undo->undo();

    DeviceTableModel devices(&doc);
    QVERIFY(devices.setData(devices.index(1, DeviceTableModel::Host), "node2"));
    QCOMPARE(undo->undoText(), QString("Change rank 1 host to node2"));

    // Typing 1, 2, 8 into one field is one step, named after what it ends at.
    doc.edit("Change Global batch to 1", [](loom::Plan& p) { p.training.batch = 1; }, 7);
    doc.edit("Change Global batch to 12", [](loom::Plan& p) { p.training.batch = 12; }, 7);
    doc.edit("Change Global batch to 120", [](loom::Plan& p) { p.training.batch = 120; }, 7);
    QCOMPARE(undo->undoText(), QString("Change Global batch to 120"));
    for (int i = 0; i < undo->count(); ++i) QVERIFY2(!undo->text(i).contains('/'), qPrintable(undo->text(i)));
  }
};

QTEST_MAIN(TestPlanHelp)
#include "test_plan_help.moc"
