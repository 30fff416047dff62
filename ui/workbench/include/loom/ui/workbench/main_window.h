// The workbench window: design a plan (layers, placement on devices, strategy), press
// Run, and watch each device work. The timeline is the central widget and gets most of
// the window; the designer panels (left) and the result views (below it) are docks that
// collapse (View > Timeline only) and are laid out per screen size until the person
// moves them (QSettings keeps that, with recent plans, the run database and the
// palette). A caption over the timeline, the result docks' titles and the window title
// name the run on screen. The window never waits on the launcher or the database: jobs
// run on RunController's thread, reads on RunFeed's.
#pragma once

#include <QByteArray>
#include <QMainWindow>
#include <QPointer>
#include <QSize>
#include <QString>
#include <QStringList>

#include <functional>
#include <optional>
#include <vector>

#include "loom/predict/calibration_runs.h"
#include "loom/ui/designer/plan_document.h"
#include "loom/ui/workbench/example_catalog.h"
#include "loom/ui/workbench/launch_log.h"
#include "loom/ui/workbench/lesson_session.h"
#include "loom/ui/workbench/run_controller.h"
#include "loom/ui/workbench/run_feed.h"
#include "loom/ui/workbench/run_sequence.h"
#include "loom/ui/workbench/run_subject.h"
#include "loom/ui/workbench/run_views.h"

class QAction;
class QLabel;
class QMenu;
class QPlainTextEdit;
class QProgressBar;
class QDockWidget;
class QElapsedTimer;
class QTimer;
class QToolBar;

namespace loom::ui {

class LessonPanel;

class ComparisonWindow;
class WhatIfPanel;
class PathOverlay;
class RunBrowser;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  // What to do with unsaved changes before they would be lost.
  enum class SaveChoice { Save, Discard, Cancel };

  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  PlanDocument* document() { return &document_; }
  RunController* controller() { return &controller_; }
  RunFeed* feed() { return &feed_; }
  RunViews* views() { return &views_; }
  QAction* runAction() const { return run_action_; }
  QAction* stopAction() const { return stop_action_; }
  QAction* resumeAction() const { return resume_action_; }
  QAction* timelineOnlyAction() const { return timeline_only_action_; }
  QToolBar* mainToolBar() const { return tool_bar_; }
  QMenu* examplesMenu() const { return examples_menu_; }
  RunBrowser* runBrowser() const { return run_browser_; }
  LessonPanel* lessonPanel() const { return lesson_panel_; }
  LessonSession* lessonSession() { return &lesson_session_; }
  // Shows the Lessons dock on that lesson (`loom --lesson NAME`); false when there is none.
  bool openLesson(const QString& name);
  // Opens a window comparing these stored runs (2 to 6), deleted when closed.
  ComparisonWindow* openComparison(const QList<qint64>& runIds);
  // Run > Predict: the designer's plan predicted from this machine's runs in the store,
  // stored as a run of kind "predicted" and opened; its id, or 0 (the error shown).
  qint64 predictPlan();
  // Run > Compare with prediction: the completed measured run on screen beside a
  // prediction of its plan; null when there is none or it cannot be predicted.
  ComparisonWindow* compareWithPrediction();
  QAction* predictAction() const { return predict_action_; }
  // Run > Calibrate: the designer's plan run briefly in the layouts prediction needs
  // (loom/predict/calibration_runs.h, like `loom-cli calibrate`), each run live and stored
  // with the tag "calibration", then the plan predicted and opened (calibrated). False
  // (the reason shown) when it cannot start.
  bool calibratePlan();
  QAction* calibrateAction() const { return calibrate_action_; }
  // The What-if dock's Reset calibration: these runs tagged "not calibrating" (asked
  // first, unless scripted); the calibration is then read again. False if not done.
  bool resetCalibration(const std::vector<std::int64_t>& runs);
  RunSequence* calibrationRuns() { return &calibration_runs_; }
  // Steps of each calibration run (predict::kCalibrationSteps unless set: tests).
  void setCalibrationSteps(std::int64_t steps) { calibration_steps_ = steps; }
  WhatIfPanel* whatIfPanel() const { return what_if_panel_; }
  // The What-if panel's prediction stored as a run and opened; its id, or 0.
  qint64 storeWhatIfPrediction();
  QAction* comparePredictionAction() const { return compare_prediction_action_; }
  QString statusText() const;
  QString rateText() const;  // the status bar's samples/s
  QString launchLog() const;
  QString runCaption() const;  // the line over the timeline naming the run on screen
  // The oversubscription warning under it; empty when the plan fits this machine's cores.
  QString oversubscriptionText() const;
  qint64 currentRunId() const { return current_run_; }
  // Whether the first start should show the window maximized (a screen smaller than the
  // default 1600x1000); a restored layout keeps its own geometry.
  bool opensMaximized() const { return open_maximized_; }
  const ShownRun& shownRun() const { return shown_; }
  const ExampleCatalog& examples() const { return examples_; }
  QString dbPath() const { return controller_.dbPath(); }
  void setDbPath(const QString& path);
  // Tests and scripts answer the unsaved-changes question without a dialog.
  void setSavePrompt(std::function<SaveChoice()> prompt) { save_prompt_ = std::move(prompt); }
  // Whether to load a stored run's plan into the designer when it differs from the plan
  // there (asked when a run is opened from the Runs list); tests and scripts answer here.
  void setRunPlanPrompt(std::function<bool(qint64 runId, const QString& planName)> prompt) {
    run_plan_prompt_ = std::move(prompt);
  }

