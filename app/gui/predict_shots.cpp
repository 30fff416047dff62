// `loom-predict-shots OUT_DIR DB PLAN [CLUSTER]`: the What-if dock as a user sees it, in the
// real workbench on PLAN with DB's runs as the calibration, at 1280x720 and 1920x1080:
// whatif-WxH-scaling.png (the knobs, the figures and the scaling chart on hosts like this
// one), whatif-WxH-layouts.png (after Search layouts), whatif-WxH-calibration.png and
// whatif-WxH-dark-calibration.png (the dock's Calibration tab: what predictions stand
// on), and with CLUSTER loaded whatif-WxH-cluster.png and whatif-WxH-dark-cluster-layouts.png; first
// whatif-WxH-notes.png and whatif-WxH-dark-notes.png (the figures' tooltip with four
// replicas on this machine).
// `loom-predict-shots --calibrate OUT_DIR DB_DIR PLAN`: Run > Predict on an empty store at
// each size (dark at 1920x1080), as a first user meets it: calibrate-WxH-offer.png (the
// dialog offering Calibrate), calibrate-WxH-running.png (Calibrate now pressed, its third
// run live), calibrate-WxH-predicted.png (the prediction opened) and
// calibrate-WxH-table.png (the What-if dock's Calibration tab); each size in a new store
// under DB_DIR. Run it under xvfb-run (scripts/predict_screenshots.sh).
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QRegularExpression>
#include <QScreen>
#include <QSpinBox>
#include <QTabWidget>
#include <QTimer>
#include <QToolTip>

#include <algorithm>
#include <cstdio>

#include "shot_wait.h"
#include "loom/ui/workbench/calibration_view.h"
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

bool save_screen(const MainWindow& window, const QDir& out, const QString& name) {
  const QRect frame = window.frameGeometry();
  const QPixmap shot = window.screen()->grabWindow(0, frame.x(), frame.y(), frame.width(), frame.height());
  const bool ok = shot.save(out.filePath(name));
  std::fprintf(stderr, "%s %s\n", ok ? "saved" : "FAILED to save", qPrintable(out.filePath(name)));
  return ok;
}

// The figures' tooltip (how they were made) with the replicas crowding this machine's
// cores, where per-layer notes are grouped: the whole screen under the window, so the
// tooltip shows over it.
bool save_notes(MainWindow& window, const QDir& out, const QString& name) {
  loom::ui::WhatIfPanel* panel = window.whatIfPanel();
  panel->targetBox()->setCurrentIndex(0);
  emit panel->targetBox()->activated(0);  // this machine, as a user picks it
  const int replicas = panel->replicasBox()->value();
  panel->replicasBox()->setValue(4);
  wait_ms(300);
  QLabel* figures = panel->figuresLabel();
  // Where a user's pointer would be for the tooltip to end inside the window, as a screen
  // of the window's size would place it (this one is larger).
  const QPoint at = figures->mapToGlobal(QPoint(figures->width() / 3, 0));
  QToolTip::showText(at, figures->toolTip(), figures);
  wait_ms(300);
  for (QWidget* w : QApplication::topLevelWidgets())
    if (w->inherits("QTipLabel") && w->isVisible()) {
      const int bottom = window.frameGeometry().bottom() - 8;
      if (w->geometry().bottom() > bottom) w->move(w->x(), std::max(window.y(), bottom - w->height()));
    }
  wait_ms(300);
  const bool ok = save_screen(window, out, name);
  QToolTip::hideText();
  panel->replicasBox()->setValue(replicas);
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
  bool ok = save_notes(window, out, tag + "-notes.png");
  window.setDarkPalette(true);  // the tooltip in the dark palette too
  ok = save_notes(window, out, tag + "-dark-notes.png") && ok;
  window.setDarkPalette(false);
  panel->targetBox()->setCurrentIndex(1);
  emit panel->targetBox()->activated(1);  // hosts like this one, as a user picks it
  ok = save(window, out, tag + "-scaling.png") && ok;
  panel->searchLayouts();
  ok = save(window, out, tag + "-layouts.png") && ok;
  auto* tabs = panel->findChild<QTabWidget*>();
  tabs->setCurrentWidget(panel->calibrationView());
  ok = save(window, out, tag + "-calibration.png") && ok;
  window.setDarkPalette(true);
  ok = save(window, out, tag + "-dark-calibration.png") && ok;
  window.setDarkPalette(false);
  tabs->setCurrentIndex(0);
  if (!cluster.isEmpty() && panel->loadClusterFile(cluster)) {
    panel->replicasBox()->setValue(64);  // the search of before is cleared: the scaling chart shows
    ok = save(window, out, tag + "-cluster.png") && ok;
    window.setDarkPalette(true);
    panel->searchLayouts();
    ok = save(window, out, tag + "-dark-cluster-layouts.png") && ok;
  }
  return ok;
}

