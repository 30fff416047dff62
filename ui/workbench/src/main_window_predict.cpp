// Run > Predict and Run > Compare with prediction: the designer's plan, or the plan of the
// measured run on screen, predicted from this machine's runs in the store (loom/predict),
// stored as a run of kind "predicted" and opened beside what was measured.
#include <QAction>

#include "loom/predict/predictor.h"
#include "loom/predict/stored_prediction.h"
#include "loom/trace/machine.h"
#include "loom/ui/workbench/main_window.h"
#include "loom/ui/workbench/what_if_panel.h"

namespace loom::ui {

namespace {

struct Stored {
  std::int64_t id = 0;
  double step_ms = 0, samples_per_s = 0;
};

// Predicts `plan` from this host's runs in the store at `path` and stores the prediction.
Expected<Stored> predict_into_store(const QString& path, const Plan& plan) {
  auto store = store::RunStore::open(path.toStdString());
  if (!store.ok()) return store.error();
  auto calibration = predict::calibrate(*store, machine::host_name());
  if (!calibration.ok()) return calibration.error();
  auto prediction = predict::predict_step(plan, *calibration, {machine::cores_available(), nullptr});
  if (!prediction.ok()) return prediction.error();
  auto id = predict::store_prediction(*store, plan, *prediction, *calibration);
  if (!id.ok()) return id.error();
  return Stored{*id, prediction->step_ms, prediction->samples_per_s};
}

QString describe(const Error& error) {
  QString text = QString::fromStdString(error.message);
  if (!error.hint.empty()) text += "\n\n" + QString::fromStdString(error.hint);
  return text;
}

}  // namespace

qint64 MainWindow::predictPlan() {
  auto stored = predict_into_store(dbPath(), document_.plan());
  if (!stored.ok()) {
    showError(tr("Cannot predict this plan"), describe(stored.error()));
    return 0;
  }
  openStoredPrediction(stored->id, stored->step_ms, stored->samples_per_s);
  return stored->id;
}

void MainWindow::openStoredPrediction(qint64 id, double stepMs, double samplesPerS) {
  refreshRunList();
  openRun(id);
  setStateText(tr("Predicted: %1 ms a step, %2 samples/s (run %3, predicted, not measured)")
                   .arg(stepMs, 0, 'f', 2)
                   .arg(samplesPerS, 0, 'f', 0)
                   .arg(id));
}

qint64 MainWindow::storeWhatIfPrediction() {
  const WhatIf* what_if = what_if_panel_->model();
  if (!what_if->prediction() || !what_if->variedPlan()) return 0;
  auto store = store::RunStore::open(dbPath().toStdString());
  if (!store.ok()) {
    showError(tr("Cannot store the prediction"), describe(store.error()));
    return 0;
  }
  auto id = predict::store_prediction(*store, *what_if->variedPlan(), *what_if->prediction(), what_if->calibration());
  if (!id.ok()) {
    showError(tr("Cannot store the prediction"), describe(id.error()));
    return 0;
  }
  openStoredPrediction(*id, what_if->prediction()->step_ms, what_if->prediction()->samples_per_s);
  return *id;
}

// A searched layout replaces the designer's plan (asking first about unsaved changes).
void MainWindow::openSearchedLayout(const loom::Plan& plan) {
  if (!maybeSave()) return;
  document_.reset(plan);
  planReplaced();
  setStateText(tr("Layout opened in the designer: %1 replicas x %2 stages (not saved yet)")
                   .arg(plan.parallel.data_parallel)
                   .arg(plan.parallel.stages));
}

ComparisonWindow* MainWindow::compareWithPrediction() {
  if (!shownRunHasPredictablePlan()) return nullptr;
  const qint64 measured = shown_.id;
  auto stored = predict_into_store(dbPath(), *shown_.plan);
  if (!stored.ok()) {
    showError(tr("Cannot predict run %1's plan").arg(measured), describe(stored.error()));
    return nullptr;
  }
  refreshRunList();
  setStateText(tr("Run %1 beside its prediction (run %2)").arg(measured).arg(stored->id));
  return openComparison({measured, stored->id});
}

bool MainWindow::shownRunHasPredictablePlan() const {
  return !controller_.isRunning() && shown_.id != 0 && !shown_.predicted && shown_.plan &&
         shown_.status == loom::trace::RunStatus::Completed;
}

void MainWindow::updatePredictionActions() {
  const bool can = shownRunHasPredictablePlan();
  compare_prediction_action_->setEnabled(can);
  compare_prediction_action_->setToolTip(
      can ? tr("Predict run %1's plan from this machine's runs and open the prediction beside it").arg(shown_.id)
          : tr("Open a completed, measured run first"));
  predict_action_->setEnabled(!controller_.isRunning() && document_.runBlockedReason().isEmpty());
}

}  // namespace loom::ui
