// MainWindow (see main_window.h): construction, plan files, settings. Running and the
// live views are in main_window_run.cpp.
#include "loom/ui/workbench/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDirIterator>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QFile>
#include <QFontDatabase>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QSettings>
#include <QStatusBar>
#include <QTableView>
#include <QTimer>
#include <QToolBar>
#include <QUndoStack>

#include "loom/profiles/run_store.h"
#include "loom/ui/charts/training_charts.h"
#include "loom/ui/designer/designer_panel.h"
#include "loom/ui/designer/devices_panel.h"
#include "loom/ui/designer/placement_panel.h"
#include "loom/ui/designer/strategy_panel.h"
#include "loom/ui/item_roles.h"
#include "loom/ui/run_list_model.h"
#include "loom/ui/timeline/timeline_view.h"
#include "loom/ui/workbench/appearance.h"

namespace loom::ui {

namespace {
constexpr int kMaxRecent = 8;
constexpr int kSettingsVersion = 1;  // bump when the dock layout changes incompatibly
}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent), run_clock_(new QElapsedTimer) {
  setObjectName("LoomMainWindow");
  setDockNestingEnabled(true);
  controller_.setDbPath(QString::fromStdString(store::RunStore::default_path()));
  createActions();
  createMenus();
  createDocks();
  createStatusBar();
  connectRunSignals();
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
  undo_action_ = document_.undoStack()->createUndoAction(this, tr("&Undo"));
  undo_action_->setShortcut(QKeySequence::Undo);
  redo_action_ = document_.undoStack()->createRedoAction(this, tr("&Redo"));
  redo_action_->setShortcut(QKeySequence::Redo);
  follow_action_ = make(tr("&Follow latest"), QKeySequence(Qt::Key_F), [this](bool on) {
    views_.timeline()->setFollowLatest(on);
  });
  follow_action_->setCheckable(true);
  follow_action_->setChecked(true);
  fit_action_ = make(tr("Fit &all"), QKeySequence(Qt::Key_0), [this] { views_.timeline()->fitAll(); });
  dark_action_ = make(tr("&Dark palette"), {}, [this](bool on) { setDarkPalette(on); });
  dark_action_->setCheckable(true);
}

void MainWindow::createMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addActions({new_action_, open_action_});
  recent_menu_ = file->addMenu(tr("Open &recent"));
  examples_menu_ = file->addMenu(tr("&Examples"));
  file->addSeparator();
  file->addActions({save_action_, save_as_action_});
  file->addSeparator();
  file->addAction(tr("Run &database…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Run database"), dbPath(), tr("SQLite (*.db)"), nullptr,
                                                      QFileDialog::DontConfirmOverwrite);
    if (!path.isEmpty()) setDbPath(path);
  });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  edit->addActions({undo_action_, redo_action_});
  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addActions({run_action_, stop_action_});
  view_menu_ = menuBar()->addMenu(tr("&View"));
  view_menu_->addActions({follow_action_, fit_action_, dark_action_});
  view_menu_->addSeparator();
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About Loom"), this, [this] {
    QMessageBox::about(this, tr("About Loom"),
                       tr("<b>Loom %1</b><p>A workbench for designing and profiling parallel training: lay a model "
                          "out on devices, press Run, and watch what each device does.</p>")
                           .arg(QStringLiteral(LOOM_VERSION)));
  });
  QToolBar* bar = addToolBar(tr("Main"));
  bar->setObjectName("MainToolBar");
  bar->addActions({new_action_, open_action_, save_action_});
  bar->addSeparator();
  bar->addActions({undo_action_, redo_action_});
  bar->addSeparator();
  bar->addActions({run_action_, stop_action_});
  bar->addSeparator();
  bar->addActions({follow_action_, fit_action_});
  rebuildExamplesMenu();
}

QDockWidget* MainWindow::addDock(const QString& title, const QString& objectName, QWidget* widget,
                                 Qt::DockWidgetArea area) {
  auto* dock = new QDockWidget(title, this);
  dock->setObjectName(objectName);  // restoreState finds docks by name
  dock->setWidget(widget);
  addDockWidget(area, dock);
  view_menu_->addAction(dock->toggleViewAction());
  return dock;
}