// Presses "Calibrate now" in the dialog Predict opens, after taking its picture (the
// whole screen's part under the window, so the dialog shows over it).
void answer_offer(MainWindow& window, const QDir& out, const QString& tag, bool& ok) {
  QTimer::singleShot(1500, &window, [&window, out, tag, &ok] {
    auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
    if (!box) {
      std::fprintf(stderr, "Predict opened no dialog\n");
      ok = false;
      return;
    }
    ok = save_screen(window, out, tag + "-offer.png") && ok;
    for (QAbstractButton* button : box->buttons())
      if (button->text() == QObject::tr("Calibrate now")) button->click();
  });
}

bool shoot_calibration(const QDir& out, const QString& db, const QString& plan, const QSize& size, bool dark) {
  const QString tag = QStringLiteral("calibrate-%1x%2").arg(size.width()).arg(size.height());
  MainWindow window;
  window.setRunPlanPrompt([](qint64, const QString&) { return false; });
  window.setDbPath(db);
  if (!window.openPlanFile(plan)) return std::fprintf(stderr, "cannot open %s\n", qPrintable(plan)), false;
  window.setDarkPalette(dark);
  window.move(0, 0);
  window.resize(size);
  window.show();
  wait_ms(300);
  window.applyDefaultLayout(size);
  wait_ms(500);
  bool ok = true;
  qint64 predicted = -1;
  QObject::connect(&window, &MainWindow::calibrated, [&](qint64 id) { predicted = id; });
  answer_offer(window, out, tag, ok);
  window.predictPlan();  // the dialog's own event loop runs until answer_offer presses
  // The third run a third of its way in, so the timeline has steps to show.
  const QRegularExpression third_run(QStringLiteral("^Calibration run 3 of \\d+ · Run \\d+: step [2-9]\\d"));
  if (!loom::shots::wait_for([&] { return third_run.match(window.statusText()).hasMatch(); }, 120000))
    std::fprintf(stderr, "no third calibration run after 120 s: %s\n", qPrintable(window.statusText()));
  wait_ms(200);
  ok = save_screen(window, out, tag + "-running.png") && ok;  // at once: save() waits for the What-if dock
  if (!loom::shots::wait_for([&] { return predicted >= 0; }, 600000)) return std::fprintf(stderr, "not calibrated\n"), false;
  wait_ms(1500);
  ok = save(window, out, tag + "-predicted.png") && predicted > 0 && ok;
  window.findChild<QDockWidget*>("WhatIfDock")->raise();
  auto* view = window.whatIfPanel()->calibrationView();
  window.whatIfPanel()->findChild<QTabWidget*>()->setCurrentWidget(view);
  return save(window, out, tag + "-table.png") && ok;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("LoomScreenshots");  // keeps the user's settings out of it
  QStringList args = QApplication::arguments().mid(1);
  if (args.value(0) == "--calibrate" && args.size() == 4) {
    const QDir out(args[1]);
    QDir().mkpath(out.path());
    QDir().mkpath(args[2]);
    bool ok = shoot_calibration(out, QDir(args[2]).filePath("calibrate-720.db"), args[3], QSize(1280, 720), false);
    ok = shoot_calibration(out, QDir(args[2]).filePath("calibrate-1080.db"), args[3], QSize(1920, 1080), true) && ok;
    return ok ? 0 : 1;
  }
  if (args.size() < 3) {
    std::fprintf(stderr, "usage: loom-predict-shots OUT_DIR DB PLAN [CLUSTER]\n"
                         "       loom-predict-shots --calibrate OUT_DIR DB_DIR PLAN\n");
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
