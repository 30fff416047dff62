// `loom-screenshots OUT_DIR PLAN.json DB`: opens the real workbench window on a plan, runs
// it for real, and saves PNGs of the window while designing, while running, after the run
// and zoomed into one step, in the light and the dark palette. scripts/screenshots.sh
// runs it under Xvfb for the README.
#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QTimer>

#include <cstdio>

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

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("LoomScreenshots");  // keeps the user's settings out of it
  if (argc < 4) {
    std::fprintf(stderr, "usage: loom-screenshots OUT_DIR PLAN.json RUNS.db\n");
    return 2;
  }
  const QDir out(QString::fromLocal8Bit(argv[1]));
  QDir().mkpath(out.path());
  MainWindow window;
  window.setSavePrompt([] { return MainWindow::SaveChoice::Discard; });
  window.setDbPath(QString::fromLocal8Bit(argv[3]));
  window.resize(1600, 1000);
  window.show();
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
