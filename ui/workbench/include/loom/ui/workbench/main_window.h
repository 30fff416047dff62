// The workbench window: design a plan (layers, placement on devices, strategy), press
// Run, and watch each device work. Panels are docks whose layout QSettings keeps, with
// recent plans, the run database and the palette. The window never waits on the
// launcher or the database: jobs run on RunController's thread, reads on RunFeed's.
#pragma once

#include <QMainWindow>
#include <QPointer>
#include <QString>
#include <QStringList>

#include <functional>

#include "loom/ui/designer/plan_document.h"
#include "loom/ui/workbench/run_controller.h"
#include "loom/ui/workbench/run_feed.h"
#include "loom/ui/workbench/run_views.h"

class QAction;
class QLabel;
class QMenu;
class QPlainTextEdit;
class QProgressBar;
class QTableView;
class QDockWidget;
class QElapsedTimer;
class QTimer;

namespace loom::ui {

class RunListModel;

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
  QString statusText() const;
  QString launchLog() const;
  qint64 currentRunId() const { return current_run_; }
  QString dbPath() const { return controller_.dbPath(); }
  void setDbPath(const QString& path);
  // Tests and scripts answer the unsaved-changes question without a dialog.
  void setSavePrompt(std::function<SaveChoice()> prompt) { save_prompt_ = std::move(prompt); }

  bool openPlanFile(const QString& path);
  bool savePlanTo(const QString& path);
  void openRun(qint64 runId);
  void setDarkPalette(bool dark);
  bool darkPalette() const { return dark_; }

 public slots:
  void runPlan();
  void stopRun();

 signals:
  void runFinished(qint64 runId, const QString& status, const QString& error);
  // The feed delivered the whole of the run being shown.
  void runLoaded(qint64 runId);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void createActions();
  void createMenus();
  void createDocks();
  QDockWidget* addDock(const QString& title, const QString& objectName, QWidget* widget, Qt::DockWidgetArea area);
  void createStatusBar();
  void connectRunSignals();
  void readSettings();
  void writeSettings();

  bool maybeSave();
  void newPlan();
  void openPlan();
  bool savePlan();
  bool savePlanAs();
  void openExample(const QString& resource);
  void addRecent(const QString& path);
  void rebuildRecentMenu();
  void rebuildExamplesMenu();

  void onPlanChanged();
  void updateRunState();
  void updateTitle();
  void onRunCreated(qint64 runId);
  void onProgress(const loom::host::JobProgress& progress);
  void onRunFinished(qint64 runId, const QString& status, const QString& error, double wallSeconds);
  void onBatch(std::shared_ptr<const FeedBatch> batch);
  void refreshRunList();
  void showError(const QString& title, const QString& text);
  std::vector<std::string> layerNames() const;

  PlanDocument document_;
  RunController controller_;
  RunFeed feed_;
  RunViews views_;
  RunListModel* run_list_ = nullptr;
  QTableView* run_table_ = nullptr;
  QPlainTextEdit* log_ = nullptr;
  QLabel* state_label_ = nullptr;
  QLabel* elapsed_label_ = nullptr;
  QLabel* rate_label_ = nullptr;
  QProgressBar* progress_bar_ = nullptr;
  QTimer* elapsed_timer_ = nullptr;
  QElapsedTimer* run_clock_ = nullptr;
  QAction *new_action_ = nullptr, *open_action_ = nullptr, *save_action_ = nullptr, *save_as_action_ = nullptr;
  QAction *run_action_ = nullptr, *stop_action_ = nullptr, *undo_action_ = nullptr, *redo_action_ = nullptr;
  QAction *follow_action_ = nullptr, *dark_action_ = nullptr, *fit_action_ = nullptr;
  QMenu *recent_menu_ = nullptr, *examples_menu_ = nullptr, *view_menu_ = nullptr;
  QStringList recent_;
  std::function<SaveChoice()> save_prompt_;
  qint64 current_run_ = 0;
  QString run_state_;  // shown in the status bar while a run is live or after it ended
  bool dark_ = false;
};

}  // namespace loom::ui
