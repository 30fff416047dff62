// The main window offscreen, without running jobs (test_workbench does those):
//  - at 1280x720 and 1920x1080, light and dark palette, no visible widget overlaps a
//    visible sibling or sticks out of its parent, the window is not larger than asked
//    for, and the timeline is the biggest area and takes a stated share of the window;
//  - "timeline only" collapses every panel and brings them back;
//  - the toolbar's buttons stay put when the undo text changes length;
//  - a stored run opened names itself in the window title, the caption and the result
//    docks; loading another plan empties the views instead of leaving the old run;
//  - a stored run whose plan differs asks before replacing the designer's plan;
//  - when a live run ends and is read again with its final clocks, the launch log shows
//    each line once, and the rank's JSON summary as text;
//  - every example plan has a title and a description in the Examples menu;
//  - Help has the glossary and the tour, with every term the issue lists.
// The store is written directly (no mpirun), so this runs anywhere with the gui label.
#include <QAction>
#include <QDialog>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QTimer>
#include <QMenu>
#include <QMenuBar>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTabBar>
#include <QTextBrowser>
#include <QToolBar>
#include <QToolButton>
#include <QUndoStack>
#include <QSettings>
#include <QScreen>
#include <QtTest>

#include "loom/host/oversubscription.h"

#include <functional>

#include "loom/core/plan.h"
#include "loom/store/run_store.h"
#include "loom/test/events.h"
#include "loom/test/expect.h"
#include "loom/test/plans.h"
#include "loom/ui/glossary.h"
#include "loom/ui/timeline/timeline_view.h"
#include "loom/ui/workbench/main_window.h"
#include "loom/ui/workbench/run_browser.h"

using loom::ui::MainWindow;
using loom::testing::data_parallel_plan;
using loom::testing::must;
using loom::testing::must_ok;
using loom::testing::span_ns;

