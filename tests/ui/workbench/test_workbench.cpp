// The workbench window driven offscreen through real jobs: an invalid plan disables Run
// and says why; Run starts a real 2-rank mpirun job whose events reach the timeline while
// it runs and which completes; Stop ends a long run and the store records it as stopped;
// a stored run reopened shows every stored event; a stored parameter-server run reopened
// fills the staleness chart from its updates; unsaved changes are not lost silently; a
// stopped run resumes from the window with another replica count; two real runs compared
// from the Runs dock (curves, coupled timelines, metrics, phases); Run > Calibrate's runs
// one after another, then the plan predicted.
#include <QAction>
#include <QDockWidget>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QTextBrowser>
#include <QPointer>
#include <QStandardPaths>
#include <QTableView>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <qcustomplot.h>

#include <set>

#include "loom/core/plan.h"
#include "loom/predict/calibration.h"
#include "loom/predict/calibration_runs.h"
#include "loom/store/run_store.h"
#include "loom/test/expect.h"
#include "loom/test/files.h"
#include "loom/ui/charts/overlay_charts.h"
#include "loom/ui/charts/training_charts.h"
#include "loom/ui/colors.h"
#include "loom/ui/designer/plan_document.h"
#include "loom/ui/item_roles.h"
#include "loom/ui/lesson_result_model.h"
#include "loom/ui/run_list_model.h"
#include "loom/ui/timeline/replay_bar.h"
#include "loom/ui/timeline/timeline_view.h"
#include "loom/ui/workbench/calibration_view.h"
#include "loom/ui/workbench/comparison_window.h"
#include "loom/ui/workbench/lesson_panel.h"
#include "loom/ui/workbench/lesson_session.h"
#include "loom/ui/workbench/main_window.h"
#include "loom/ui/workbench/path_overlay.h"
#include "loom/ui/workbench/run_browser.h"
#include "loom/ui/workbench/what_if_panel.h"

using loom::ui::ComparisonWindow;
using loom::ui::MainWindow;
using loom::trace::RunStatus;
using loom::testing::must;
using loom::testing::per_test_db;

namespace {

// The status MainWindow::runFinished gave the i-th finished run.
RunStatus finished_status(const QSignalSpy& finished, int i) { return finished.at(i).at(1).value<RunStatus>(); }

// Two data-parallel ranks on a slice of Fashion-MNIST: a few seconds of real training.
loom::Plan two_rank_plan(std::int64_t steps) {
  loom::Plan plan = loom::default_plan();
  plan.name = "workbench-test";
  plan.data.train_limit = 2048;
  plan.data.test_limit = 256;
  plan.training.batch = 64;
  plan.training.steps = steps;
  plan.training.eval_every = 0;
  plan.training.threads = 1;
  plan.parallel.data_parallel = 2;
  plan.parallel.devices.assign(2, loom::DeviceSpec{});
  return plan;
}

// The row of the comparison's metrics table for this figure key; -1 when absent.
int metric_row(const QTableView* table, const QString& key) {
  const QAbstractItemModel* model = table->model();
  for (int r = 0; r < model->rowCount(); ++r)
    if (model->index(r, 0).data(loom::ui::FigureKeyRole).toString() == key) return r;
  return -1;
}

QString cell_text(const QTableView* table, int row, int column) {
  return table->model()->index(row, column).data().toString();
}

loom::trace::RunRecord stored_run(const QString& db, qint64 id) {
  return must(must(loom::store::RunStore::open(db.toStdString())).load_run(id));
}

}  // namespace

