// MainWindow: the docks and where they go. The timeline is the central widget under a
// caption naming the run on screen; designer panels are tabbed docks on the left (full
// height), result views tabbed docks under the timeline. Every dock's content can shrink
// (tables scroll, forms and charts sit in scroll areas), so a small screen gets scroll
// bars rather than panels drawn over each other or a window taller than the screen.
#include <algorithm>

#include <QAction>
#include <QDockWidget>
#include <QFontDatabase>
#include <QLabel>
#include <QMenu>
#include <QPlainTextEdit>
#include <QScrollArea>
#include <QTimer>
#include <QVBoxLayout>

#include "loom/host/oversubscription.h"
#include "loom/ui/designer/designer_panel.h"
#include "loom/ui/glossary.h"
#include "loom/ui/designer/devices_panel.h"
#include "loom/ui/designer/placement_panel.h"
#include "loom/ui/designer/strategy_panel.h"
#include "loom/ui/workbench/lesson_panel.h"
#include "loom/ui/workbench/path_overlay.h"
#include "loom/ui/workbench/run_browser.h"
#include "loom/ui/workbench/calibration_view.h"
#include "loom/ui/workbench/what_if_panel.h"
#include "loom/ui/charts/training_charts.h"
#include "loom/ui/timeline/replay_bar.h"
#include "loom/ui/timeline/timeline_view.h"
#include "loom/ui/workbench/main_window.h"

namespace loom::ui {

namespace {

// A view that may not fit a short dock: it scrolls instead of forcing the dock (and so
// the window) to its minimum height.
QWidget* scrollable(QWidget* view) {
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(view);
  return scroll;
}

// Sizes of the default layout for a screen: the side column and the result area get
// what they need to be readable, the timeline the rest.
struct DefaultSizes {
  int left;
  int bottom;
};
DefaultSizes sizesFor(const QSize& screen) {
  if (screen.width() < 1600 || screen.height() < 900) return {410, 230};  // 1280x720, 1366x768
  return {440, 370};                                                     // 1920x1080 and up
}

}  // namespace

QWidget* MainWindow::createTimelineArea() {
  auto* area = new QWidget;
  area->setObjectName("TimelineArea");
  caption_ = new QLabel;
  caption_->setObjectName("RunCaption");
  caption_->setContentsMargins(8, 3, 8, 3);
  caption_->setTextFormat(Qt::PlainText);
  // Clipped rather than widening the window when the plan names are long.
  caption_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
  QFont bold = caption_->font();
  bold.setBold(true);
  caption_->setFont(bold);
  oversubscribed_ = new QLabel;
  oversubscribed_->setObjectName("OversubscriptionNotice");
  oversubscribed_->setContentsMargins(8, 2, 8, 2);
  oversubscribed_->setTextFormat(Qt::PlainText);
  oversubscribed_->setWordWrap(true);
  oversubscribed_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Minimum);
  oversubscribed_->setAutoFillBackground(true);
  oversubscribed_->hide();
  path_label_ = new QLabel;
  path_label_->setObjectName("CriticalPathSummary");
  path_label_->setContentsMargins(8, 2, 8, 2);
  path_label_->setTextFormat(Qt::PlainText);
  path_label_->setWordWrap(true);
  path_label_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Minimum);
  path_label_->hide();
  path_overlay_ = new PathOverlay(views_.timeline(), this);
  connect(path_overlay_, &PathOverlay::summaryChanged, this, [this](const QString& text) {
    path_label_->setText(text);
    path_label_->setVisible(!text.isEmpty());
  });
  auto* layout = new QVBoxLayout(area);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addWidget(caption_);
  layout->addWidget(oversubscribed_);
  layout->addWidget(path_label_);
  layout->addWidget(views_.replay());
  layout->addWidget(views_.timeline(), 1);
  return area;
}

QDockWidget* MainWindow::addDock(const QString& title, const QString& objectName, QWidget* widget,
                                 Qt::DockWidgetArea area) {
  auto* dock = new QDockWidget(title, this);
  dock->setObjectName(objectName);  // restoreState finds docks by name
  dock->setProperty("baseTitle", title);
  dock->setWidget(widget);
  addDockWidget(area, dock);
  view_menu_->addAction(dock->toggleViewAction());
  return dock;
}

bool MainWindow::openLesson(const QString& name) {
  if (!lesson_panel_->selectLesson(name)) return false;
  lesson_dock_->show();
  lesson_dock_->raise();
  return true;
}