namespace {

// Widgets that are meant to sit on top of their siblings or outside their parent.
bool intentionallyStacked(const QWidget* w) {
  const QString cls = QString::fromLatin1(w->metaObject()->className());
  // QMainWindow's separators and its dock area's tab bars are drawn between docks;
  // QAbstractScrollArea's corner and scroll-bar containers, and a QSplitterHandle, sit
  // at the edges they manage.
  return cls == QLatin1String("QMainWindowLayoutSeparatorHelper") || cls == QLatin1String("QSplitterHandle") ||
         cls == QLatin1String("QRubberBand") || w->objectName().startsWith(QLatin1String("qt_scrollarea_")) ||
         cls == QLatin1String("QToolBarExtension") || w->objectName() == QLatin1String("qt_toolbar_ext_button");
}

bool isScrolledContent(const QWidget* parent) {
  // A scroll area's content is larger than its viewport by design; what is outside is
  // scrolled away, not drawn over anything.
  return parent->objectName() == QLatin1String("qt_scrollarea_viewport") ||
         qobject_cast<const QAbstractScrollArea*>(parent->parentWidget()) != nullptr;
}

QString describe(const QWidget* w) {
  QString extra;
  if (auto* bar = qobject_cast<const QTabBar*>(w)) {
    for (int i = 0; i < bar->count(); ++i) extra += QLatin1Char(' ') + bar->tabText(i);
  }
  return QStringLiteral("%1 '%2' %3,%4 %5x%6")
             .arg(QString::fromLatin1(w->metaObject()->className()), w->objectName())
             .arg(w->x()).arg(w->y()).arg(w->width()).arg(w->height()) + extra;
}

QString path(const QWidget* w) {
  QStringList parts;
  for (const QWidget* p = w; p != nullptr; p = p->parentWidget()) {
    parts.prepend(p->objectName().isEmpty() ? QString::fromLatin1(p->metaObject()->className()) : p->objectName());
  }
  return parts.join(QLatin1Char('/'));
}

// Every visible child of every visible widget under `root`: overlaps between siblings
// and children sticking out of their parent (which the parent clips: content cut off).
void checkGeometry(const QWidget* root, QStringList& problems) {
  QList<const QWidget*> kids;
  for (const QObject* o : root->children()) {
    const auto* w = qobject_cast<const QWidget*>(o);
    if (w == nullptr || w->isWindow() || !w->isVisible() || w->width() <= 0 || w->height() <= 0) continue;
    // QMainWindow parks the docks behind other tabs outside the window: not drawn.
    if (!w->geometry().intersects(root->rect())) continue;
    kids << w;
  }
  const QRect inside = root->rect();
  for (int i = 0; i < kids.size(); ++i) {
    const QWidget* a = kids[i];
    if (!intentionallyStacked(a) && !isScrolledContent(root) && !inside.contains(a->geometry())) {
      problems << QStringLiteral("%1 sticks out of %2 (%3x%4)").arg(path(a), describe(root)).arg(inside.width()).arg(inside.height());
    }
    for (int j = i + 1; j < kids.size(); ++j) {
      const QWidget* b = kids[j];
      if (intentionallyStacked(a) || intentionallyStacked(b)) continue;
      if (a->geometry().intersects(b->geometry())) {
        problems << QStringLiteral("%1 overlaps %2 in %3").arg(describe(a), describe(b), path(root));
      }
    }
    checkGeometry(a, problems);
  }
}

QString stateFile(const QTemporaryDir& dir, const char* name) { return dir.filePath(QString::fromLatin1(name)); }

// A finished run written straight into the store: two ranks, a few spans each.
qint64 store_run(const QString& db, const loom::Plan& plan, loom::trace::RunStatus status = loom::trace::RunStatus::Completed) {
  auto store = must(loom::store::RunStore::open(db.toStdString()));
  const std::int64_t id = *store.create_run(loom::store::new_run_record(plan, "test"));
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<loom::trace::Event> events;
    for (int step = 0; step < 3; ++step)
      events.push_back(span_ns(loom::trace::EventKind::Forward, loom::trace::Stream::Compute, 1'000'000LL * step,
                               1'000'000LL * step + 500'000, step));
    must_ok(store.append_events(id, rank, events.data(), events.size()));
  }
  if (status != loom::trace::RunStatus::Running) must_ok(store.finish_run(id, status, 1.0, 6, ""));
  return id;
}

}  // namespace

class TestMainWindow : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName("LoomTestMainWindow");
  }

  void init() {
    window_ = std::make_unique<MainWindow>();
    window_->setSavePrompt([] { return MainWindow::SaveChoice::Discard; });
    window_->setRunPlanPrompt([](qint64, const QString&) { return false; });
    window_->setDbPath(stateFile(dir_, "runs.db") + QString::number(++db_counter_));
  }
  void cleanup() {
    window_->setDarkPalette(false);
    window_.reset();
  }

  // First start on a screen smaller than the default 1600x1000 (the offscreen platform's
  // is 800x600): the window opens maximized, so its frame fits the screen with it (at
  // 1280x720 a window the size of the screen's area put the status bar below the screen).
  void firstStartOnASmallScreenOpensMaximized() {
    QSettings().clear();
    const QSize available = QGuiApplication::primaryScreen()->availableGeometry().size();
    const MainWindow fresh;
    QCOMPARE(fresh.opensMaximized(), available.width() < 1600 || available.height() < 1000);
  }

  void fitsTheScreenWithoutOverlaps_data() {
    QTest::addColumn<QSize>("screen");
    QTest::addColumn<bool>("dark");
    QTest::addColumn<double>("timelineShare");  // of the window's area, at least
    QTest::newRow("1280x720 light") << QSize(1280, 720) << false << 0.35;
    QTest::newRow("1280x720 dark") << QSize(1280, 720) << true << 0.35;
    QTest::newRow("1920x1080 light") << QSize(1920, 1080) << false << 0.40;
    QTest::newRow("1920x1080 dark") << QSize(1920, 1080) << true << 0.40;
  }

  // Each dock raised in turn, so every tab's content is checked, not just the front one.
  void fitsTheScreenWithoutOverlaps() {
    QFETCH(QSize, screen);
    QFETCH(bool, dark);
    QFETCH(double, timelineShare);
    window_->setDarkPalette(dark);
    window_->openExample(":/plans/hybrid_mlp.json");  // 4 ranks: the widest designer tables
    window_->resize(screen);
    window_->show();
    window_->applyDefaultLayout(screen);
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    QTest::qWait(qEnvironmentVariableIntValue("LOOM_TEST_WAIT_MS") + 50);
    QVERIFY2(window_->width() <= screen.width() && window_->height() <= screen.height(),
             qPrintable(QStringLiteral("window %1x%2 for a %3x%4 screen (minimum %5x%6)")
                            .arg(window_->width()).arg(window_->height()).arg(screen.width()).arg(screen.height())
                            .arg(window_->minimumSizeHint().width()).arg(window_->minimumSizeHint().height())));
    // The default layout's share (raising the What-if dock grows the result area).
    const QWidget* timeline = window_->centralWidget();
    const double share = double(timeline->width() * timeline->height()) / double(screen.width() * screen.height());
    qInfo("timeline %dx%d: %.2f of the window", timeline->width(), timeline->height(), share);
    QVERIFY2(share >= timelineShare, qPrintable(QStringLiteral("timeline %1x%2 is %3 of the window")
                                                    .arg(timeline->width()).arg(timeline->height()).arg(share)));
    QStringList problems;
    for (QDockWidget* dock : window_->findChildren<QDockWidget*>()) {
      dock->raise();
      QTest::qWait(20);
      checkGeometry(window_.get(), problems);
    }
    problems.removeDuplicates();
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1Char('\n'))));
    for (QDockWidget* dock : window_->findChildren<QDockWidget*>()) {
      const int area = dock->width() * dock->height();
      QVERIFY2(area < timeline->width() * timeline->height(), qPrintable(dock->objectName() + " is bigger than the timeline"));
    }
  }

  // At 1280x720 the result area (230 px) squeezed the What-if chart under its legend:
  // raised, the What-if dock grows (320 px with its tab bar); another dock raised keeps
  // that height, and the dock raised again does not grow twice.
  void whatIfDockGrowsToShowItsChart() {
    window_->resize(1280, 720);
    window_->show();
    window_->applyDefaultLayout({1280, 720});
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    auto* what_if = window_->findChild<QDockWidget*>("WhatIfDock");
    auto* training = window_->findChild<QDockWidget*>("TrainingDock");
    QVERIFY(training->height() < 300);
    what_if->raise();
    QTRY_VERIFY2(what_if->height() >= 285, qPrintable(QString::number(what_if->height())));
    const int grown = what_if->height();
    QVERIFY2(grown <= 320, qPrintable(QString::number(grown)));
    training->raise();
    QTest::qWait(20);
    what_if->raise();
    QTest::qWait(50);
    QCOMPARE(what_if->height(), grown);
    QVERIFY(window_->centralWidget()->height() > 200);
  }

  void timelineOnlyCollapsesThePanels() {
    window_->resize(1280, 720);
    window_->show();
    window_->applyDefaultLayout({1280, 720});
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    const int before = window_->centralWidget()->height();
    window_->timelineOnlyAction()->trigger();
    QTest::qWait(20);
    for (QDockWidget* dock : window_->findChildren<QDockWidget*>()) QVERIFY2(!dock->isVisible(), qPrintable(dock->objectName()));
    QVERIFY(window_->centralWidget()->height() > before);
    window_->timelineOnlyAction()->trigger();
    QTest::qWait(20);
    QVERIFY(window_->findChild<QDockWidget*>("ModelDock")->isVisible());
    QVERIFY(window_->findChild<QDockWidget*>("TrainingDock")->isVisible());
    QCOMPARE(window_->centralWidget()->height(), before);
  }

  void toolbarButtonsDoNotMoveWithTheUndoText() {
    window_->resize(1280, 720);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    auto positions = [this] {
      QList<int> xs;
      for (QAction* a : window_->mainToolBar()->actions()) {
        if (QWidget* w = window_->mainToolBar()->widgetForAction(a)) xs << w->x();
      }
      return xs;
    };
    const QList<int> before = positions();
    window_->document()->edit("Change the name of this plan to something much longer than a toolbar button",
                              [](loom::Plan& p) { p.name = "renamed"; });
    QVERIFY(window_->document()->undoStack()->canUndo());
    QTest::qWait(20);
    QCOMPARE(positions(), before);
  }

  void storedRunNamesItselfAndIsClearedByAnotherPlan() {
    const qint64 id = store_run(window_->dbPath(), window_->document()->plan());
    window_->show();
    QSignalSpy loaded(window_.get(), &MainWindow::runLoaded);
    window_->openRun(id);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 20000);
    const QString run = QStringLiteral("run %1").arg(id);
    QVERIFY2(window_->windowTitle().contains(run), qPrintable(window_->windowTitle()));
    QVERIFY2(window_->runCaption().startsWith(QStringLiteral("Run %1").arg(id)), qPrintable(window_->runCaption()));
    QVERIFY2(window_->runCaption().contains("completed"), qPrintable(window_->runCaption()));
    QVERIFY2(window_->findChild<QDockWidget*>("TrainingDock")->windowTitle().contains(run),
             qPrintable(window_->findChild<QDockWidget*>("TrainingDock")->windowTitle()));
    QCOMPARE(window_->views()->timeline()->data().event_count(), std::size_t(6));

    QVERIFY(window_->openExample(":/plans/gpipe_mlp.json"));
    QVERIFY2(!window_->windowTitle().contains(run), qPrintable(window_->windowTitle()));
    QVERIFY2(window_->windowTitle().contains("gpipe-mlp"), qPrintable(window_->windowTitle()));
    QVERIFY2(window_->runCaption().startsWith("No run on screen"), qPrintable(window_->runCaption()));
    QCOMPARE(window_->views()->timeline()->data().event_count(), std::size_t(0));
    QCOMPARE(window_->currentRunId(), qint64(0));
  }

  // A finished run on screen belongs to its store: opening another store, or deleting the
  // run, takes its caption and views away (both used to stay).
  void storedRunLeavesWithItsStoreOrWhenDeleted() {
    const QString db = window_->dbPath();
    const loom::Plan plan = window_->document()->plan();
    QSignalSpy loaded(window_.get(), &MainWindow::runLoaded);
    const qint64 deleted = store_run(db, plan);
    window_->openRun(deleted);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 20000);
    QVERIFY(window_->runCaption().startsWith(QStringLiteral("Run %1").arg(deleted)));
    window_->runBrowser()->deleteRuns({deleted});
    QTRY_VERIFY2_WITH_TIMEOUT(window_->runCaption().startsWith("No run on screen"), qPrintable(window_->runCaption()), 20000);
    QCOMPARE(window_->currentRunId(), qint64(0));
    QCOMPARE(window_->views()->timeline()->data().event_count(), std::size_t(0));

    const qint64 kept = store_run(db, plan);
    window_->openRun(kept);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 2, 20000);
    QVERIFY(window_->runCaption().startsWith(QStringLiteral("Run %1").arg(kept)));
    window_->setDbPath(QFileInfo(db).dir().filePath("another.db"));
    QVERIFY2(window_->runCaption().startsWith("No run on screen"), qPrintable(window_->runCaption()));
    QCOMPARE(window_->views()->timeline()->data().event_count(), std::size_t(0));
    window_->setDbPath(db);
  }

  // "Open store…" opens: its dialog's button says Open (it said Save).
  void openStoreDialogSaysOpen() {
    window_->show();
    QString button;
    int mode = -1;
    QTimer::singleShot(200, [&] {
      for (QWidget* w : QApplication::topLevelWidgets()) {
        if (auto* dialog = qobject_cast<QFileDialog*>(w); dialog && dialog->objectName() == "OpenStoreDialog") {
          button = dialog->labelText(QFileDialog::Accept);
          mode = dialog->acceptMode();
          dialog->reject();
        }
      }
    });
    window_->runBrowser()->openStoreAction()->trigger();
    QCOMPARE(mode, int(QFileDialog::AcceptOpen));
    QCOMPARE(button, QStringLiteral("Open"));
  }

  void storedRunOfAnotherPlanAsksBeforeLoadingIt() {
    const qint64 id = store_run(window_->dbPath(), data_parallel_plan("other-plan", 2));
    QStringList asked;
    bool answer = false;
    window_->setRunPlanPrompt([&](qint64 run, const QString& name) {
      asked << QStringLiteral("%1 %2").arg(run).arg(name);
      return answer;
    });
    QSignalSpy loaded(window_.get(), &MainWindow::runLoaded);
    window_->openRun(id);
    QTRY_COMPARE_WITH_TIMEOUT(asked.size(), 1, 20000);
    QCOMPARE(asked.front(), QStringLiteral("%1 other-plan").arg(id));
    // Kept: the caption says the views are not the designer's plan.
    QVERIFY(window_->document()->plan().name != "other-plan");
    QTRY_VERIFY2(window_->runCaption().contains("not the plan in the designer"), qPrintable(window_->runCaption()));

    answer = true;
    window_->openRun(id);
    QTRY_COMPARE_WITH_TIMEOUT(asked.size(), 2, 20000);
    QTRY_COMPARE(window_->document()->plan().name, std::string("other-plan"));
    QCOMPARE(window_->document()->plan().parallel.data_parallel, 2);
    QCOMPARE(window_->shownRun().id, id);  // loading its plan keeps the run on screen
    QVERIFY2(!window_->runCaption().contains("not the plan"), qPrintable(window_->runCaption()));
    QVERIFY(window_->windowTitle().contains(QStringLiteral("run %1").arg(id)));
  }

  // A run read while live and then again with its final clock records (what happens
  // after every multi-rank run): the log must not come twice.
  void logShowsEachLineOnceAfterTheFinalClocks() {
    const QString db = window_->dbPath();
    const qint64 id = store_run(db, window_->document()->plan(), loom::trace::RunStatus::Running);
    auto store = loom::store::RunStore::open(db.toStdString());
    QVERIFY(store->upsert_rank(id, loom::trace::RankRecord{0, "host", "cpu", 0, 0, 0, 0}).ok());
    QVERIFY(store->append_log(id, "launch: mpirun -n 2 loom-rank\nrank 0 connected\n").ok());
    QSignalSpy loaded(window_.get(), &MainWindow::runLoaded);
    window_->openRun(id);
    QTRY_VERIFY_WITH_TIMEOUT(window_->views()->eventsShown() > 0, 20000);
    // The end of the run: final clock estimate, the rank's summary line, the status.
    QVERIFY(store->upsert_rank(id, loom::trace::RankRecord{0, "host", "cpu", 1500, 10, 0, 0, 2500, 1, 2}).ok());
    QVERIFY(store->append_log(id, "{\"final_loss\":0.4224,\"samples_per_s\":40545.7,\"steps\":300,\"stopped\":false,"
                                  "\"test_accuracy\":0.8405,\"wall_s\":0.947,\"world_size\":4}\n").ok());
    QVERIFY(store->finish_run(id, loom::trace::RunStatus::Completed, 1.0, 6, "").ok());
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 20000);
    const QString log = window_->launchLog();
    QCOMPARE(log.count("launch: mpirun -n 2"), 1);
    QCOMPARE(log.count("rank 0 connected"), 1);
    QVERIFY2(!log.contains("{\""), qPrintable(log));
    QVERIFY2(log.contains("300 steps") && log.contains("test accuracy 84.05%"), qPrintable(log));
    QVERIFY2(!log.contains("samples/s"), qPrintable(log));  // the status bar's figure only
  }

  void everyExampleIsDescribedInTheMenu() {
    QDir plans(LOOM_SOURCE_DIR "/resources/plans");
    const QStringList files = plans.entryList({"*.json"}, QDir::Files);
    QVERIFY(!files.isEmpty());
    QVERIFY2(window_->examples().undescribed(files).isEmpty(),
             qPrintable("no description in resources/examples.json: " + window_->examples().undescribed(files).join(", ")));
    const QList<QAction*> actions = window_->examplesMenu()->actions();
    QCOMPARE(actions.size(), files.size());
    for (QAction* a : actions) {
      QVERIFY2(!a->text().endsWith(".json") && a->text() != QFileInfo(a->data().toString()).completeBaseName(),
               qPrintable(a->text()));
      QVERIFY2(a->toolTip().contains("Look at:"), qPrintable(a->toolTip()));
    }
    QVERIFY(window_->examplesMenu()->toolTipsVisible());
    // Opening one says what to look at until it is edited.
    actions.front()->trigger();
    QVERIFY2(window_->statusText().contains("look at:"), qPrintable(window_->statusText()));
  }

  // Ranks outnumbering this machine's cores are said over the timeline, before any run; a
  // plan that fits says nothing. (The expectation follows this machine's cores, so the test
  // holds on a bigger CI machine too.)
  void oversubscriptionIsSaidOverTheTimeline() {
    QVERIFY(window_->openExample(":/plans/dp4_mlp_fashion.json"));
    const bool expected = loom::host::cores_available() < 4;
    const QString text = window_->oversubscriptionText();
    QCOMPARE(!text.isEmpty(), expected);
    if (expected) {
      QVERIFY2(text.contains("4 ranks share"), qPrintable(text));
      QVERIFY2(text.contains("descheduled"), qPrintable(text));
    }
    QVERIFY(window_->openExample(":/plans/mlp_fashion.json"));
    QVERIFY(window_->oversubscriptionText().isEmpty());
  }

  // A stored run is judged by what it recorded when it ran, not by this machine: one that
  // recorded 8 ranks on 4 cores says so under a 1-process designer plan; one that recorded
  // nothing says nothing under a designer plan this machine cannot hold without sharing.
  void storedRunIsJudgedByWhatItRecorded() {
    const QString db = window_->dbPath();
    QVERIFY(window_->openExample(":/plans/mlp_fashion.json"));
    const qint64 shared = store_run(db, window_->document()->plan());
    {
      auto store = loom::store::RunStore::open(db.toStdString());
      QVERIFY(store->append_metrics(shared, {{0, -1, 0, loom::host::kOversubscribedRanksMetric, 8},
                                             {0, -1, 0, loom::host::kOversubscribedCoresMetric, 4}}).ok());
    }
    QSignalSpy loaded(window_.get(), &MainWindow::runLoaded);
    window_->openRun(shared);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 20000);
    QVERIFY2(window_->oversubscriptionText().contains("8 ranks share 4 cores"), qPrintable(window_->oversubscriptionText()));

    loom::Plan wide = window_->document()->plan();
    wide.parallel.data_parallel = 64;
    wide.parallel.devices.assign(64, loom::DeviceSpec{});
    window_->document()->reset(wide);  // 64 ranks: shared cores on any machine this runs on
    const qint64 alone = store_run(db, wide);
    window_->openRun(alone);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 2, 20000);
    QVERIFY2(window_->oversubscriptionText().isEmpty(), qPrintable(window_->oversubscriptionText()));
  }

  void helpHasTheGlossaryAndTheTour() {
    const QStringList terms = {"Data parallel", "All-reduce", "Bucket", "Pipeline stage", "Micro-batch", "Bubble",
                               "GPipe", "1F1B", "Parameter server", "Staleness", "SSP", "Local SGD", "Straggler",
                               "Exposed communication", "Hidden communication", "Setup", "Warm-up step",
                               "Steady step", "Oversubscription", "Descheduled time", "busbw", "algbw"};
    QMenu* help = nullptr;
    for (QAction* a : window_->menuBar()->actions()) {
      if (a->text() == "&Help") help = a->menu();
    }
    QVERIFY(help);
    QAction *glossary = nullptr, *tour = nullptr;
    for (QAction* a : help->actions()) {
      if (a->text() == "&Glossary") glossary = a;
      if (a->text() == "&First five minutes") tour = a;
    }
    QVERIFY(glossary && tour);
    glossary->trigger();
    auto* dialog = window_->findChild<QDialog*>("GlossaryDialog");
    QVERIFY(dialog);
    const QString text = dialog->findChild<QTextBrowser*>()->toPlainText();
    for (const QString& term : terms) QVERIFY2(text.contains(term), qPrintable(term));
    QVERIFY(text.contains("(p-1)/(m+p-1)"));
    tour->trigger();
    auto* tourDialog = window_->findChild<QDialog*>("TourDialog");
    QVERIFY(tourDialog);
    const QString tourText = tourDialog->findChild<QTextBrowser*>()->toPlainText();
    QVERIFY(tourText.contains("Press Run"));
    for (const auto& e : window_->examples().examples()) QVERIFY2(tourText.contains(e.title), qPrintable(e.title));
  }

  // Also after a run, whose outcome the status bar showed until then.
  void planErrorsReachTheStatusBarInTheWindowsWords() {
    QSignalSpy loaded(window_.get(), &MainWindow::runLoaded);
    window_->openRun(store_run(window_->dbPath(), window_->document()->plan()));
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 20000);
    QVERIFY2(window_->statusText().contains("(stored)"), qPrintable(window_->statusText()));
    window_->document()->edit("stages", [](loom::Plan& p) {
      p.parallel.stages = 2;
      p.parallel.devices.assign(2, loom::DeviceSpec{});
    });
    QVERIFY(!window_->runAction()->isEnabled());
    const QString status = window_->statusText();
    QVERIFY2(status.contains("Placement") && !status.contains("\"stage\"") && !status.contains("/parallel"),
             qPrintable(status));
    QVERIFY2(window_->runAction()->toolTip().contains("stage 1 has no layers"), qPrintable(window_->runAction()->toolTip()));
  }

 private:
  QTemporaryDir dir_;
  int db_counter_ = 0;
  std::unique_ptr<MainWindow> window_;
};

QTEST_MAIN(TestMainWindow)
#include "test_main_window.moc"