  // How many replicas a resumed run gets (its own count offered; 0 cancels); asked only
  // when the count may change (host::replicas_can_change). Tests and scripts answer here.
  void setResumePrompt(std::function<int(const loom::host::ResumeRequest&)> prompt) {
    resume_prompt_ = std::move(prompt);
  }

  bool openPlanFile(const QString& path);
  bool openExample(const QString& resource);
  bool savePlanTo(const QString& path);
  void openRun(qint64 runId);
  // Writes the report of the run on screen (.html or .pdf); "" on success, else why not.
  QString saveRunReport(const QString& path);
  QAction* reportAction() const { return report_action_; }
  QAction* criticalPathAction() const { return path_action_; }
  PathOverlay* pathOverlay() const { return path_overlay_; }
  void setDarkPalette(bool dark);
  bool darkPalette() const { return dark_; }
  // Docks where a screen of this size wants them: designer panels tabbed on the left,
  // result views tabbed under the timeline, sized so the timeline gets most of the
  // window. Used when no saved layout applies and by View > Reset layout.
  void applyDefaultLayout(const QSize& screen);
  // Hides every dock so the timeline fills the window; false brings them back as they were.
  void setTimelineOnly(bool on);

 public slots:
  void runPlan();
  void stopRun();
  // Continues the run on screen (failed, stopped, hung or interrupted) from its newest
  // checkpoint as a new run linked to it, like `loom-cli resume`.
  void resumeRun();

 signals:
  void runFinished(qint64 runId, loom::trace::RunStatus status, const QString& error);
  // The feed delivered the whole of the run being shown.
  void runLoaded(qint64 runId);
  void comparisonOpened(loom::ui::ComparisonWindow* window);
  // Run > Calibrate's runs all completed and the plan was predicted: the prediction's run
  // id, or 0 when it still could not be predicted (the reason shown).
  void calibrated(qint64 predictedRunId);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void createActions();
  void createUndoActions();
  void createMenus();
  void createHelpMenu();
  void createToolBar();
  void createDocks();
  void arrangeDocks();
  void growForWhatIf(QDockWidget* dock);
  QWidget* createTimelineArea();
  QDockWidget* addDock(const QString& title, const QString& objectName, QWidget* widget, Qt::DockWidgetArea area);
  void createStatusBar();
  void connectRunSignals();
  void connectLessonSignals();
  void connectCalibrationSignals();
  void onCalibrationRunCompleted(qint64 runId);
  void onCalibrationCompleted(const QList<qint64>& runIds);
  QString calibrateBlockedReason() const;
  void offerCalibration(const loom::Error& error);
  void readSettings();
  void writeSettings();

  bool maybeSave();
  void newPlan();
  void openPlan();
  bool savePlan();
  bool savePlanAs();
  void planReplaced(const QString& exampleHint = {});
  // Empties the views of a finished run on screen (a live run stays): another plan, another
  // store, or the run deleted.
  void forgetFinishedRun();
  void onRunListReloaded();
  void addRecent(const QString& path);
  void rebuildRecentMenu();
  void rebuildExamplesMenu();
  void showGlossary(const QString& anchor = {});
  void showTour();

