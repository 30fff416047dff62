// `loom-predict-shots OUT_DIR DB PLAN [CLUSTER]`: the What-if dock as a user sees it, in the
// real workbench on PLAN with DB's runs as the calibration, at 1280x720 and 1920x1080:
// whatif-WxH-scaling.png (the knobs, the figures and the scaling chart on hosts like this
// one), whatif-WxH-layouts.png (after Search layouts), and with CLUSTER loaded
// whatif-WxH-cluster.png and whatif-WxH-dark-cluster-layouts.png. Run it under xvfb-run
// (scripts/predict_screenshots.sh).
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QSpinBox>

#include <cstdio>

#include "shot_wait.h"
#include "loom/ui/workbench/main_window.h"
#include "loom/ui/workbench/what_if_panel.h"

namespace {

using loom::shots::wait_ms;
using loom::ui::MainWindow;

bool save(MainWindow& window, const QDir& out, const QString& name) {
  // The calibration, the scaling curve and the search arrive from other threads.
  if (!loom::shots::wait_for([&] { return !window.whatIfPanel()->working(); }, 60000))
    std::fprintf(stderr, "the What-if dock was still working after 60 s\n");
  wait_ms(600);
  const QString path = out.filePath(name);
  const bool ok = window.grab().save(path);
  std::fprintf(stderr, "%s %s (%dx%d)\n", ok ? "saved" : "FAILED to save", qPrintable(path), window.width(), window.height());
  return ok;
}

bool shoot(MainWindow& window, const QDir& out, const QSize& size, const QString& cluster) {
  const QString tag = QStringLiteral("whatif-%1x%2").arg(size.width()).arg(size.height());
  window.setDarkPalette(false);
  window.resize(size);
  wait_ms(100);
  window.applyDefaultLayout(size);
  window.findChild<QDockWidget*>("WhatIfDock")->raise();
  loom::ui::WhatIfPanel* panel = window.whatIfPanel();
  panel->targetBox()->setCurrentIndex(1);
  emit panel->targetBox()->activated(1);  // hosts like this one, as a user picks it
  bool ok = save(window, out, tag + "-scaling.png");
  panel->searchLayouts();
  ok = save(window, out, tag + "-layouts.png") && ok;
  if (!cluster.isEmpty() && panel->loadClusterFile(cluster)) {
    panel->replicasBox()->setValue(64);  // the search of before is cleared: the scaling chart shows
    ok = save(window, out, tag + "-cluster.png") && ok;
    window.setDarkPalette(true);
    panel->searchLayouts();
    ok = save(window, out, tag + "-dark-cluster-layouts.png") && ok;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("LoomScreenshots");  // keeps the user's settings out of it
  const QStringList args = QApplication::arguments().mid(1);
  if (args.size() < 3) {
    std::fprintf(stderr, "usage: loom-predict-shots OUT_DIR DB PLAN [CLUSTER]\n");
    return 2;
  }
  const QDir out(args[0]);
  QDir().mkpath(out.path());
  MainWindow window;
  window.setSavePrompt([] { return MainWindow::SaveChoice::Discard; });
  window.setDbPath(args[1]);
  if (!window.openPlanFile(args[2])) return std::fprintf(stderr, "cannot open %s\n", qPrintable(args[2])), 2;
  window.show();
  bool ok = true;
  for (const QSize& size : {QSize(1280, 720), QSize(1920, 1080)}) ok = shoot(window, out, size, args.value(3)) && ok;
  return ok ? 0 : 1;
}
