// MainWindow (see main_window.h): construction, actions, menus, plan files, settings.
// The dock layout is in main_window_layout.cpp, the Help menu and the examples in
// main_window_help.cpp, running and the live views in main_window_run.cpp.
#include "loom/ui/workbench/main_window.h"
#include "loom/ui/workbench/what_if_panel.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QScreen>
#include <QSettings>
#include <QStatusBar>
#include <QTimer>
#include <QToolBar>
#include <QUndoStack>

#include <cmath>

#include "loom/analysis/analysis.h"
#include "loom/store/run_store.h"
#include "loom/ui/run_list_model.h"
#include "loom/ui/timeline/timeline_view.h"
#include "loom/ui/workbench/appearance.h"
#include "loom/ui/workbench/path_overlay.h"
#include "loom/ui/workbench/report_file.h"
#include "loom/ui/workbench/run_browser.h"

namespace loom::ui {

namespace {
constexpr int kMaxRecent = 8;
// Bump when the dock layout changes incompatibly: a saved state of an older version is
// ignored and the per-screen default applies. 2: timeline first (issue 15).
constexpr int kSettingsVersion = 2;
}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), examples_(ExampleCatalog::builtIn()), run_clock_(new QElapsedTimer) {
  setObjectName("LoomMainWindow");
  setDockNestingEnabled(true);
  controller_.setDbPath(QString::fromStdString(store::RunStore::default_path()));
  createActions();
  createMenus();
  createToolBar();
  createDocks();
  createStatusBar();
  connectRunSignals();
  connectLessonSignals();
  connectCalibrationSignals();
  connect(&document_, &PlanDocument::planChanged, this, &MainWindow::onPlanChanged);
  connect(&document_, &PlanDocument::modifiedChanged, this, &MainWindow::updateTitle);
  readSettings();
  views_.clear(layerNames());
  onPlanChanged();
  refreshRunList();
}

MainWindow::~MainWindow() {
  // The panels and views hold pointers to document_ and views_, which as members die
  // before QWidget's destructor would delete the child widgets: delete those first.
  qDeleteAll(findChildren<QWidget*>(Qt::FindDirectChildrenOnly));
  delete run_clock_;
}

void MainWindow::createUndoActions() {
  undo_action_ = document_.undoStack()->createUndoAction(this, tr("&Undo"));
  undo_action_->setShortcut(QKeySequence::Undo);
  redo_action_ = document_.undoStack()->createRedoAction(this, tr("&Redo"));
  redo_action_->setShortcut(QKeySequence::Redo);
  // The toolbar's twins keep a fixed text, so the buttons after them do not move as the
  // undo text changes length; what they would undo is in their tooltip.
  QUndoStack* stack = document_.undoStack();
  undo_tool_ = new QAction(tr("Undo"), this);
  connect(undo_tool_, &QAction::triggered, stack, &QUndoStack::undo);
  redo_tool_ = new QAction(tr("Redo"), this);
  connect(redo_tool_, &QAction::triggered, stack, &QUndoStack::redo);
  auto sync = [this, stack] {
    undo_tool_->setEnabled(stack->canUndo());
    redo_tool_->setEnabled(stack->canRedo());
    undo_tool_->setToolTip(stack->canUndo() ? tr("Undo: %1").arg(stack->undoText()) : tr("Nothing to undo"));
    redo_tool_->setToolTip(stack->canRedo() ? tr("Redo: %1").arg(stack->redoText()) : tr("Nothing to redo"));
  };
  connect(stack, &QUndoStack::indexChanged, this, sync);
  connect(stack, &QUndoStack::cleanChanged, this, sync);
  sync();
}