  void onPlanChanged();
  void updateRunState();
  void updateTitle();
  void updateSubject();
  void updateOversubscription();
  QString oversubscriptionSuffix() const;
  void setShownRun(const ShownRun& run);
  void clearShownRun();
  void startJob(const loom::Plan& plan, const loom::host::ResumeRequest* resume, const QString& state);
  int askResumeReplicas(const loom::host::ResumeRequest& request);
  void updateResumeAction();
  void updatePredictionActions();
  bool shownRunHasPredictablePlan() const;
  void openStoredPrediction(qint64 id, double stepMs, double samplesPerS);
  void openSearchedLayout(const loom::Plan& plan);
  void onRunCreated(qint64 runId);
  void onProgress(const loom::host::JobProgress& progress);
  void onRunFinished(qint64 runId, loom::trace::RunStatus status, const QString& error, double wallSeconds);
  void onBatch(std::shared_ptr<const FeedBatch> batch);
  void appendLog(const QString& text);
  void offerRunPlan(qint64 runId, const loom::Plan& plan);
  void refreshRunList();
  void chooseDatabase();
  void showError(const QString& title, const QString& text);
  void setStateText(const QString& text);
  std::vector<std::string> layerNames() const;

  PlanDocument document_;
  RunController controller_;
  LessonSession lesson_session_;
  RunSequence calibration_runs_;
  std::optional<loom::Plan> calibrating_plan_;  // the designer's plan as Calibrate started
  std::int64_t calibration_steps_ = predict::kCalibrationSteps;
  // "Calibration run 2 of 6: two replicas": which run of a lesson or calibration this is,
  // kept before the live step count in the status bar; empty for a run started by hand.
  QString sequence_label_;
  RunFeed feed_;
  RunViews views_;
  ExampleCatalog examples_;
  LaunchLog launch_log_;
  ShownRun shown_;
  RunBrowser* run_browser_ = nullptr;
  LessonPanel* lesson_panel_ = nullptr;
  WhatIfPanel* what_if_panel_ = nullptr;
  QDockWidget* lesson_dock_ = nullptr;
  QPlainTextEdit* log_ = nullptr;
  QLabel* caption_ = nullptr;
  QLabel* oversubscribed_ = nullptr;  // said before and during a run whose ranks outnumber cores
  // A stored run's oversubscription as it recorded it, read once per run shown.
  qint64 recorded_load_run_ = 0;
  QStringList recorded_load_;
  QStringList oversubscriptionLines();
  QLabel* state_label_ = nullptr;
  QLabel* elapsed_label_ = nullptr;
  QLabel* rate_label_ = nullptr;
  QProgressBar* progress_bar_ = nullptr;
  QTimer* elapsed_timer_ = nullptr;
  QElapsedTimer* run_clock_ = nullptr;
  QToolBar* tool_bar_ = nullptr;
  QAction *new_action_ = nullptr, *open_action_ = nullptr, *save_action_ = nullptr, *save_as_action_ = nullptr;
  QAction *run_action_ = nullptr, *stop_action_ = nullptr, *resume_action_ = nullptr;
  QAction *predict_action_ = nullptr, *compare_prediction_action_ = nullptr, *calibrate_action_ = nullptr;
  QAction* report_action_ = nullptr;  // File > Save run report…, while a run is on screen
  QAction* path_action_ = nullptr;    // View > Critical path
  PathOverlay* path_overlay_ = nullptr;
  QLabel* path_label_ = nullptr;      // the path's summary, under the caption while shown
  QAction *undo_action_ = nullptr, *redo_action_ = nullptr;
  QAction *undo_tool_ = nullptr, *redo_tool_ = nullptr;  // fixed-text twins for the toolbar
  QAction *follow_action_ = nullptr, *dark_action_ = nullptr, *fit_action_ = nullptr;
  QAction *timeline_only_action_ = nullptr, *reset_layout_action_ = nullptr;
  QMenu *recent_menu_ = nullptr, *examples_menu_ = nullptr, *view_menu_ = nullptr;
  std::vector<QDockWidget*> design_docks_, result_docks_;
  QByteArray default_state_;         // the docks as arrangeDocks left them
  QByteArray before_timeline_only_;  // dock state to restore when leaving "timeline only"
  QStringList recent_;
  std::function<SaveChoice()> save_prompt_;
  std::function<bool(qint64, const QString&)> run_plan_prompt_;
  std::function<int(const loom::host::ResumeRequest&)> resume_prompt_;
  loom::Plan running_plan_;  // what the live job trains (the designer's, or a resumed run's)
  qint64 current_run_ = 0;
  bool open_maximized_ = false;  // readSettings: first start on a small screen
  bool opened_stored_ = false;   // the run on screen was opened from the store, not run here
  QString run_state_;     // shown in the status bar while a run is live or after it ended
  QString example_hint_;  // what to look at, while the designer holds an unedited example
  bool dark_ = false;
};

}  // namespace loom::ui