void MainWindow::createDocks() {
  setCentralWidget(createTimelineArea());
  setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);  // designer column runs full height
  setTabPosition(Qt::AllDockWidgetAreas, QTabWidget::North);
  lesson_panel_ = new LessonPanel(&lesson_session_);
  design_docks_ = {
      addDock(tr("Model"), "ModelDock", new DesignerPanel(&document_), Qt::LeftDockWidgetArea),
      addDock(tr("Devices"), "DevicesDock", new DevicesPanel(&document_), Qt::LeftDockWidgetArea),
      addDock(tr("Strategy"), "StrategyDock", new StrategyPanel(&document_), Qt::LeftDockWidgetArea),
      addDock(tr("Placement"), "PlacementDock", new PlacementPanel(&document_), Qt::LeftDockWidgetArea),
      addDock(tr("Lessons"), "LessonsDock", lesson_panel_, Qt::LeftDockWidgetArea),
  };
  lesson_dock_ = design_docks_.back();
  // Queued: a lesson ends inside the last run's runFinished, before the run has let go of the views.
  connect(lesson_panel_, &LessonPanel::openRunRequested, this, &MainWindow::openRun, Qt::QueuedConnection);
  log_ = new QPlainTextEdit;
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(20000);
  log_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  run_browser_ = new RunBrowser;
  connect(run_browser_, &RunBrowser::openRequested, this, &MainWindow::openRun);
  connect(run_browser_, &RunBrowser::compareRequested, this, &MainWindow::openComparison);
  connect(run_browser_, &RunBrowser::openStoreRequested, this, &MainWindow::chooseDatabase);
  connect(run_browser_, &RunBrowser::errorOccurred, this, &MainWindow::showError);
  connect(run_browser_, &RunBrowser::listReloaded, this, &MainWindow::onRunListReloaded);
  what_if_panel_ = new WhatIfPanel;
  connect(what_if_panel_, &WhatIfPanel::openPlanRequested, this, &MainWindow::openSearchedLayout);
  connect(what_if_panel_, &WhatIfPanel::showPredictionRequested, this, [this] { storeWhatIfPrediction(); });
  connect(what_if_panel_, &WhatIfPanel::resetCalibrationRequested, this, &MainWindow::resetCalibration);
  what_if_panel_->calibrationView()->setCalibrateAction(calibrate_action_);
  view_menu_->addSeparator();
  result_docks_ = {
      addDock(tr("Training"), "TrainingDock", scrollable(views_.training()), Qt::BottomDockWidgetArea),
      addDock(tr("Breakdown"), "BreakdownDock", scrollable(views_.breakdown()), Qt::BottomDockWidgetArea),
      addDock(tr("Staleness"), "StalenessDock", scrollable(views_.staleness()), Qt::BottomDockWidgetArea),
      addDock(tr("Serving"), "ServingDock", scrollable(views_.serving()), Qt::BottomDockWidgetArea),
      addDock(tr("Launch log"), "LogDock", log_, Qt::BottomDockWidgetArea),
      addDock(tr("Runs"), "RunsDock", run_browser_, Qt::BottomDockWidgetArea),
      addDock(tr("What-if"), "WhatIfDock", scrollable(what_if_panel_), Qt::BottomDockWidgetArea),
  };
  QDockWidget* what_if_dock = result_docks_.back();
  connect(what_if_dock, &QDockWidget::visibilityChanged, this, [this, what_if_dock](bool visible) {
    // After the tab switch has laid the area out: resizing inside it is undone.
    if (visible) QTimer::singleShot(0, this, [this, what_if_dock] { growForWhatIf(what_if_dock); });
  });
  arrangeDocks();
}

// The What-if dock's scaling chart and layout table need about 320 px with the tab bar;
// the 1280x720 layout's result area (230) squeezed the chart under its own legend. Raised
// while shorter than that, the area grows, to at most half the window (the timeline keeps
// the rest); a user's taller area, or a floated dock, is left alone.
void MainWindow::growForWhatIf(QDockWidget* dock) {
  constexpr int kWhatIfHeight = 320;
  const int wanted = std::min(kWhatIfHeight, height() / 2);
  if (dock->isFloating() || !dock->isVisible() || dock->height() >= wanted) return;
  resizeDocks({dock}, {wanted}, Qt::Vertical);
}

// The arrangement is made once, when the docks are created, and kept as a saved state:
// restoring it puts every dock back (even floated or moved ones) without the churn of
// removing and re-adding docks, which leaves stale dock-area tab bars drawn over panels.
void MainWindow::arrangeDocks() {
  for (auto* list : {&design_docks_, &result_docks_}) {
    for (std::size_t i = 1; i < list->size(); ++i) tabifyDockWidget(list->front(), (*list)[i]);
    list->front()->raise();
  }
  default_state_ = saveState();
}

