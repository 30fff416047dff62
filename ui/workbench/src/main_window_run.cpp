// MainWindow: running a plan and showing runs. A run goes Run → RunController starts the
// job → runCreated(id) → RunFeed follows the run in the store → batches update the views;
// the job's end (finished) and the feed's end (the last batch) arrive independently.
#include <QAction>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QInputDialog>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QPlainTextEdit>
#include <QTextCursor>
#include <QPointer>
#include <QProgressBar>
#include <QTimer>

#include <cmath>

#include "loom/ui/timeline/timeline_view.h"
#include "loom/ui/workbench/comparison_window.h"
#include "loom/ui/workbench/main_window.h"
#include "loom/ui/workbench/run_browser.h"

#include "loom/host/oversubscription.h"
#include "loom/host/resume.h"
#include "loom/ui/designer/plan_help.h"
#include "loom/store/run_store.h"

namespace loom::ui {

void MainWindow::connectRunSignals() {
  connect(&controller_, &RunController::runCreated, this, &MainWindow::onRunCreated);
  connect(&controller_, &RunController::progress, this, &MainWindow::onProgress);
  // The launch log shows the run's stored log as the feed delivers it (the launch
  // command, then mpirun's output), the same for a live run and a reopened one.
  connect(&controller_, &RunController::finished, this, &MainWindow::onRunFinished);
  connect(&feed_, &RunFeed::batchReady, this, &MainWindow::onBatch);
  connect(&feed_, &RunFeed::failed, this, [this](const QString& message) {
    showError(tr("Cannot read the run database"), message);
  });
  connect(views_.timeline(), &timeline::TimelineView::followLatestChanged, follow_action_, &QAction::setChecked);
}

// A lesson's runs start like the designer's plan, so they show live on the timeline; a
// job already running (started by hand meanwhile) stops the lesson instead.
void MainWindow::connectLessonSignals() {
  connect(&lesson_session_, &LessonSession::runRequested, this,
          [this](const loom::Plan& plan, const QString& label, int index, int count) {
            if (controller_.isRunning()) return lesson_session_.abandon(tr("another run is in progress"));
            lesson_session_.setDbPath(controller_.dbPath());
            sequence_label_ = tr("Lesson run %1 of %2").arg(index + 1).arg(count);
            startJob(plan, nullptr, sequence_label_ + ": " + label);
          });
  connect(this, &MainWindow::runFinished, &lesson_session_, &LessonSession::onRunFinished);
}

void MainWindow::runPlan() {
  if (controller_.isRunning() || !document_.runBlockedReason().isEmpty()) return;
  sequence_label_.clear();
  startJob(document_.plan(), nullptr,
           tr("Starting %1 ranks…").arg(loom::world_size(document_.plan())) + oversubscriptionSuffix());
}

void MainWindow::startJob(const loom::Plan& plan, const loom::host::ResumeRequest* resume, const QString& state) {
  feed_.stop();  // a stored run still being read must not pour into the new run's views
  log_->clear();
  launch_log_.clear();
  views_.clear(layerNames());
  current_run_ = 0;
  opened_stored_ = false;
  clearShownRun();
  running_plan_ = plan;
  run_state_ = state;
  controller_.start(plan, resume);
  progress_bar_->setRange(0, 0);  // busy until the first rank reports its step count
  progress_bar_->setVisible(true);
  rate_label_->clear();
  run_clock_->start();
  elapsed_timer_->start();
  updateRunState();
}

// Reads one run row and one checkpoint header on this thread: milliseconds, and the
// answer decides whether a dialog opens.
void MainWindow::resumeRun() {
  if (controller_.isRunning() || !(shown_.status && loom::trace::resumable(*shown_.status))) return;
  const qint64 runId = shown_.id;
  auto store = loom::store::RunStore::open(dbPath().toStdString());
  if (!store.ok()) return showError(tr("Cannot read the run database"), QString::fromStdString(store.error().describe()));
  // Why not, in the window's words (a field by its control, not --replicas or a JSON path).
  auto refuse = [&](const loom::Error& error) {
    const auto run = store->load_run(runId);
    const loom::PlanResult parsed = run.ok() ? loom::parse_plan(run->plan_json) : loom::PlanResult{};
    showError(tr("Cannot resume run %1").arg(runId), describeResumeError(parsed.ok() ? &*parsed.plan : nullptr, error));
  };
  auto request = loom::host::prepare_resume(*store, runId);
  if (!request.ok()) return refuse(request.error());
  const int replicas = askResumeReplicas(*request);
  if (replicas <= 0) return;
  if (replicas != request->plan.parallel.data_parallel) {
    request = loom::host::prepare_resume(*store, runId, replicas);
    if (!request.ok()) return refuse(request.error());
  }
  const int ranks = loom::world_size(request->plan);
  sequence_label_.clear();
  startJob(request->plan, &*request,
           tr("Resuming run %1 from its checkpoint at step %2 on %3 ranks…").arg(runId).arg(request->step).arg(ranks));
}

// The replica count of the resumed run: its own, or another for a data-parallel run (the
// global batch stays, so each replica's share changes). 0: the person cancelled.
int MainWindow::askResumeReplicas(const loom::host::ResumeRequest& request) {
  const int own = request.plan.parallel.data_parallel;
  if (resume_prompt_) return resume_prompt_(request);
  const QString where = tr("Run %1 saved a checkpoint at step %2 (%3 ranks). It continues from there as a new run.")
                            .arg(request.from_run).arg(request.step).arg(request.saved_world);
  if (!loom::host::replicas_can_change(request.plan)) {
    const auto answer = QMessageBox::question(this, tr("Resume run %1").arg(request.from_run), where);
    return answer == QMessageBox::Yes ? own : 0;
  }
  bool ok = false;
  const int replicas = QInputDialog::getInt(
      this, tr("Resume run %1").arg(request.from_run),
      where + "\n" + tr("Data-parallel replicas (the global batch of %1 samples stays):").arg(request.plan.training.batch),
      own, 1, 256, 1, &ok);
  return ok ? replicas : 0;
}

void MainWindow::updateResumeAction() {
  const bool can = !controller_.isRunning() && shown_.id != 0 && shown_.status && loom::trace::resumable(*shown_.status);
  resume_action_->setEnabled(can);
  resume_action_->setToolTip(
      can ? tr("Continue run %1 from its newest checkpoint as a new run").arg(shown_.id)
          : tr("Resume continues a failed, stopped, hung or interrupted run from its newest checkpoint "
               "(plans save one every training.checkpoint_every steps, and when stopped); open such a run first"));
}

// " · 4 ranks on 2 cores (oversubscribed)" while the plan's ranks outnumber this machine's
// cores: the status bar says it during the run, the notice over the timeline says more.
QString MainWindow::oversubscriptionSuffix() const {
  const loom::host::Oversubscription load = loom::host::oversubscription_here(document_.plan());
  const loom::host::HostLoad* worst = load.worst();
  if (!worst) return {};
  return tr(" · %1 ranks on %2 cores (oversubscribed)").arg(worst->ranks).arg(worst->cores);
}

void MainWindow::stopRun() {
  if (!controller_.isRunning()) return;
  controller_.stop();
  run_state_ = tr("Stopping run %1: ranks finish their step and flush…").arg(current_run_);
  stop_action_->setEnabled(false);
  setStateText(run_state_);
}

void MainWindow::onRunCreated(qint64 runId) {
  current_run_ = runId;
  setShownRun({runId, loom::trace::RunStatus::Running, running_plan_});
  feed_.follow(dbPath(), runId);
  run_state_ = tr("Run %1 starting").arg(runId);
  updateRunState();
}

void MainWindow::onProgress(const loom::host::JobProgress& p) {
  if (p.total_steps > 0) {
    progress_bar_->setRange(0, static_cast<int>(p.total_steps));
    progress_bar_->setValue(static_cast<int>(p.step));
  }
  if (p.samples_per_s > 0) rate_label_->setText(tr("%1 samples/s").arg(p.samples_per_s, 0, 'f', 0));
  QString text = tr("Run %1: step %2").arg(current_run_).arg(p.step);
  if (!sequence_label_.isEmpty()) text = sequence_label_ + " · " + text;
  if (p.total_steps > 0) text += tr(" of %1").arg(p.total_steps);
  if (!std::isnan(p.loss)) text += tr(", loss %1").arg(p.loss, 0, 'f', 4);
  text += (p.ranks_connected == 1 ? tr(" · 1 rank connected") : tr(" · %1 ranks connected").arg(p.ranks_connected)) +
          oversubscriptionSuffix();
  if (stop_action_->isEnabled()) run_state_ = text;  // keep "Stopping…" once asked
  updateRunState();
}

void MainWindow::onRunFinished(qint64 runId, loom::trace::RunStatus status, const QString& error, double wallSeconds) {
  elapsed_timer_->stop();
  progress_bar_->setVisible(false);
  elapsed_label_->setText(tr("%1 s").arg(wallSeconds, 0, 'f', 1));
  run_state_ = tr("Run %1 %2 after %3 s").arg(runId).arg(QString::fromUtf8(loom::trace::to_text(status))).arg(wallSeconds, 0, 'f', 1);
  if (!error.isEmpty()) run_state_ += " — " + error;
  if (runId == 0) run_state_ = tr("Run could not start — %1").arg(error);
  if (runId != 0 && runId == shown_.id) {
    ShownRun ended = shown_;
    ended.status = status;
    setShownRun(ended);
  }
  // The closed loop: what was predicted for this run, one action away.
  if (shownRunHasPredictablePlan()) run_state_ += tr(" · Run > Compare with prediction puts it beside its prediction");
  updateRunState();
  refreshRunList();
  emit runFinished(runId, status, error);
}

void MainWindow::appendLog(const QString& text) {
  if (text.isEmpty()) return;
  log_->moveCursor(QTextCursor::End);
  log_->insertPlainText(text);
}

void MainWindow::onBatch(std::shared_ptr<const FeedBatch> batch) {
  appendLog(launch_log_.append(batch->log));
  views_.apply(*batch);
  if (batch->first && batch->run_id == shown_.id) {
    ShownRun run = shown_;
    auto parsed = loom::parse_plan(batch->plan_json.toStdString());
    if (parsed.ok() && !run.plan) run.plan = *parsed.plan;
    run.status = batch->status;
    run.resumed_from = batch->resumed_from;
    run.predicted = batch->predicted;
    setShownRun(run);
    // Offered after this batch is drawn: a dialog's event loop would let later batches
    // overtake this one.
    if (opened_stored_ && parsed.ok() && !(*parsed.plan == document_.plan())) {
      const qint64 id = batch->run_id;
      const loom::Plan plan = *parsed.plan;
      QMetaObject::invokeMethod(this, [this, id, plan] { offerRunPlan(id, plan); }, Qt::QueuedConnection);
    }
  } else if (batch->run_id == shown_.id && batch->status && batch->status != shown_.status) {
    ShownRun run = shown_;
    run.status = batch->status;
    setShownRun(run);
  }
  if (batch->ranks_changed && batch->run_id == shown_.id) {  // the ranks said what they run on
    ShownRun run = shown_;
    setDevices(run, batch->ranks);
    if (run.device != shown_.device || run.device_detail != shown_.device_detail) setShownRun(run);
  }
  if (batch->finished && views_.clocksChangedAfterEvents()) {
    // The timeline aligns events once, as they arrive; the ranks' final clock estimate
    // came later. Read the run again with its final clocks (seconds, off this thread).
    // The log comes again from its start too: empty it, or every line shows twice.
    views_.clear(layerNames());
    log_->clear();
    launch_log_.clear();
    feed_.follow(dbPath(), batch->run_id);
    return;
  }
  if (batch->finished) {
    appendLog(launch_log_.flush());
    views_.timeline()->fitAll();
    emit runLoaded(batch->run_id);
  }
}

QString MainWindow::launchLog() const { return log_->toPlainText(); }

// The run on screen was trained with another plan than the designer's: offer to load it,
// so that the designer and the views show the same plan (or the caption says they do not).
void MainWindow::offerRunPlan(qint64 runId, const loom::Plan& plan) {
  if (runId != shown_.id || controller_.isRunning() || plan == document_.plan()) return;
  const QString name = QString::fromStdString(plan.name);
  bool load = false;
  if (run_plan_prompt_) {
    load = run_plan_prompt_(runId, name);
  } else {
    QMessageBox box(QMessageBox::Question, tr("Load the run's plan?"),
                    tr("Run %1 was trained with plan \u201c%2\u201d, which is not the plan in the designer (\u201c%3\u201d).")
                        .arg(runId).arg(name, QString::fromStdString(document_.plan().name)),
                    QMessageBox::NoButton, this);
    QPushButton* yes = box.addButton(tr("Load its plan"), QMessageBox::AcceptRole);
    box.addButton(tr("Keep the designer's plan"), QMessageBox::RejectRole);
    box.exec();
    load = box.clickedButton() == yes;
  }
  if (!load || !maybeSave()) return;
  document_.reset(plan);  // no file: saving asks where; the views keep showing the run
}

void MainWindow::openRun(qint64 runId) {
  if (runId <= 0) return;
  if (controller_.isRunning()) {
    // The views belong to the live run until it ends; say so rather than ignore the click.
    setStateText(tr("Run %1 is still running: stop it or wait for it to end before opening run %2")
                     .arg(current_run_).arg(runId));
    return;
  }
  current_run_ = runId;
  opened_stored_ = true;
  log_->clear();
  launch_log_.clear();
  views_.clear({});
  elapsed_label_->clear();
  rate_label_->clear();
  setShownRun({runId, {}, std::nullopt});
  run_state_ = tr("Run %1 (stored)").arg(runId);
  feed_.follow(dbPath(), runId);
  updateRunState();
}

// The Runs dock reads on the thread pool; it follows the window's store.
void MainWindow::refreshRunList() {
  if (run_browser_->database() != dbPath()) {
    run_browser_->setDatabase(dbPath());
  } else {
    run_browser_->refresh();
  }
}

ComparisonWindow* MainWindow::openComparison(const QList<qint64>& runIds) {
  auto* window = new ComparisonWindow(dbPath(), runIds, this);
  window->setAttribute(Qt::WA_DeleteOnClose);
  window->resize(size());
  window->show();
  emit comparisonOpened(window);
  return window;
}

}  // namespace loom::ui
