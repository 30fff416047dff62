// `loom-screenshots OUT_DIR PLAN.json DB`: opens the real workbench window on a plan, runs
// it for real, and saves PNGs of the window while designing, while running, after the run
// and zoomed into one step, in the light and the dark palette. scripts/screenshots.sh
// runs it under Xvfb for the README.
// `loom-screenshots --runs OUT_DIR DB NAME=RUN_ID...`: opens each stored run in the
// workbench, as the Runs list does, and saves its training charts (NAME-training.png) and,
// for an asynchronous run, its staleness chart (NAME-staleness.png).
// scripts/async_screenshots.sh uses it for the README's asynchronous-training section.
#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QTimer>

#include <cstdio>

#include "loom/ui/charts/training_charts.h"
#include "loom/ui/timeline/timeline_view.h"
#include "loom/ui/workbench/main_window.h"

namespace {

using loom::ui::MainWindow;

void wait_ms(int ms) {
  QElapsedTimer clock;
  clock.start();
  while (clock.elapsed() < ms) QApplication::processEvents(QEventLoop::AllEvents, 20);
}

bool save(MainWindow& window, const QDir& out, const QString& name) {
  wait_ms(400);  // let throttled views repaint
  const QString path = out.filePath(name);
  const bool ok = window.grab().save(path);
  std::fprintf(stderr, "%s %s\n", ok ? "saved" : "FAILED to save", qPrintable(path));
  return ok;
}

void raise_dock(MainWindow& window, const char* name) {
  if (auto* dock = window.findChild<QDockWidget*>(name)) dock->raise();
}

bool save_widget(QWidget* widget, const QDir& out, const QString& name) {
  wait_ms(400);
  const QString path = out.filePath(name);
  const bool ok = widget->grab().save(path);
  std::fprintf(stderr, "%s %s\n", ok ? "saved" : "FAILED to save", qPrintable(path));
  return ok;
}

// The bottom dock area is too short to read the charts in a 1600x1000 window: their
// docks are floated (as a user would tear them off) at a readable size.
int save_stored_runs(MainWindow& window, const QDir& out, const QStringList& named_runs) {
  for (const char* name : {"TrainingDock", "StalenessDock"}) {
    if (auto* dock = window.findChild<QDockWidget*>(name)) {
      dock->setFloating(true);
      dock->resize(1300, 620);
      dock->show();
    }
  }
  bool loaded = false;
  QObject::connect(&window, &MainWindow::runLoaded, [&] { loaded = true; });
  bool ok = true;
  for (const QString& named : named_runs) {
    const QString name = named.section('=', 0, 0);
    const qint64 run_id = named.section('=', 1).toLongLong();
    loaded = false;
    window.openRun(run_id);
    QElapsedTimer clock;
    clock.start();
    while (!loaded && clock.elapsed() < 60000) wait_ms(100);
    if (!loaded) {
      std::fprintf(stderr, "run %lld did not load within a minute\n", run_id);
      return 1;
    }
    ok = save_widget(window.views()->training(), out, name + "-training.png") && ok;
    if (window.views()->staleness()->hasData()) {
      ok = save_widget(window.views()->staleness(), out, name + "-staleness.png") && ok;
    }
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("LoomScreenshots");  // keeps the user's settings out of it
  const bool stored_runs = argc > 1 && QString(argv[1]) == "--runs";
  if (argc < 4 || (stored_runs && argc < 5)) {
    std::fprintf(stderr, "usage: loom-screenshots OUT_DIR PLAN.json RUNS.db\n"
                         "       loom-screenshots --runs OUT_DIR RUNS.db NAME=RUN_ID...\n");
    return 2;
  }
  const int first = stored_runs ? 2 : 1;
  const QDir out(QString::fromLocal8Bit(argv[first]));
  QDir().mkpath(out.path());
  MainWindow window;
  window.setSavePrompt([] { return MainWindow::SaveChoice::Discard; });
  window.setDbPath(QString::fromLocal8Bit(argv[3]));  // the store is the third argument in both forms
  window.resize(1600, 1000);
  window.show();
  if (stored_runs) {
    QStringList named_runs;
    for (int i = 4; i < argc; ++i) named_runs << QString::fromLocal8Bit(argv[i]);
    return save_stored_runs(window, out, named_runs);
  }
  if (!window.openPlanFile(QString::fromLocal8Bit(argv[2]))) return 2;
  bool ok = save(window, out, "workbench-design.png");

  bool finished = false, loaded = false;
  QObject::connect(&window, &MainWindow::runFinished, [&] { finished = true; });
  QObject::connect(&window, &MainWindow::runLoaded, [&] { loaded = true; });
  window.runPlan();
  wait_ms(6000);
  ok = save(window, out, "workbench-running.png") && ok;
  QElapsedTimer clock;
  clock.start();
  while (!(finished && loaded) && clock.elapsed() < 300000) wait_ms(100);
  if (!finished || !loaded) {
    std::fprintf(stderr, "the run did not finish within 5 minutes\n");
    return 1;
  }
  raise_dock(window, "TrainingDock");
  ok = save(window, out, "workbench-finished.png") && ok;

  auto* timeline = window.views()->timeline();
  const double middle = timeline->data().end_ns() / 2.0;
  timeline->setViewport({middle, middle + 40e6, timeline->viewport().width_px});
  raise_dock(window, "BreakdownDock");
  ok = save(window, out, "workbench-zoomed.png") && ok;
  window.setDarkPalette(true);
  ok = save(window, out, "workbench-dark.png") && ok;
  return ok ? 0 : 1;
}