void MainWindow::createActions() {
  auto make = [this](const QString& text, const QKeySequence& key, auto slot) {
    auto* a = new QAction(text, this);
    if (!key.isEmpty()) a->setShortcut(key);
    connect(a, &QAction::triggered, this, slot);
    return a;
  };
  new_action_ = make(tr("&New plan"), QKeySequence::New, [this] { newPlan(); });
  open_action_ = make(tr("&Open plan…"), QKeySequence::Open, [this] { openPlan(); });
  save_action_ = make(tr("&Save"), QKeySequence::Save, [this] { savePlan(); });
  save_as_action_ = make(tr("Save &as…"), QKeySequence::SaveAs, [this] { savePlanAs(); });
  run_action_ = make(tr("&Run"), QKeySequence(Qt::CTRL | Qt::Key_R), [this] { runPlan(); });
  stop_action_ = make(tr("S&top"), QKeySequence(Qt::CTRL | Qt::Key_Period), [this] { stopRun(); });
  stop_action_->setEnabled(false);
  resume_action_ = make(tr("Res&ume run"), {}, [this] { resumeRun(); });
  resume_action_->setEnabled(false);
  predict_action_ = make(tr("&Predict"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R), [this] { predictPlan(); });
  predict_action_->setToolTip(tr("Predict one steady step of this plan from this machine's stored runs, "
                                 "store the prediction as a run and show it (nothing runs)"));
  compare_prediction_action_ = make(tr("Compare with p&rediction"), {}, [this] { compareWithPrediction(); });
  compare_prediction_action_->setEnabled(false);
  calibrate_action_ = make(tr("&Calibrate"), {}, [this] { calibratePlan(); });
  createUndoActions();
  follow_action_ = make(tr("&Follow latest"), QKeySequence(Qt::Key_F), [this](bool on) {
    views_.timeline()->setFollowLatest(on);
  });
  follow_action_->setCheckable(true);
  follow_action_->setChecked(true);
  fit_action_ = make(tr("Fit &all"), QKeySequence(Qt::Key_0), [this] { views_.timeline()->fitAll(); });
  path_action_ = make(tr("Critical &path"), QKeySequence(Qt::Key_P), [this](bool on) { path_overlay_->setEnabled(on); });
  path_action_->setCheckable(true);
  path_action_->setToolTip(tr("Highlight, for the step in the middle of the timeline, the chain of work across "
                              "ranks that decided how long it took (Help > Glossary: critical path)"));
  dark_action_ = make(tr("&Dark palette"), {}, [this](bool on) { setDarkPalette(on); });
  dark_action_->setCheckable(true);
  timeline_only_action_ = make(tr("&Timeline only"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_T),
                               [this](bool on) { setTimelineOnly(on); });
  timeline_only_action_->setCheckable(true);
  timeline_only_action_->setToolTip(tr("Collapse every panel so the timeline fills the window (again to bring them back)"));
  reset_layout_action_ = make(tr("&Reset layout"), {}, [this] {
    timeline_only_action_->setChecked(false);
    applyDefaultLayout(size());
  });
}

void MainWindow::createMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addActions({new_action_, open_action_});
  recent_menu_ = file->addMenu(tr("Open &recent"));
  examples_menu_ = file->addMenu(tr("&Examples"));
  examples_menu_->setToolTipsVisible(true);  // each example says what it shows
  file->addSeparator();
  file->addActions({save_action_, save_as_action_});
  report_action_ = file->addAction(tr("Save run &report…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Save report"), QStringLiteral("run-%1.html").arg(shown_.id),
                                                      tr("HTML (*.html);;PDF (*.pdf)"));
    if (path.isEmpty()) return;
    const QString error = saveRunReport(path);
    if (!error.isEmpty()) showError(tr("Report not saved"), error);
  });
  report_action_->setToolTip(tr("The run on screen as one HTML or PDF file: figures, curves, breakdown, timeline, plan"));
  report_action_->setEnabled(false);
  file->addSeparator();
  file->addAction(tr("Run &database…"), this, &MainWindow::chooseDatabase);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  edit->addActions({undo_action_, redo_action_});
  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addActions({run_action_, stop_action_, resume_action_});
  run->addSeparator();
  run->addActions({predict_action_, compare_prediction_action_, calibrate_action_});
  view_menu_ = menuBar()->addMenu(tr("&View"));
  view_menu_->addActions({follow_action_, fit_action_, path_action_, dark_action_});
  view_menu_->addSeparator();
  view_menu_->addActions({timeline_only_action_, reset_layout_action_});
  view_menu_->addSeparator();
  createHelpMenu();
  rebuildExamplesMenu();
}

