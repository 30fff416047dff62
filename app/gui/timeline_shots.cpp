// `loom-timeline-shots OUT_DIR DB RUN_ID [WxH...]`: opens a stored run in the real
// workbench window, as the Runs list does, and saves PNGs of the window and of the
// timeline alone, zoomed out (fit all), zoomed to the middle step and to one of its
// micro-batches, the middle step with View > Critical path on, the middle step replayed
// to its half, and the breakdown chart (the Serving chart for a serving run), in the light and the dark palette, at each
// window size (default 1280x720 and 1920x1080), with the side panels open and closed
// ("-wide"). For looking at the timeline as a user sees it; run it under xvfb-run with a
// screen at least as large as the largest size.
#include <QAction>
#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>

#include <cstdio>

#include "shot_wait.h"
#include "loom/ui/charts/training_charts.h"
#include "loom/ui/timeline/replay_bar.h"
#include "loom/ui/timeline/step_navigator.h"
#include "loom/ui/timeline/timeline_view.h"
#include "loom/ui/workbench/main_window.h"
#include "loom/ui/workbench/run_views.h"

namespace {

using loom::ui::MainWindow;

using loom::shots::wait_ms;
bool save(QWidget* widget, const QDir& out, const QString& name) {
  wait_ms(500);  // let throttled views repaint
  const QString path = out.filePath(name);
  const bool ok = widget->grab().save(path);
  std::fprintf(stderr, "%s %s\n", ok ? "saved" : "FAILED to save", qPrintable(path));
  return ok;
}

// Window and timeline at one zoom, named SIZE-PALETTE-ZOOM.
bool save_both(MainWindow& window, const QDir& out, const QString& stem) {
  bool ok = save(&window, out, stem + "-window.png");
  return save(window.views()->timeline(), out, stem + "-timeline.png") && ok;
}

// Replay with the cursor halfway through the middle step, that step in view.
bool save_replay(MainWindow& window, const QDir& out, const QString& stem) {
  auto* timeline = window.views()->timeline();
  auto* nav = timeline->stepNavigator();
  const auto range = timeline->data().step_range(nav->stepCount() / 2);
  if (!range) return true;
  nav->zoomToStep(nav->stepCount() / 2);
  window.views()->replay()->setCursor(0.5 * double(range->begin_ns + range->end_ns));
  const bool ok = save_both(window, out, stem + "-replay");
  window.views()->replay()->setReplaying(false);
  return ok;
}

// side_panels false: the Model, Devices, Strategy and Placement docks closed, as a user
// does from the View menu to give the timeline the window's width.
bool shoot_size(MainWindow& window, const QDir& out, QSize size, bool side_panels) {
  for (const char* name : {"ModelDock", "DevicesDock", "StrategyDock", "PlacementDock"})
    if (auto* dock = window.findChild<QDockWidget*>(name)) dock->setVisible(side_panels);
  window.resize(size);
  wait_ms(300);
  auto* timeline = window.views()->timeline();
  // The window may not shrink to the size asked for (its docks' minimum sizes): say so.
  std::fprintf(stderr, "window %dx%d (asked %dx%d), timeline %dx%d, its minimum %dx%d\n", window.width(),
               window.height(), size.width(), size.height(), timeline->width(), timeline->height(),
               timeline->minimumSizeHint().width(), timeline->minimumSizeHint().height());
  auto* nav = timeline->stepNavigator();
  const QString tag = QStringLiteral("%1x%2%3").arg(size.width()).arg(size.height()).arg(side_panels ? "" : "-wide");
  bool ok = true;
  for (const bool dark : {false, true}) {
    window.setDarkPalette(dark);
    const QString stem = tag + (dark ? "-dark" : "-light");
    timeline->fitAll();
    ok = save_both(window, out, stem + "-all") && ok;
    ok = save(window.views()->breakdown(), out, stem + "-breakdown.png") && ok;
    nav->zoomToStep(nav->stepCount() / 2);
    ok = save_both(window, out, stem + "-step") && ok;
    std::fprintf(stderr, "  navigator: %s\n", qPrintable(nav->text()));
    window.criticalPathAction()->trigger();  // View > Critical path, on the same step
    ok = save_both(window, out, stem + "-path") && ok;
    window.criticalPathAction()->trigger();
    if (nav->zoomToMicrobatch(nav->currentStep(), 1)) ok = save_both(window, out, stem + "-microbatch") && ok;
    ok = save_replay(window, out, stem) && ok;
  }
  window.setDarkPalette(false);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("LoomScreenshots");  // keeps the user's settings out of it
  if (argc < 4) {
    std::fprintf(stderr, "usage: loom-timeline-shots OUT_DIR RUNS.db RUN_ID [WxH...]\n");
    return 2;
  }
  const QDir out(QString::fromLocal8Bit(argv[1]));
  QDir().mkpath(out.path());
  std::vector<QSize> sizes;
  for (int i = 4; i < argc; ++i) {
    const QStringList wh = QString::fromLocal8Bit(argv[i]).split('x');
    if (wh.size() == 2) sizes.emplace_back(wh[0].toInt(), wh[1].toInt());
  }
  if (sizes.empty()) sizes = {QSize(1280, 720), QSize(1920, 1080)};
  MainWindow window;
  window.setSavePrompt([] { return MainWindow::SaveChoice::Discard; });
  window.setRunPlanPrompt([](qint64, const QString&) { return false; });  // no modal question
  window.setDbPath(QString::fromLocal8Bit(argv[2]));
  window.resize(sizes.front());
  window.show();
  if (auto* dock = window.findChild<QDockWidget*>("BreakdownDock")) dock->raise();
  // A serving run's figures are in the Serving dock.
  QObject::connect(&window, &MainWindow::runLoaded, [&window] {
    if (!window.views()->serving()->hasData()) return;
    if (auto* dock = window.findChild<QDockWidget*>("ServingDock")) dock->raise();
  });
  bool loaded = false;
  QObject::connect(&window, &MainWindow::runLoaded, [&] { loaded = true; });
  window.openRun(QString::fromLocal8Bit(argv[3]).toLongLong());
  QElapsedTimer clock;
  clock.start();
  while (!loaded && clock.elapsed() < 60000) wait_ms(100);
  if (!loaded) {
    std::fprintf(stderr, "run %s did not load within a minute\n", argv[3]);
    return 1;
  }
  bool ok = true;
  for (const bool side_panels : {true, false})
    for (const QSize& size : sizes) ok = shoot_size(window, out, size, side_panels) && ok;
  return ok ? 0 : 1;
}
