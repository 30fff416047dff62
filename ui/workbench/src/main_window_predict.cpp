// Run > Predict and Run > Compare with prediction: the designer's plan, or the plan of the
// measured run on screen, predicted from this machine's runs in the store (loom/predict),
// stored as a run of kind "predicted" and opened beside what was measured. Run >
// Calibrate: the short real runs a store without history needs first.
#include <QAction>
#include <QMessageBox>
#include <QPushButton>

#include <utility>

#include "loom/predict/calibration_runs.h"
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
    if (stored.error().code == ErrorCode::NotFound && calibrateBlockedReason().isEmpty()) {
      offerCalibration(stored.error());
    } else {
      showError(tr("Cannot predict this plan"), describe(stored.error()));
    }
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
  const QString blocked = calibrateBlockedReason();
  calibrate_action_->setEnabled(blocked.isEmpty());
  calibrate_action_->setToolTip(
      blocked.isEmpty() ? tr("Run this plan briefly in the layouts prediction needs (short real runs, stored and tagged "
                             "\u201ccalibration\u201d), then predict it; for a store with no runs of this model yet")
                        : tr("Cannot calibrate: %1").arg(blocked));
}

// ---- Run > Calibrate, Reset calibration ----

bool MainWindow::resetCalibration(const std::vector<std::int64_t>& runs) {
  if (runs.empty()) return false;
  if (!save_prompt_) {  // scripted (tests): no modal dialogs
    const auto answer = QMessageBox::question(
        this, tr("Reset calibration"),
        tr("Stop the %1 runs this machine's predictions come from calibrating? They stay stored (tagged \u201c%2\u201d) "
           "to open and compare; predictions then need new runs (Run > Calibrate).")
            .arg(runs.size())
            .arg(predict::kNotCalibratingTag));
    if (answer != QMessageBox::Yes) return false;
  }
  auto store = store::RunStore::open(dbPath().toStdString());
  Status reset = store.ok() ? predict::stop_calibrating(*store, runs) : Status(store.error());
  if (!reset.ok()) {
    showError(tr("Cannot reset the calibration"), describe(reset.error()));
    return false;
  }
  setStateText(tr("Calibration reset: %1 runs tagged \u201c%2\u201d (untag one in the Runs tab to bring it back)")
                   .arg(runs.size())
                   .arg(predict::kNotCalibratingTag));
  refreshRunList();  // its reload reads the calibration again
  return true;
}

QString MainWindow::calibrateBlockedReason() const {
  if (controller_.isRunning() || calibration_runs_.isActive()) return tr("a run is in progress");
  if (const QString blocked = document_.runBlockedReason(); !blocked.isEmpty()) return blocked;
  const Status calibratable = predict::check_calibratable(document_.plan());
  return calibratable.ok() ? QString() : QString::fromStdString(calibratable.error().message);
}

// Predict found costs missing: say which, and offer the runs that measure them.
void MainWindow::offerCalibration(const loom::Error& error) {
  auto runs = predict::calibration_runs(document_.plan(), calibration_steps_);
  const int count = runs.ok() ? int(runs->size()) : 0;
  const QString offer = tr("Run > Calibrate runs this plan briefly in the %1 layouts prediction needs (%2 steps each, "
                           "stored as runs tagged \u201ccalibration\u201d), then predicts it.")
                            .arg(count).arg(calibration_steps_);
  const QString missing = QString::fromStdString(error.message);
  if (save_prompt_) return setStateText(tr("Cannot predict this plan: %1 · %2").arg(missing, offer));  // scripted
  setStateText(tr("Cannot predict this plan: %1").arg(missing));
  QMessageBox box(QMessageBox::Information, tr("Cannot predict this plan yet"),
                  tr("This machine has no measured costs for some parts of this plan."), QMessageBox::NoButton, this);
  box.setInformativeText(offer + "\n\n" + tr("Or run plans with these layers here, then predict again."));
  box.setDetailedText(missing);
  QPushButton* calibrate = box.addButton(tr("Calibrate now"), QMessageBox::AcceptRole);
  box.addButton(QMessageBox::Close);
  box.exec();
  if (box.clickedButton() == calibrate) calibratePlan();
}

bool MainWindow::calibratePlan() {
  if (const QString blocked = calibrateBlockedReason(); !blocked.isEmpty()) {
    showError(tr("Cannot calibrate this plan"), blocked);
    return false;
  }
  auto runs = predict::calibration_runs(document_.plan(), calibration_steps_);
  std::vector<RunSequence::Item> items;
  for (predict::CalibrationRun& run : *runs) items.push_back({std::move(run.plan), QString::fromStdString(run.what)});
  calibrating_plan_ = document_.plan();
  return calibration_runs_.start(std::move(items));
}

void MainWindow::connectCalibrationSignals() {
  connect(&calibration_runs_, &RunSequence::runRequested, this,
          [this](const loom::Plan& plan, const QString& label, int index, int count) {
            if (controller_.isRunning()) return calibration_runs_.abandon(tr("another run is in progress"));
            sequence_label_ = tr("Calibration run %1 of %2").arg(index + 1).arg(count);
            startJob(plan, nullptr, sequence_label_ + ": " + label);
          });
  connect(this, &MainWindow::runFinished, &calibration_runs_, &RunSequence::onRunFinished);
  connect(&calibration_runs_, &RunSequence::runCompleted, this, &MainWindow::onCalibrationRunCompleted);
  connect(&calibration_runs_, &RunSequence::completed, this, &MainWindow::onCalibrationCompleted);
  connect(&calibration_runs_, &RunSequence::failed, this, [this](const QString& why) {
    calibrating_plan_.reset();
    sequence_label_.clear();
    showError(tr("Calibration stopped"), why + tr("; the runs that completed stay stored and calibrate."));
    updatePredictionActions();
  });
}

// Tagged as each run completes, as `loom-cli calibrate` does: a calibration cut short
// leaves its finished runs labelled.
void MainWindow::onCalibrationRunCompleted(qint64 runId) {
  auto store = store::RunStore::open(dbPath().toStdString());
  Status tagged = store.ok() ? store->set_tags(runId, {predict::kCalibrationTag}) : Status(store.error());
  if (!tagged.ok()) showError(tr("Cannot tag run %1").arg(runId), describe(tagged.error()));
}

// After the runFinished that ended the last run has been handled everywhere, so the
// prediction opens once the window has left the run.
void MainWindow::onCalibrationCompleted(const QList<qint64>& runIds) {
  QMetaObject::invokeMethod(
      this,
      [this, runs = runIds.size()] {
        sequence_label_.clear();
        if (!calibrating_plan_) return;  // forgotten meanwhile
        const loom::Plan plan = *std::exchange(calibrating_plan_, std::nullopt);
        auto stored = predict_into_store(dbPath(), plan);
        updatePredictionActions();
        if (!stored.ok()) {
          showError(tr("Calibrated, but the plan still cannot be predicted"), describe(stored.error()));
          emit calibrated(0);
          return;
        }
        openStoredPrediction(stored->id, stored->step_ms, stored->samples_per_s);
        setStateText(tr("Calibrated from %1 · predicted %2 ms a step, %3 samples/s (run %4, predicted, not measured)")
                         .arg(runs == 1 ? tr("1 run") : tr("%1 runs").arg(runs))
                         .arg(stored->step_ms, 0, 'f', 2)
                         .arg(stored->samples_per_s, 0, 'f', 0)
                         .arg(stored->id));
        emit calibrated(stored->id);
      },
      Qt::QueuedConnection);
}

}  // namespace loom::ui