void MainWindow::createToolBar() {
  tool_bar_ = addToolBar(tr("Main"));
  tool_bar_->setObjectName("MainToolBar");
  tool_bar_->setMovable(false);
  tool_bar_->addActions({new_action_, open_action_, save_action_});
  tool_bar_->addSeparator();
  tool_bar_->addActions({undo_tool_, redo_tool_});
  tool_bar_->addSeparator();
  tool_bar_->addActions({run_action_, stop_action_, resume_action_});
  tool_bar_->addSeparator();
  tool_bar_->addActions({follow_action_, fit_action_, timeline_only_action_});
}

void MainWindow::createStatusBar() {
  state_label_ = new QLabel;
  state_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // A long message (a plan error) must not widen the window: the label takes what is
  // left and clips; its tooltip has the whole text.
  state_label_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  state_label_->setMinimumWidth(0);
  progress_bar_ = new QProgressBar;
  progress_bar_->setMaximumWidth(180);
  progress_bar_->setVisible(false);
  elapsed_label_ = new QLabel;
  rate_label_ = new QLabel;
  statusBar()->addWidget(state_label_, 1);
  statusBar()->addPermanentWidget(progress_bar_);
  statusBar()->addPermanentWidget(elapsed_label_);
  statusBar()->addPermanentWidget(rate_label_);
  elapsed_timer_ = new QTimer(this);
  elapsed_timer_->setInterval(250);
  connect(elapsed_timer_, &QTimer::timeout, this, [this] {
    elapsed_label_->setText(tr("%1 s").arg(run_clock_->elapsed() / 1000.0, 0, 'f', 1));
  });
}

QString MainWindow::statusText() const { return state_label_->text(); }
QString MainWindow::rateText() const { return rate_label_->text(); }

void MainWindow::setStateText(const QString& text) {
  state_label_->setText(text);
  state_label_->setToolTip(text);
}

// Another store: a finished run on screen is the old store's, so its views are emptied.
void MainWindow::setDbPath(const QString& path) {
  if (path != dbPath()) forgetFinishedRun();
  controller_.setDbPath(path);
  refreshRunList();
}

// After each reload of the Runs list, for a finished run on screen: if the list lacks it,
// it was deleted (here or by loom-cli) and its caption and views describe nothing; else
// the status bar gives the samples/s every view gives (the stored steady figure,
// RunRecord::samples_per_s), not the last live estimate.
void MainWindow::onRunListReloaded() {
  if (!controller_.isRunning()) what_if_panel_->storeChanged(dbPath());  // runs came or went: recalibrate
  const RunListModel* runs = run_browser_->model();
  if (current_run_ == 0 || controller_.isRunning() || !runs->errorMessage().isEmpty() ||
      run_browser_->database() != dbPath())
    return;
  const int row = runs->rowForRunId(current_run_);
  if (row < 0) {
    // A list read before the run was stored lacks it too: only the store can say it is gone.
    auto store = loom::store::RunStore::open(dbPath().toStdString());
    if (!store.ok()) return;
    const auto run = store->load_run(current_run_);
    if (!run.ok() && run.error().code == loom::ErrorCode::NotFound) forgetFinishedRun();
    return;
  }
  const double rate = runs->run(row).samples_per_s;
  rate_label_->setText(rate > 0 ? tr("%1 samples/s").arg(rate, 0, 'f', 0) : QString());
}

QString MainWindow::saveRunReport(const QString& path) {
  if (shown_.id == 0) return tr("No run on screen");
  QApplication::setOverrideCursor(Qt::WaitCursor);
  const QString error = write_report_file(dbPath(), {shown_.id}, std::nan(""), loom::analysis::kWarmupSteps, path);
  QApplication::restoreOverrideCursor();
  return error;
}

// An existing store to browse, or a new file that the next run creates: an open dialog
// that also takes a new name (AnyFile), so its button says Open, not Save.
void MainWindow::chooseDatabase() {
  QFileDialog dialog(this, tr("Open run store"), dbPath(), tr("Run stores (*.db);;All files (*)"));
  dialog.setObjectName("OpenStoreDialog");
  dialog.setAcceptMode(QFileDialog::AcceptOpen);
  dialog.setFileMode(QFileDialog::AnyFile);
  dialog.setLabelText(QFileDialog::Accept, tr("Open"));
  if (dialog.exec() != QDialog::Accepted || dialog.selectedFiles().isEmpty()) return;
  setDbPath(dialog.selectedFiles().front());
}