void MainWindow::createDocks() {
  setCentralWidget(views_.timeline());
  auto* model = addDock(tr("Model"), "ModelDock", new DesignerPanel(&document_), Qt::LeftDockWidgetArea);
  auto* devices = addDock(tr("Devices"), "DevicesDock", new DevicesPanel(&document_), Qt::LeftDockWidgetArea);
  auto* strategy = addDock(tr("Strategy"), "StrategyDock", new StrategyPanel(&document_), Qt::RightDockWidgetArea);
  auto* placement = addDock(tr("Placement"), "PlacementDock", new PlacementPanel(&document_), Qt::RightDockWidgetArea);
  auto* charts = addDock(tr("Training"), "TrainingDock", views_.training(), Qt::BottomDockWidgetArea);
  auto* breakdown = addDock(tr("Breakdown"), "BreakdownDock", views_.breakdown(), Qt::BottomDockWidgetArea);
  auto* staleness = addDock(tr("Staleness"), "StalenessDock", views_.staleness(), Qt::BottomDockWidgetArea);
  log_ = new QPlainTextEdit;
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(20000);
  log_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  auto* log = addDock(tr("Launch log"), "LogDock", log_, Qt::BottomDockWidgetArea);
  run_list_ = new RunListModel(this);
  run_table_ = new QTableView;
  run_table_->setModel(run_list_);
  run_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  run_table_->horizontalHeader()->setStretchLastSection(true);
  run_table_->verticalHeader()->hide();
  connect(run_table_, &QTableView::doubleClicked, this,
          [this](const QModelIndex& index) { openRun(index.data(RunIdRole).toLongLong()); });
  auto* runs = addDock(tr("Runs"), "RunsDock", run_table_, Qt::BottomDockWidgetArea);
  tabifyDockWidget(model, devices);
  tabifyDockWidget(strategy, placement);
  for (QDockWidget* d : {breakdown, staleness, log, runs}) tabifyDockWidget(charts, d);
  model->raise();
  strategy->raise();
  charts->raise();
  // First-run proportions (saved layouts override them): the timeline gets the middle,
  // the charts a third of the height.
  resizeDocks({model, strategy}, {420, 480}, Qt::Horizontal);
  resizeDocks({charts}, {360}, Qt::Vertical);
}

void MainWindow::createStatusBar() {
  state_label_ = new QLabel;
  state_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
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
QString MainWindow::launchLog() const { return log_->toPlainText(); }

void MainWindow::setDbPath(const QString& path) {
  controller_.setDbPath(path);
  refreshRunList();
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
  return true;
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
  return true;
}

void MainWindow::openExample(const QString& resource) {
  if (!maybeSave()) return;
  QFile file(resource);
  if (!file.open(QIODevice::ReadOnly)) return showError(tr("Cannot open example"), resource);
  auto parsed = loom::parse_plan(file.readAll().toStdString());
  if (!parsed.ok()) {
    const auto& e = parsed.errors.front();
    return showError(tr("Example plan is invalid"), QString::fromStdString(e.path + ": " + e.reason));
  }
  // An example is a starting point: no file path, so saving asks where to put it.
  document_.reset(*parsed.plan);
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

void MainWindow::rebuildExamplesMenu() {
  examples_menu_->clear();
  QStringList files;
  for (QDirIterator it(":/plans", {"*.json"}); it.hasNext();) files << it.next();
  files.sort();
  for (const QString& file : files) {
    examples_menu_->addAction(QFileInfo(file).completeBaseName(), this, [this, file] { openExample(file); });
  }
}

// ---- state shown in the window ----

std::vector<std::string> MainWindow::layerNames() const {
  std::vector<std::string> names;
  for (const auto& layer : document_.info().layers) names.push_back(layer.name);
  return names;
}

void MainWindow::onPlanChanged() {
  updateRunState();
  updateTitle();
}

void MainWindow::updateTitle() {
  const QString name = document_.filePath().isEmpty() ? QString::fromStdString(document_.plan().name)
                                                        : QFileInfo(document_.filePath()).fileName();
  setWindowTitle(tr("%1[*] — Loom").arg(name.isEmpty() ? tr("untitled") : name));
  setWindowModified(document_.isModified());
}

void MainWindow::updateRunState() {
  const QString blocked = document_.runBlockedReason();
  const bool running = controller_.isRunning();
  run_action_->setEnabled(blocked.isEmpty() && !running);
  stop_action_->setEnabled(running);
  run_action_->setToolTip(blocked.isEmpty() ? tr("Run this plan (%1 ranks)").arg(loom::world_size(document_.plan()))
                                            : tr("Cannot run: %1").arg(blocked));
  if (running || !run_state_.isEmpty()) {
    state_label_->setText(run_state_);
  } else if (!blocked.isEmpty()) {
    state_label_->setText(tr("Plan invalid — %1").arg(blocked));
  } else {
    state_label_->setText(tr("Ready: %1 ranks").arg(loom::world_size(document_.plan())));
  }
}

void MainWindow::showError(const QString& title, const QString& text) {
  state_label_->setText(title + ": " + text);
  if (save_prompt_) return;  // scripted (tests): no modal dialogs
  QMessageBox::warning(this, title, text);
}

// ---- settings ----

void MainWindow::readSettings() {
  QSettings settings;
  if (settings.value("settingsVersion").toInt() == kSettingsVersion) {
    restoreGeometry(settings.value("window/geometry").toByteArray());
    restoreState(settings.value("window/state").toByteArray(), kSettingsVersion);
  } else {
    resize(1400, 900);
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
    state_label_->setText(tr("Stopping the run before closing…"));
    controller_.stop();
  }
  writeSettings();
  event->accept();
}

}  // namespace loom::ui