void MainWindow::applyDefaultLayout(const QSize& screen) {
  if (timeline_only_action_->isChecked()) {
    timeline_only_action_->setChecked(false);
    before_timeline_only_.clear();
  }
  restoreState(default_state_);
  for (auto* list : {&design_docks_, &result_docks_}) {
    for (QDockWidget* dock : *list) dock->show();
    list->front()->raise();
  }
  const DefaultSizes sizes = sizesFor(screen);
  resizeDocks({design_docks_.front()}, {sizes.left}, Qt::Horizontal);
  resizeDocks({result_docks_.front()}, {sizes.bottom}, Qt::Vertical);
}

void MainWindow::setTimelineOnly(bool on) {
  timeline_only_action_->setChecked(on);
  if (on) {
    if (before_timeline_only_.isEmpty()) before_timeline_only_ = saveState();
    for (auto* list : {&design_docks_, &result_docks_}) {
      for (QDockWidget* dock : *list) dock->hide();
    }
  } else if (!before_timeline_only_.isEmpty()) {
    restoreState(before_timeline_only_);
    before_timeline_only_.clear();
  }
}

// ---- which run is on screen ----

void MainWindow::updateSubject() {
  updateOversubscription();
  caption_->setText(loom::ui::runCaption(shown_, document_.plan()));
  caption_->setToolTip(loom::ui::runCaptionToolTip(shown_, document_.plan()));
  for (QDockWidget* dock : result_docks_) {
    // The list of every run, and the plan's what-if: not about the run on screen.
    if (dock->objectName() == QLatin1String("RunsDock") || dock->objectName() == QLatin1String("WhatIfDock")) continue;
    dock->setWindowTitle(dockTitle(dock->property("baseTitle").toString(), shown_));
  }
}

QString MainWindow::runCaption() const { return caption_->text(); }

QString MainWindow::oversubscriptionText() const { return oversubscribed_->isHidden() ? QString() : oversubscribed_->text(); }

// Before and during a run: ranks outnumbering this machine's cores take turns on them, which
// the timings show (descheduled time); say so where the timeline is, in plain words.
// The designer's plan, or a live run, is judged on this machine; a finished run on screen
// by what it recorded when it ran (its host's cores, not the viewer's).
QStringList MainWindow::oversubscriptionLines() {
  loom::host::Oversubscription load;
  if (shown_.id == 0 || controller_.isRunning()) {
    load = loom::host::oversubscription_here(document_.plan());
  } else {
    if (recorded_load_run_ != shown_.id) {
      recorded_load_run_ = shown_.id;
      recorded_load_.clear();
      auto store = loom::store::RunStore::open(dbPath().toStdString());
      if (!store.ok()) return {};
      const auto recorded = loom::host::recorded_oversubscription(*store, shown_.id);
      const auto run = store->load_run(shown_.id);
      if (recorded.ok() && recorded->has_value()) {
        loom::host::Oversubscription stored;
        stored.hosts.push_back(**recorded);
        stored.hosts.back().host = run.ok() && !run->host.empty() ? run->host : "its host";
        for (const std::string& m : stored.messages()) recorded_load_ << QString::fromStdString(m);
      }
    }
    return recorded_load_;
  }
  QStringList lines;
  for (const std::string& m : load.messages()) lines << QString::fromStdString(m);
  return lines;
}

void MainWindow::updateOversubscription() {
  const QStringList lines = oversubscriptionLines();
  oversubscribed_->setText(lines.isEmpty() ? QString()
                                           : tr("Oversubscribed: %1. The breakdown shows that time as descheduled.")
                                                 .arg(lines.join(QStringLiteral("; "))));
  oversubscribed_->setToolTip(term_tooltip(QStringLiteral("oversubscription")));
  QPalette warn = oversubscribed_->palette();
  const bool dark = palette().color(QPalette::Window).lightness() < 128;
  warn.setColor(QPalette::Window, dark ? QColor(0x5a, 0x46, 0x10) : QColor(0xff, 0xf0, 0xc0));
  warn.setColor(QPalette::WindowText, dark ? QColor(0xff, 0xf0, 0xc0) : QColor(0x40, 0x30, 0x00));
  oversubscribed_->setPalette(warn);
  oversubscribed_->setVisible(!lines.isEmpty());
}

void MainWindow::setShownRun(const ShownRun& run) {
  shown_ = run;
  updateSubject();
  updateTitle();
  updateResumeAction();
  updatePredictionActions();
  report_action_->setEnabled(shown_.id != 0);
  path_overlay_->setPlan(shown_.plan);
}

void MainWindow::clearShownRun() { setShownRun({}); }

}  // namespace loom::ui