class TestWorkbench : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void init() {
    window_ = std::make_unique<MainWindow>();
    window_->setSavePrompt([] { return MainWindow::SaveChoice::Discard; });
    window_->setRunPlanPrompt([](qint64, const QString&) { return false; });
    window_->setDbPath(per_test_db(dir_));
    window_->controller()->setRankExecutable(LOOM_RANK_EXE);  // also when run outside CTest
    window_->resize(1400, 900);
    window_->show();
  }
  void cleanup() { window_.reset(); }

  void invalidPlanDisablesRunWithTheReason() {
    QVERIFY(window_->runAction()->isEnabled());
    window_->document()->edit("batch 0", [](loom::Plan& p) { p.training.batch = 0; });
    QVERIFY(!window_->runAction()->isEnabled());
    // Named as the window shows the field, not by its JSON path.
    QVERIFY2(window_->runAction()->toolTip().contains("Training › Global batch"), qPrintable(window_->runAction()->toolTip()));
    QVERIFY2(window_->statusText().contains("Training › Global batch"), qPrintable(window_->statusText()));
    window_->document()->undoStack()->undo();
    QVERIFY(window_->runAction()->isEnabled());
  }

  // Run > Predict on an empty store says what to measure; after a real run, the run
  // opens beside a prediction of its plan (the closed loop), and Predict shows the
  // designer's plan as a predicted run.
  void predictionBesideTheRunItPredicts() {
    loom::Plan plan = two_rank_plan(120);
    plan.parallel.data_parallel = 1;
    plan.parallel.devices.assign(1, loom::DeviceSpec{});
    window_->document()->reset(plan);
    QVERIFY(window_->predictAction()->isEnabled());
    QVERIFY(!window_->comparePredictionAction()->isEnabled());
    QCOMPARE(window_->predictPlan(), qint64(0));
    QVERIFY2(window_->statusText().contains("no calibration for"), qPrintable(window_->statusText()));

    QSignalSpy finished(window_.get(), &MainWindow::runFinished);
    window_->runAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 240000);
    QVERIFY(finished_status(finished, 0) == RunStatus::Completed);
    const qint64 measured = finished.at(0).at(0).toLongLong();
    QTRY_VERIFY_WITH_TIMEOUT(window_->comparePredictionAction()->isEnabled(), 10000);
    QVERIFY2(window_->statusText().contains("Compare with prediction"), qPrintable(window_->statusText()));
    QSignalSpy opened(window_.get(), &MainWindow::comparisonOpened);
    window_->comparePredictionAction()->trigger();
    QCOMPARE(opened.count(), 1);
    auto* comparison = opened.at(0).at(0).value<ComparisonWindow*>();
    QCOMPARE(comparison->runIds().size(), 2);
    QCOMPARE(comparison->runIds().front(), measured);
    QCOMPARE(stored_run(window_->dbPath(), comparison->runIds().back()).kind, std::string("predicted"));
    QTRY_VERIFY_WITH_TIMEOUT(comparison->comparisonShown(), 20000);
    comparison->close();

    const qint64 predicted = window_->predictPlan();
    QVERIFY(predicted > measured);
    QCOMPARE(window_->currentRunId(), predicted);
    QTRY_VERIFY2_WITH_TIMEOUT(window_->runCaption().contains("predicted, not measured"), qPrintable(window_->runCaption()), 10000);
    QVERIFY(!window_->comparePredictionAction()->isEnabled());  // a prediction is not compared with itself
  }

  // Run > Calibrate on an empty store, which Predict offers: its runs go through the
  // window one after another (each stored and tagged "calibration"), then the designer's
  // plan opens as a predicted run; the designer keeps its plan.
  void calibrateRunsTheLayoutsPredictNeedsThenPredicts() {
    loom::Plan plan = two_rank_plan(120);
    plan.parallel.data_parallel = 1;
    plan.parallel.devices.assign(1, loom::DeviceSpec{});
    window_->document()->reset(plan);
    QCOMPARE(window_->predictPlan(), qint64(0));
    QVERIFY2(window_->statusText().contains("Run > Calibrate"), qPrintable(window_->statusText()));
    QVERIFY(window_->calibrateAction()->isEnabled());
    window_->setCalibrationSteps(40);  // the flow, not the figures: shorter than the default
    QSignalSpy finished(window_.get(), &MainWindow::runFinished);
    QSignalSpy calibrated(window_.get(), &MainWindow::calibrated);
    window_->calibrateAction()->trigger();
    QVERIFY(!window_->calibrateAction()->isEnabled() && !window_->runAction()->isEnabled());
    QTRY_VERIFY2_WITH_TIMEOUT(window_->statusText().startsWith("Calibration run 1 of"), qPrintable(window_->statusText()),
                              60000);
    QVERIFY(QTest::qWaitFor([&] { return calibrated.count() == 1; }, 400000));

    const auto expected = must(loom::predict::calibration_runs(plan, 40));
    QCOMPARE(finished.count(), int(expected.size()));
    auto store = must(loom::store::RunStore::open(window_->dbPath().toStdString()));
    for (int i = 0; i < finished.count(); ++i) {
      QVERIFY(finished_status(finished, i) == RunStatus::Completed);
      const qint64 id = finished.at(i).at(0).toLongLong();
      QCOMPARE(must(store.load_tags(id)), std::vector<std::string>{loom::predict::kCalibrationTag});
      QCOMPARE(QString::fromStdString(must(store.load_run(id)).name), QString::fromStdString(expected[std::size_t(i)].plan.name));
    }
    const qint64 predicted = calibrated.at(0).at(0).toLongLong();
    QVERIFY(predicted > finished.at(finished.count() - 1).at(0).toLongLong());
    QCOMPARE(must(store.load_run(predicted)).kind, std::string("predicted"));
    QTRY_COMPARE_WITH_TIMEOUT(window_->currentRunId(), predicted, 10000);
    QVERIFY2(window_->statusText().startsWith("Calibrated from"), qPrintable(window_->statusText()));
    QVERIFY(window_->document()->plan() == plan);
    QVERIFY(window_->calibrateAction()->isEnabled());
    QVERIFY(window_->predictPlan() > predicted);  // the store now predicts it without calibrating again

    // The What-if dock's Calibration tab shows what the prediction stood on; Reset
    // calibration takes it away (the runs stay) and Predict needs runs again.
    auto* what_if = window_->whatIfPanel();
    window_->findChild<QDockWidget*>("WhatIfDock")->raise();
    auto* view = what_if->calibrationView();
    const QString runs_text = QString("(%1 runs)").arg(expected.size());
    QTRY_VERIFY2_WITH_TIMEOUT(view->summaryLabel()->text().contains(runs_text), qPrintable(view->summaryLabel()->text()), 20000);
    QVERIFY(view->costsTable()->rowCount() > 10);
    QVERIFY(view->resetButton()->isEnabled());
    std::vector<std::int64_t> ids;
    for (int i = 0; i < finished.count(); ++i) ids.push_back(finished.at(i).at(0).toLongLong());
    QVERIFY(window_->resetCalibration(ids));
    QTRY_VERIFY2_WITH_TIMEOUT(view->summaryLabel()->text().contains("No calibration"), qPrintable(view->summaryLabel()->text()), 20000);
    QCOMPARE(view->costsTable()->rowCount(), 0);
    QCOMPARE(must(store.load_tags(ids.front())), (std::vector<std::string>{loom::predict::kCalibrationTag, loom::predict::kNotCalibratingTag}));
    QCOMPARE(window_->predictPlan(), qint64(0));
    QVERIFY2(window_->statusText().contains("no calibration for"), qPrintable(window_->statusText()));
  }

  // Stop during Run > Calibrate ends the calibration at that run and says so; nothing
  // more runs, nothing is predicted, the stopped run is not tagged, and Calibrate is
  // offered again. (Runs that completed keep their tag: see the test above.)
  void stopEndsACalibration() {
    loom::Plan plan = two_rank_plan(60);
    plan.parallel.data_parallel = 1;
    plan.parallel.devices.assign(1, loom::DeviceSpec{});
    window_->document()->reset(plan);
    window_->setCalibrationSteps(100000);  // long enough to be stopped on any machine
    QSignalSpy finished(window_.get(), &MainWindow::runFinished);
    QSignalSpy calibrated(window_.get(), &MainWindow::calibrated);
    QVERIFY(window_->calibratePlan());
    QTRY_VERIFY_WITH_TIMEOUT(window_->statusText().startsWith("Calibration run 1 of") &&
                                 window_->statusText().contains(": step "),
                             120000);
    window_->stopAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
    QVERIFY(finished_status(finished, 0) == RunStatus::Stopped);
    QTRY_VERIFY2_WITH_TIMEOUT(window_->statusText().startsWith("Calibration stopped"), qPrintable(window_->statusText()), 5000);
    QVERIFY2(window_->statusText().contains("ended stopped") && window_->statusText().contains("stay stored"),
             qPrintable(window_->statusText()));
    QVERIFY(!window_->calibrationRuns()->isActive());
    QVERIFY(window_->calibrateAction()->isEnabled());
    QTest::qWait(500);
    QCOMPARE(finished.count(), 1);
    QCOMPARE(calibrated.count(), 0);
    auto store = must(loom::store::RunStore::open(window_->dbPath().toStdString()));
    QVERIFY(must(store.load_tags(finished.at(0).at(0).toLongLong())).empty());
  }

  void runFromTheWindowStreamsIntoTheTimelineAndCompletes() {
    window_->document()->reset(two_rank_plan(60));
    QSignalSpy finished(window_.get(), &MainWindow::runFinished);
    QSignalSpy loaded(window_.get(), &MainWindow::runLoaded);
    qint64 events_while_running = 0;
    QObject context;
    connect(window_->views(), &loom::ui::RunViews::eventsShownChanged, &context, [&](qint64 n) {
      if (window_->controller()->isRunning()) events_while_running = std::max(events_while_running, n);
    });
    window_->runAction()->trigger();
    QVERIFY(window_->controller()->isRunning());
    QVERIFY(!window_->runAction()->isEnabled());
    QVERIFY(window_->stopAction()->isEnabled());
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 240000);
    QVERIFY2(finished_status(finished, 0) == RunStatus::Completed,
             qPrintable(QString::fromUtf8(loom::trace::to_text(finished_status(finished, 0))) + ": " + finished.at(0).at(2).toString() + "\n" +
                        window_->launchLog()));
    QVERIFY2(events_while_running > 0, "events should reach the timeline while the job runs");
    const qint64 id = finished.at(0).at(0).toLongLong();
    QCOMPARE(stored_run(window_->dbPath(), id).status, loom::trace::RunStatus::Completed);
    QTRY_VERIFY2_WITH_TIMEOUT(window_->launchLog().contains("launch: ") && window_->launchLog().contains("mpirun -n 2"),
                              qPrintable(window_->launchLog()), 10000);

    // The feed delivers the rest after the job ends; then the timeline holds every event.
    auto store = loom::store::RunStore::open(window_->dbPath().toStdString());
    const auto stored = *store->count_events(id);
    QTRY_COMPARE_WITH_TIMEOUT(static_cast<std::int64_t>(window_->views()->timeline()->data().event_count()), stored,
                              10000);
    std::set<int> ranks;
    for (const auto& lane : window_->views()->timeline()->data().lanes()) ranks.insert(lane.key.rank);
    QVERIFY(ranks == (std::set<int>{0, 1}));
    QVERIFY(!window_->views()->timeline()->data().arrows().empty());  // clock probes are Send/Recv pairs
    QVERIFY(window_->runAction()->isEnabled());
    // Read again with the final clocks, the log still shows each line once, and the
    // rank's summary as text; the window names the run.
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 10000);
    const QString log = window_->launchLog();
    QCOMPARE(log.count("launch: "), 1);
    QCOMPARE(log.count("rank 0 connected"), 1);
    QVERIFY2(log.contains("Summary (rank 0): 2 ranks") && !log.contains("{\""), qPrintable(log));
    // One samples/s: the status bar ends on the stored figure the Runs list and show give.
    const QString rate = QStringLiteral("%1 samples/s").arg(stored_run(window_->dbPath(), id).samples_per_s(), 0, 'f', 0);
    QTRY_COMPARE_WITH_TIMEOUT(window_->rateText(), rate, 10000);
    QVERIFY2(!log.contains("samples/s"), qPrintable(log));
    QVERIFY2(window_->windowTitle().contains(QString("run %1").arg(id)), qPrintable(window_->windowTitle()));
  }

  void stopEndsTheRunAndTheStoreSaysStopped() {
    window_->document()->reset(two_rank_plan(200000));
    QSignalSpy finished(window_.get(), &MainWindow::runFinished);
    window_->runAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(window_->views()->eventsShown() > 100 || finished.count() > 0, 60000);
    QVERIFY2(finished.count() == 0, qPrintable("the run ended before it could be stopped: " + window_->launchLog()));
    window_->stopAction()->trigger();
    QVERIFY2(window_->statusText().contains("Stopping"), qPrintable(window_->statusText()));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
    QCOMPARE(finished_status(finished, 0), RunStatus::Stopped);
    const qint64 id = finished.at(0).at(0).toLongLong();
    QCOMPARE(stored_run(window_->dbPath(), id).status, loom::trace::RunStatus::Stopped);
  }

  // Run > Resume on the stopped run on screen: a new run linked to it, from the checkpoint
  // saved when it stopped, with one replica instead of two (the global batch stays).
  void stoppedRunResumesWithAnotherReplicaCount() {
    loom::Plan plan = two_rank_plan(1500);
    plan.training.checkpoint_every = 100000;  // only the checkpoint saved at the stop
    window_->document()->reset(plan);
    QVERIFY(!window_->resumeAction()->isEnabled());
    QSignalSpy finished(window_.get(), &MainWindow::runFinished);
    window_->runAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(window_->views()->eventsShown() > 100 || finished.count() > 0, 60000);
    window_->stopAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
    QCOMPARE(finished_status(finished, 0), RunStatus::Stopped);
    const qint64 stopped = finished.at(0).at(0).toLongLong();
    QVERIFY2(window_->resumeAction()->isEnabled(), qPrintable(window_->resumeAction()->toolTip()));

    std::int64_t offered_step = 0;
    int offered_replicas = 0;
    window_->setResumePrompt([&](const loom::host::ResumeRequest& r) {
      offered_step = r.step;
      offered_replicas = r.plan.parallel.data_parallel;
      return 1;
    });
    window_->resumeAction()->trigger();
    QVERIFY(window_->controller()->isRunning());
    QVERIFY(!window_->resumeAction()->isEnabled());
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 240000);
    QCOMPARE(offered_replicas, 2);
    QVERIFY2(offered_step > 0 && offered_step < 1500, qPrintable(QString::number(offered_step)));
    QVERIFY2(finished_status(finished, 1) == RunStatus::Completed,
             qPrintable(finished.at(1).at(2).toString() + "\n" + window_->launchLog()));
    const auto resumed = stored_run(window_->dbPath(), finished.at(1).at(0).toLongLong());
    QCOMPARE(resumed.resumed_from, stopped);
    const auto resumed_plan = loom::parse_plan(resumed.plan_json);
    QVERIFY(resumed_plan.ok());
    QCOMPARE(resumed_plan.plan->parallel.data_parallel, 1);
    QVERIFY(!window_->resumeAction()->isEnabled());  // a completed run has nothing to resume
    QTRY_VERIFY2_WITH_TIMEOUT(window_->runCaption().contains(QString("resumed from run %1").arg(stopped)),
                              qPrintable(window_->runCaption()), 10000);
  }

  void storedRunReopensWithEveryEvent() {
    window_->document()->reset(two_rank_plan(20));
    QSignalSpy finished(window_.get(), &MainWindow::runFinished);
    window_->runAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 240000);
    const qint64 id = finished.at(0).at(0).toLongLong();

    MainWindow other;
    other.setRunPlanPrompt([](qint64, const QString&) { return false; });
    other.setDbPath(window_->dbPath());
    QSignalSpy loaded(&other, &MainWindow::runLoaded);
    QVERIFY(!other.reportAction()->isEnabled());  // no run on screen yet
    other.openRun(id);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 20000);
    // View > Critical path draws the path of the step in view: pieces in time order that
    // tile the step from its start to its end, and a line saying what it is made of.
    other.criticalPathAction()->trigger();
    const auto range = other.views()->timeline()->data().step_range(3);
    QVERIFY(range.has_value());
    other.views()->timeline()->showRange(double(range->begin_ns), double(range->end_ns));
    QTRY_COMPARE_WITH_TIMEOUT(other.pathOverlay()->step(), 3, 2000);
    const auto& marks = other.views()->timeline()->pathOverlay();
    QVERIFY(!marks.empty());
    const std::int64_t origin = other.views()->timeline()->data().origin_ns();
    std::int64_t covered = 0;
    for (std::size_t i = 0; i < marks.size(); ++i) {
      QVERIFY(marks[i].end_ns >= marks[i].start_ns);
      if (i > 0) QVERIFY(marks[i].start_ns >= marks[i - 1].end_ns - 1000);
      covered += marks[i].end_ns - marks[i].start_ns;
    }
    QVERIFY2(marks.front().start_ns - origin >= range->begin_ns - 1000 && marks.back().end_ns - origin <= range->end_ns + 1000,
             "the path stays within its step");
    QVERIFY2(other.pathOverlay()->summary().startsWith("Critical path of step 3 (gold): ") &&
                 other.pathOverlay()->summary().contains("work"),
             qPrintable(other.pathOverlay()->summary()));
    const QString length = QString::number(double(covered) / 1e6, 'f', 2);
    QVERIFY2(other.pathOverlay()->summary().contains(length + " ms"), qPrintable(length + " | " + other.pathOverlay()->summary()));
    other.criticalPathAction()->trigger();
    QVERIFY(other.views()->timeline()->pathOverlay().empty());

    // File > Save run report writes that run's report.
    QVERIFY(other.reportAction()->isEnabled());
    const QString report = dir_.filePath("run.html");
    QCOMPARE(other.saveRunReport(report), QString());
    QFile html(report);
    QVERIFY(html.open(QIODevice::ReadOnly));
    QVERIFY(html.readAll().contains(QString("Loom report: run #%1 workbench-test").arg(id).toUtf8()));
    auto store = loom::store::RunStore::open(window_->dbPath().toStdString());
    QCOMPARE(static_cast<std::int64_t>(other.views()->timeline()->data().event_count()), *store->count_events(id));
    QVERIFY2(other.launchLog().contains("mpirun -n 2"),
             qPrintable(other.launchLog() + " | stored: " + QString::fromStdString(stored_run(window_->dbPath(), id).log)));
  }

  // Replay of a real stored run: stepping puts the cursor on step ends, the timeline then
  // paints nothing that started after it and the loss curve only the completed steps;
  // playing moves the cursor at the chosen speed; leaving replay shows everything again.
  void replayShowsOnlyWhatHadHappenedByTheCursor() {
    window_->document()->reset(two_rank_plan(20));
    QSignalSpy finished(window_.get(), &MainWindow::runFinished);
    window_->runAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 240000);
    MainWindow other;
    other.setRunPlanPrompt([](qint64, const QString&) { return false; });
    other.setDbPath(window_->dbPath());
    other.resize(1280, 720);
    other.show();
    QSignalSpy loaded(&other, &MainWindow::runLoaded);
    other.openRun(finished.at(0).at(0).toLongLong());
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 20000);
    auto* timeline = other.views()->timeline();
    auto* charts = other.views()->training();
    auto* replay = other.views()->replay();
    timeline->fitAll();
    timeline->replotNow();
    charts->replotNow();
    const int all_steps = charts->graph("loss")->dataCount();
    QCOMPARE(all_steps, 20);
    const auto bounds = loom::ui::timeline::replay_boundaries(timeline->data(), loom::ui::timeline::ReplayUnit::Step);
    QVERIFY(bounds.size() >= 10);
    QVERIFY(timeline->lastPaintedStartNs() > bounds[2]);  // without a cursor: spans after step 2

    for (int i = 0; i < 3; ++i) replay->stepForward();
    QVERIFY(replay->cursor().has_value());
    QCOMPARE(*replay->cursor(), bounds[2]);
    QCOMPARE(timeline->replayCursor(), replay->cursor());
    timeline->replotNow();
    QVERIFY2(timeline->lastPaintedStartNs() <= bounds[2],
             qPrintable(QString("painted a span starting at %1 ns, cursor %2").arg(timeline->lastPaintedStartNs()).arg(bounds[2])));
    charts->replotNow();
    const int completed = loom::ui::timeline::steps_completed(timeline->data(), bounds[2]);
    QVERIFY(completed >= 1 && completed <= 3);
    QCOMPARE(charts->graph("loss")->dataCount(), completed);
    replay->stepBack();
    QCOMPARE(*replay->cursor(), bounds[1]);

    // 0.1x: half a second of wall time moves the cursor about 50 ms of the run.
    replay->setSpeed(0.1);
    QElapsedTimer wall;
    wall.start();
    replay->play();
    QVERIFY(replay->playing());
    QTest::qWait(500);
    replay->pause();
    const double moved_ms = (*replay->cursor() - bounds[1]) / 1e6;
    QVERIFY2(moved_ms > 10 && moved_ms <= 0.1 * double(wall.elapsed()) + 5,
             qPrintable(QString("moved %1 ms of run time in %2 ms").arg(moved_ms).arg(wall.elapsed())));

    replay->setReplaying(false);
    QVERIFY(!timeline->replayCursor().has_value());
    charts->replotNow();
    QCOMPARE(charts->graph("loss")->dataCount(), all_steps);
  }

  // Written straight into the store (no mpirun): two workers' updates, as servers record
  // them, reach the chart through the same feed a live run uses.
  void storedAsyncRunFillsStalenessChart() {
    auto store = loom::store::RunStore::open(window_->dbPath().toStdString());
    QVERIFY(store.ok());
    const std::int64_t id = *store->create_run(loom::store::new_run_record(loom::default_plan(), "test"));
    std::vector<loom::trace::UpdateRecord> updates;
    for (int step = 0; step < 5; ++step) {
      updates.push_back({1, 0, step, step, step, 0, 1'000'000LL * step});
      updates.push_back({2, 0, step, step, step + 1, 1, 1'000'000LL * step + 500'000});
    }
    QVERIFY(store->append_updates(id, updates).ok());
    QVERIFY(store->finish_run(id, loom::trace::RunStatus::Completed, 1.0, 0, "").ok());
    QSignalSpy loaded(window_.get(), &MainWindow::runLoaded);
    window_->openRun(id);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 20000);
    auto* chart = window_->views()->staleness();
    QTRY_COMPARE_WITH_TIMEOUT(chart->workerCount(), 2, 2000);
    QCOMPARE(chart->histogramBars(0)->data()->size(), 1);  // worker 1: five at staleness 0
    QCOMPARE(chart->histogramBars(1)->data()->size(), 2);  // worker 2: bins 0 (empty) and 1
    QCOMPARE(chart->stalenessGraph(1)->data()->size(), 5);
  }

  // Two real runs (one process, two replicas) compared from the Runs dock: both named in
  // the legend, both loss curves in their run's colour, the bands aligned on step 1 and
  // zoomed together, the metrics side by side with the better run starred, the phase
  // diff, and a target accuracy adding its rows.
  // The Lessons dock: a lesson opened by name, a prediction typed, Run: its two runs go
  // through the window like any run (each listed in the Runs dock), then the measured
  // value, the theory and the prediction's error are shown and the list marks it done.
  void lessonRunsAndScoresThePrediction() {
    QVERIFY(!window_->openLesson("no_such_lesson"));
    QVERIFY(window_->openLesson("gpipe_vs_1f1b"));
    auto* panel = window_->lessonPanel();
    QCOMPARE(panel->currentLesson(), QString("gpipe_vs_1f1b"));
    QVERIFY(panel->findChild<QTextBrowser*>("LessonText")->toPlainText().contains("in flight"));
    window_->lessonSession()->setStepsOverride(5);
    auto* prediction = panel->findChild<QLineEdit*>("LessonPrediction");
    prediction->setText("3");
    QSignalSpy finished(window_.get(), &MainWindow::runFinished);
    QSignalSpy measured(window_->lessonSession(), &loom::ui::LessonSession::measured);
    QTest::mouseClick(panel->findChild<QPushButton*>("LessonRun"), Qt::LeftButton);
    QVERIFY(!panel->findChild<QPushButton*>("LessonRun")->isEnabled());  // until the lesson ends
    QVERIFY(QTest::qWaitFor([&] { return measured.count() == 1; }, 240000));
    QCOMPARE(finished.count(), 2);
    QCOMPARE(measured.at(0).at(1).toDouble(), 4.0);
    auto* result_view = panel->findChild<QTextBrowser*>("LessonResult");
    const QString result = result_view->toPlainText();
    QVERIFY2(result.contains("Measured") && result.contains("4.00 ×") &&
                 result.contains("3.00 × (25% below the measured value)"),
             qPrintable(result));
    // Loom's own prediction, made before the runs: an empty store has nothing to predict from.
    QVERIFY2(result.contains("Loom predicted") && result.contains("no calibration"), qPrintable(result));
    // The table's rows are the panel's result model: guess, measurement, Loom, theory.
    const loom::ui::LessonResultModel* answers = panel->resultModel();
    QCOMPARE(answers->rowCount(), 4);
    QCOMPARE(answers->index(1, loom::ui::LessonResultModel::Value).data().toString(), QString("4.00 ×"));
    QVERIFY(panel->findChild<QPushButton*>("LessonRun")->isEnabled());
    // Ticked as done, its answer not shown in the list above the question.
    const QString listed = panel->findChild<QListWidget*>("LessonList")->currentItem()->text();
    QVERIFY2(listed.startsWith("✓ ") && !listed.contains("4.00"), qPrintable(listed));
    QTRY_VERIFY_WITH_TIMEOUT(window_->runBrowser()->model()->rowCount() == 2, 10000);
    // The question asked about GPipe's stage 0 (the lesson's first run): that run is on
    // screen, not the last one run; a hint's link opens its run.
    const QList<qint64> runs = measured.at(0).at(2).value<QList<qint64>>();
    QCOMPARE(runs.size(), 2);
    QTRY_COMPARE_WITH_TIMEOUT(window_->currentRunId(), runs[0], 5000);
    QVERIFY2(result_view->toHtml().contains(QStringLiteral("loom-run:%1").arg(runs[1])), qPrintable(result_view->toHtml()));
    emit result_view->anchorClicked(QUrl(QStringLiteral("loom-run:%1").arg(runs[1])));
    QTRY_COMPARE_WITH_TIMEOUT(window_->currentRunId(), runs[1], 5000);
  }

  void twoRealRunsCompareSideBySide() {
    loom::Plan single = two_rank_plan(30);
    single.parallel.data_parallel = 1;
    single.parallel.devices.assign(1, loom::DeviceSpec{});
    single.training.eval_every = 10;
    loom::Plan pair = two_rank_plan(30);
    pair.training.eval_every = 10;
    const qint64 one = runToEnd(single), two = runToEnd(pair);

    auto* browser = window_->runBrowser();
    QTRY_VERIFY_WITH_TIMEOUT(browser->model()->rowCount() == 2, 10000);
    browser->selectRuns({one, two});
    QSignalSpy opened(window_.get(), &MainWindow::comparisonOpened);
    browser->compareAction()->trigger();
    QCOMPARE(opened.count(), 1);
    QPointer<ComparisonWindow> cmp = opened.at(0).at(0).value<ComparisonWindow*>();
    QCOMPARE(cmp->runIds(), (QList<qint64>{two, one}));  // listed newest first
    QTRY_VERIFY_WITH_TIMEOUT(cmp->runsLoaded(), 30000);
    QTRY_VERIFY_WITH_TIMEOUT(cmp->comparisonShown(), 60000);
    QVERIFY2(cmp->comparisonError().isEmpty(), qPrintable(cmp->comparisonError()));
    const QStringList legend = cmp->legendText().split('\n');
    QCOMPARE(legend.size(), 2);
    QVERIFY2(legend[0].contains(QString("#%1").arg(two)) && legend[0].contains("all-reduce, 2 replicas"), qPrintable(legend[0]));
    QVERIFY2(legend[1].contains(QString("#%1").arg(one)) && legend[1].contains("one process"), qPrintable(legend[1]));

    // Curves: one per run, in the run's colour; on the samples axis both end at 30 x 64.
    for (int i = 0; i < 2; ++i) {
      QCPGraph* loss = cmp->charts()->graph(i, "loss");
      QVERIFY(loss != nullptr);
      QCOMPARE(loss->data()->size(), 30);
      QCOMPARE(loss->pen().color(), loom::ui::run_color(i));
      QVERIFY(cmp->charts()->graph(i, "test_accuracy")->data()->size() >= 2);
    }
    cmp->charts()->setXAxis(loom::ui::charts::XAxis::Samples);
    for (int i = 0; i < 2; ++i) QCOMPARE((cmp->charts()->graph(i, "loss")->data()->constEnd() - 1)->key, 30.0 * 64);

    // Timelines: step 1 starts at the same place in both bands, and stays there under a
    // zoom of either band.
    cmp->tabs()->setCurrentIndex(1);
    QTest::qWait(50);
    auto relative_t0 = [&](int i) { return cmp->band(i)->viewport().t0_ns - cmp->anchorNs(i); };
    auto span = [&](int i) { return cmp->band(i)->viewport().t1_ns - cmp->band(i)->viewport().t0_ns; };
    QVERIFY(std::isfinite(cmp->anchorNs(0)) && std::isfinite(cmp->anchorNs(1)));
    QVERIFY2(std::abs(relative_t0(0) - relative_t0(1)) < 1, qPrintable(QString::number(relative_t0(0) - relative_t0(1))));
    const double before = span(1);
    cmp->band(0)->zoomAt(QPoint(cmp->band(0)->width() / 2, cmp->band(0)->height() / 2), 4.0);
    QVERIFY2(span(1) < before / 3, qPrintable(QString("%1 -> %2").arg(before).arg(span(1))));
    QVERIFY(std::abs(relative_t0(0) - relative_t0(1)) < 1);
    cmp->band(1)->zoomAt(QPoint(cmp->band(1)->width() / 3, cmp->band(1)->height() / 2), 0.5);
    QVERIFY(std::abs(span(0) - span(1)) < 1);
    QVERIFY(std::abs(relative_t0(0) - relative_t0(1)) < 1);
    cmp->setAlignment(ComparisonWindow::Align::TimeZero, 0);
    QVERIFY(std::abs(cmp->band(0)->viewport().t0_ns - cmp->band(1)->viewport().t0_ns) < 1);

    // Metrics: throughput of both, one of them better; the phase diff holds forward phases.
    const int throughput = metric_row(cmp->metricsTable(), "samples_per_s");
    QVERIFY(throughput >= 0);
    const int starred = int(cell_text(cmp->metricsTable(), throughput, 1).contains("★")) +
                        int(cell_text(cmp->metricsTable(), throughput, 2).contains("★"));
    QCOMPARE(starred, 1);
    QVERIFY2(cell_text(cmp->metricsTable(), throughput, 2).contains("×"), qPrintable(cell_text(cmp->metricsTable(), throughput, 2)));
    const QAbstractItemModel* phases = cmp->phaseTable()->model();
    QVERIFY(phases->rowCount() > 0);
    QVERIFY(!phases->match(phases->index(0, 1), Qt::DisplayRole, "forward", 1, Qt::MatchStartsWith).isEmpty());
    QCOMPARE(metric_row(cmp->metricsTable(), "time_to_target_s"), -1);
    cmp->setTargetAccuracy(0.05);
    QTRY_VERIFY_WITH_TIMEOUT(cmp->comparisonShown(), 60000);
    QVERIFY(metric_row(cmp->metricsTable(), "time_to_target_s") >= 0);

    // The comparison's report, as the Save report button writes it.
    const QString report = dir_.filePath("comparison.pdf");
    QCOMPARE(cmp->saveReport(report), QString());
    QFile pdf(report);
    QVERIFY(pdf.open(QIODevice::ReadOnly) && pdf.read(5) == "%PDF-");

    cmp->close();  // deleted when closed
    QTRY_VERIFY_WITH_TIMEOUT(cmp.isNull(), 5000);
  }

  void unsavedChangesAreNotLostSilently() {
    window_->document()->edit("rename", [](loom::Plan& p) { p.name = "changed"; });
    QVERIFY(window_->isWindowModified());
    window_->setSavePrompt([] { return MainWindow::SaveChoice::Cancel; });
    QVERIFY(!window_->close());
    QVERIFY(window_->isVisible());
    const QString path = dir_.filePath("saved-plan.json");
    window_->setSavePrompt([this, path] {
      window_->savePlanTo(path);
      return MainWindow::SaveChoice::Discard;  // already saved above
    });
    QVERIFY(window_->close());
    auto reread = loom::load_plan_file(path.toStdString());
    QVERIFY(reread.ok());
    QCOMPARE(reread.plan->name, std::string("changed"));
  }

 private:
  // Runs the plan from the window; the id of the completed run.
  qint64 runToEnd(const loom::Plan& plan) {
    window_->document()->reset(plan);
    QSignalSpy finished(window_.get(), &MainWindow::runFinished);
    window_->runAction()->trigger();
    if (!QTest::qWaitFor([&] { return finished.count() == 1; }, 240000)) qFatal("the run did not end");
    if (finished_status(finished, 0) != RunStatus::Completed) qFatal("run %s", qPrintable(finished.at(0).at(2).toString()));
    return finished.at(0).at(0).toLongLong();
  }

  QTemporaryDir dir_;
  std::unique_ptr<MainWindow> window_;
};

QTEST_MAIN(TestWorkbench)
#include "test_workbench.moc"