void MainWindow::setDarkPalette(bool dark) {
  dark_ = dark;
  dark_action_->setChecked(dark);
  apply_palette(dark);
}

// ---- plan files ----

bool MainWindow::maybeSave() {
  if (!document_.isModified()) return true;
  SaveChoice choice = SaveChoice::Cancel;
  if (save_prompt_) {
    choice = save_prompt_();
  } else {
    const auto answer = QMessageBox::warning(
        this, tr("Unsaved changes"), tr("The plan \"%1\" has changes that are not saved.").arg(
                                         QString::fromStdString(document_.plan().name)),
        QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
    choice = answer == QMessageBox::Save      ? SaveChoice::Save
             : answer == QMessageBox::Discard ? SaveChoice::Discard
                                              : SaveChoice::Cancel;
  }
  if (choice == SaveChoice::Save) return savePlan();
  return choice == SaveChoice::Discard;
}

void MainWindow::newPlan() {
  if (!maybeSave()) return;
  document_.reset(loom::default_plan());
  planReplaced();
}

void MainWindow::openPlan() {
  if (!maybeSave()) return;
  const QString path = QFileDialog::getOpenFileName(this, tr("Open plan"), QFileInfo(document_.filePath()).path(),
                                                    tr("Loom plans (*.json);;All files (*)"));
  if (!path.isEmpty()) openPlanFile(path);
}

bool MainWindow::openPlanFile(const QString& path) {
  loom::Status loaded = document_.load(path);
  if (!loaded.ok()) {
    showError(tr("Cannot open plan"), QString::fromStdString(loaded.error().describe()));
    return false;
  }
  if (!path.startsWith(':')) addRecent(path);
  planReplaced();
  return true;
}

// Another plan is in the designer: views that still showed a finished run of the old
// plan would be read as this plan's, so they are emptied. A live run stays on screen,
// its caption saying which plan it runs.
void MainWindow::planReplaced(const QString& exampleHint) {
  example_hint_ = exampleHint;
  forgetFinishedRun();
}

void MainWindow::forgetFinishedRun() {
  if (!controller_.isRunning() && current_run_ != 0) {
    feed_.stop();
    current_run_ = 0;
    opened_stored_ = false;
    run_state_.clear();
    log_->clear();
    launch_log_.clear();
    views_.clear(layerNames());
    elapsed_label_->clear();
    rate_label_->clear();
    clearShownRun();
  }
  updateRunState();
}

bool MainWindow::savePlan() {
  if (document_.filePath().isEmpty() || document_.filePath().startsWith(':')) return savePlanAs();
  return savePlanTo(document_.filePath());
}

bool MainWindow::savePlanAs() {
  QString suggested = document_.filePath();
  if (suggested.isEmpty() || suggested.startsWith(':')) {
    suggested = QDir::home().filePath(QString::fromStdString(document_.plan().name) + ".json");
  }
  const QString path = QFileDialog::getSaveFileName(this, tr("Save plan"), suggested, tr("Loom plans (*.json)"));
  return !path.isEmpty() && savePlanTo(path);
}

bool MainWindow::savePlanTo(const QString& path) {
  loom::Status saved = document_.save(path);
  if (!saved.ok()) {
    showError(tr("Cannot save plan"), QString::fromStdString(saved.error().describe()));
    return false;
  }
  addRecent(path);
  updateTitle();
  return true;
}

void MainWindow::addRecent(const QString& path) {
  const QString absolute = QFileInfo(path).absoluteFilePath();
  recent_.removeAll(absolute);
  recent_.prepend(absolute);
  while (recent_.size() > kMaxRecent) recent_.removeLast();
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  recent_menu_->clear();
  for (const QString& path : recent_) {
    recent_menu_->addAction(QFileInfo(path).fileName() + "  —  " + QFileInfo(path).path(), this, [this, path] {
      if (maybeSave()) openPlanFile(path);
    });
  }
  recent_menu_->setEnabled(!recent_.isEmpty());
}

// ---- state shown in the window ----

std::vector<std::string> MainWindow::layerNames() const {
  std::vector<std::string> names;
  for (const auto& layer : document_.info().layers) names.push_back(layer.name);
  return names;
}

void MainWindow::onPlanChanged() {
  if (document_.isModified()) example_hint_.clear();  // the example was edited: the hint may not hold
  what_if_panel_->setPlan(document_.plan());
  updateRunState();
  updateTitle();
  updateSubject();
}

void MainWindow::updateTitle() {
  const QString name = document_.filePath().isEmpty() || document_.filePath().startsWith(':')
                           ? QString::fromStdString(document_.plan().name)
                           : QFileInfo(document_.filePath()).fileName();
  setWindowTitle(windowTitleFor(name, shown_));
  setWindowModified(document_.isModified());
}

void MainWindow::updateRunState() {
  const QString blocked = document_.runBlockedReason();
  const bool running = controller_.isRunning();
  run_action_->setEnabled(blocked.isEmpty() && !running);
  stop_action_->setEnabled(running);
  updateResumeAction();
  updatePredictionActions();
  run_action_->setToolTip(blocked.isEmpty() ? tr("Run this plan (%1 ranks)").arg(loom::world_size(document_.plan()))
                                            : tr("Cannot run: %1").arg(blocked));
  // A plan error outranks the last run's outcome: it is what stops the next Run.
  if (running) {
    setStateText(run_state_);
  } else if (!blocked.isEmpty()) {
    setStateText(tr("Plan invalid — %1").arg(blocked));
  } else if (!run_state_.isEmpty()) {
    setStateText(run_state_);
  } else {
    const int ranks = loom::world_size(document_.plan());
    QString text = ranks == 1 ? tr("Ready: 1 rank") : tr("Ready: %1 ranks").arg(ranks);
    if (!example_hint_.isEmpty()) text += tr(" · after Run, look at: %1").arg(example_hint_);
    setStateText(text);
  }
}

void MainWindow::showError(const QString& title, const QString& text) {
  setStateText(title + ": " + text);
  if (save_prompt_) return;  // scripted (tests): no modal dialogs
  QMessageBox::warning(this, title, text);
}

// ---- settings ----

void MainWindow::readSettings() {
  QSettings settings;
  const bool restored = settings.value("settingsVersion").toInt() == kSettingsVersion &&
                        restoreGeometry(settings.value("window/geometry").toByteArray()) &&
                        restoreState(settings.value("window/state").toByteArray(), kSettingsVersion);
  if (!restored) {
    // First start (or a layout from an older version): fit the screen, timeline first.
    // On a smaller screen the window opens maximized: a window as large as the available
    // area would be taller than it by its title bar (at 1280x720 the status bar fell off
    // the screen), and the window manager knows its decorations where we do not.
    QSize size(1600, 1000);
    if (const QScreen* screen = QGuiApplication::primaryScreen()) {
      const QSize available = screen->availableGeometry().size();
      open_maximized_ = available.width() < size.width() || available.height() < size.height();
      size = size.boundedTo(available);
    }
    resize(size);
    applyDefaultLayout(size);
  }
  recent_ = settings.value("recentPlans").toStringList();
  rebuildRecentMenu();
  const QString db = settings.value("runDatabase").toString();
  if (!db.isEmpty() && qEnvironmentVariableIsEmpty("LOOM_DB")) controller_.setDbPath(db);
  setDarkPalette(settings.value("darkPalette", false).toBool());
}

void MainWindow::writeSettings() {
  QSettings settings;
  settings.setValue("settingsVersion", kSettingsVersion);
  settings.setValue("window/geometry", saveGeometry());
  // Saved with the panels shown, so "timeline only" is not what the next start opens with.
  if (timeline_only_action_->isChecked()) setTimelineOnly(false);
  settings.setValue("window/state", saveState(kSettingsVersion));
  settings.setValue("recentPlans", recent_);
  settings.setValue("darkPalette", dark_);
  if (qEnvironmentVariableIsEmpty("LOOM_DB")) settings.setValue("runDatabase", dbPath());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (!maybeSave()) {
    event->ignore();
    return;
  }
  if (controller_.isRunning()) {
    // Closing stops the job gracefully; ~RunController waits for it, so what the ranks
    // recorded is stored and the run ends as "stopped".
    setStateText(tr("Stopping the run before closing…"));
    controller_.stop();
  }
  writeSettings();
  event->accept();
}

}  // namespace loom::ui
