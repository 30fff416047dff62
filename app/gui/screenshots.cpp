// `loom-screenshots [--size WxH]... [--no-run] OUT_DIR PLAN.json DB`: opens the real
// workbench window on a plan, runs it for real, and saves PNGs of the window while
// designing, while running, after the run, zoomed into one step, and in the dark
// palette, the strategy form with the launch log, a plan error, and the Help menu's
// glossary and tour (help-glossary.png, help-tour.png). Each --size (e.g. 1280x720, 1920x1080) gets its own set, laid out as a
// screen of that size lays the window out by default, named workbench-WxH-STATE.png;
// without --size one set at 1600x1000 named workbench-STATE.png. --no-run stops after
// the design shots. scripts/screenshots.sh runs it under Xvfb.
// `loom-screenshots --runs OUT_DIR DB NAME=RUN_ID...`: opens each stored run in the
// workbench, as the Runs list does, and saves its training charts (NAME-training.png) and,
// for an asynchronous run, its staleness chart (NAME-staleness.png).
// scripts/async_screenshots.sh uses it for the README's asynchronous-training section.
// `loom-screenshots [--size WxH]... --lesson NAME OUT_DIR DB`: opens the Lessons dock on
// that lesson, saves it (lesson-WxH-question.png), enters a prediction, runs the lesson
// for real and saves the result beside its last run (lesson-WxH-result.png, and
// lesson-WxH-result-dark.png in the dark palette).
#include <QAction>
#include <QApplication>
#include <QDialog>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QMenu>
#include <QMenuBar>
#include <QTimer>

#include <cstdio>

#include <QUndoStack>

#include "shot_wait.h"
#include "loom/ui/charts/training_charts.h"
#include "loom/ui/designer/strategy.h"
#include "loom/ui/timeline/timeline_view.h"
#include "loom/ui/workbench/lesson_panel.h"
#include "loom/ui/workbench/lesson_session.h"
#include "loom/ui/workbench/main_window.h"

namespace {

using loom::ui::MainWindow;

using loom::shots::wait_ms;
bool save_widget(QWidget* widget, const QDir& out, const QString& name) {
  wait_ms(400);  // let throttled views repaint
  const QString path = out.filePath(name);
  const bool ok = widget->grab().save(path);
  std::fprintf(stderr, "%s %s (%dx%d)\n", ok ? "saved" : "FAILED to save", qPrintable(path), widget->width(),
               widget->height());
  return ok;
}

void raise_dock(MainWindow& window, const char* name) {
  if (auto* dock = window.findChild<QDockWidget*>(name)) dock->raise();
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

struct Shot {
  QSize size;
  QString prefix;  // "workbench-1280x720-" or "workbench-"
};

void lay_out(MainWindow& window, const Shot& shot, bool dark) {
  window.setDarkPalette(dark);
  window.resize(shot.size);
  wait_ms(100);
  window.applyDefaultLayout(shot.size);
}

// After the run: the whole run with the training charts, one step zoomed in with the
// breakdown, and the same in the dark palette.
bool save_results(MainWindow& window, const QDir& out, const Shot& shot) {
  lay_out(window, shot, false);
  window.views()->timeline()->fitAll();
  raise_dock(window, "TrainingDock");
  bool ok = save_widget(&window, out, shot.prefix + "finished.png");
  auto* timeline = window.views()->timeline();
  const double middle = timeline->data().end_ns() / 2.0;
  timeline->setViewport({middle, middle + 40e6, timeline->viewport().width_px});
  raise_dock(window, "BreakdownDock");
  ok = save_widget(&window, out, shot.prefix + "zoomed.png") && ok;
  raise_dock(window, "StrategyDock");
  raise_dock(window, "LogDock");
  ok = save_widget(&window, out, shot.prefix + "strategy-log.png") && ok;
  lay_out(window, shot, true);
  raise_dock(window, "BreakdownDock");
  ok = save_widget(&window, out, shot.prefix + "dark.png") && ok;
  window.setDarkPalette(false);
  return ok;
}

// A plan error as the window shows it: one more pipeline stage than the layers use, so
// the Placement tab marks the empty stage's column and lists the error; undone after.
bool save_plan_error(MainWindow& window, const QDir& out, const Shot& shot) {
  lay_out(window, shot, false);
  window.document()->edit("one stage too many", [](loom::Plan& p) { loom::ui::setStages(p, p.parallel.stages + 1); });
  raise_dock(window, "PlacementDock");
  const bool ok = save_widget(&window, out, shot.prefix + "plan-error.png");
  window.document()->undoStack()->undo();
  return ok;
}

// The Help menu's glossary and tour, as dialogs of their own.
bool save_help(MainWindow& window, const QDir& out) {
  bool ok = true;
  for (QAction* menu : window.menuBar()->actions()) {
    if (menu->text() != "&Help") continue;
    for (QAction* a : menu->menu()->actions()) {
      const QString name = a->text() == "&Glossary" ? "glossary" : a->text() == "&First five minutes" ? "tour" : "";
      if (name.isEmpty()) continue;
      a->trigger();
      QDialog* dialog = window.findChild<QDialog*>(name == "glossary" ? "GlossaryDialog" : "TourDialog");
      if (dialog == nullptr) return false;
      ok = save_widget(dialog, out, "help-" + name + ".png") && ok;
      dialog->close();
    }
  }
  return ok;
}

// Waits until `finished` (set by the window's runFinished) is true; false after 5 minutes.
bool wait_finished(bool& finished) {
  QElapsedTimer clock;
  clock.start();
  while (!finished && clock.elapsed() < 300000) wait_ms(100);
  if (!finished) std::fprintf(stderr, "the run did not finish within 5 minutes\n");
  return finished;
}

// Run > Resume: the plan run again and stopped after a few seconds, the Resume action
// enabled on it, the replica dialog as it opens, and the resumed run at its end.
bool save_resume(MainWindow& window, const QDir& out, const Shot& shot) {
  bool finished = false;
  QObject::connect(&window, &MainWindow::runFinished, [&] { finished = true; });
  lay_out(window, shot, false);
  window.runPlan();
  wait_ms(8000);
  window.stopRun();
  if (!wait_finished(finished)) return false;
  wait_ms(2000);
  bool ok = save_widget(&window, out, shot.prefix + "resume-stopped.png");
  QTimer::singleShot(1500, [&] {
    if (QWidget* dialog = QApplication::activeModalWidget()) {
      ok = save_widget(dialog, out, "resume-dialog.png") && ok;
      dialog->close();  // closing rejects: resume with the run's own replica count instead
    }
  });
  window.resumeAction()->trigger();  // opens the dialog; the timer above answers it
  finished = false;
  window.setResumePrompt([](const loom::host::ResumeRequest& r) { return r.plan.parallel.data_parallel; });
  window.resumeAction()->trigger();
  wait_ms(4000);
  ok = save_widget(&window, out, shot.prefix + "resume-running.png") && ok;
  return wait_finished(finished) && ok;
}

int run_and_save(MainWindow& window, const QDir& out, const std::vector<Shot>& shots, bool run) {
  bool ok = save_help(window, out);
  for (const Shot& shot : shots) {
    lay_out(window, shot, false);
    ok = save_widget(&window, out, shot.prefix + "design.png") && ok;
  }
  if (!run) return ok ? 0 : 1;
  bool finished = false, loaded = false;
  QObject::connect(&window, &MainWindow::runFinished, [&] { finished = true; });
  QObject::connect(&window, &MainWindow::runLoaded, [&] { loaded = true; });
  lay_out(window, shots.front(), false);
  window.runPlan();
  wait_ms(6000);
  ok = save_widget(&window, out, shots.front().prefix + "running.png") && ok;
  QElapsedTimer clock;
  clock.start();
  while (!(finished && loaded) && clock.elapsed() < 300000) wait_ms(100);
  if (!finished || !loaded) {
    std::fprintf(stderr, "the run did not finish within 5 minutes\n");
    return 1;
  }
  for (const Shot& shot : shots) ok = save_results(window, out, shot) && ok;
  for (const Shot& shot : shots) ok = save_plan_error(window, out, shot) && ok;
  ok = save_resume(window, out, shots.front()) && ok;
  for (const Shot& shot : shots) {
    lay_out(window, shot, shot.size.width() > 1600);  // the larger one in the dark palette
    window.views()->timeline()->fitAll();
    ok = save_widget(&window, out, shot.prefix + "resumed.png") && ok;
  }
  window.setDarkPalette(false);
  return ok ? 0 : 1;
}

// The lesson before and after its runs, at each size; the prediction is the theory's
// value less a quarter, so the result shows an error.
int save_lesson(MainWindow& window, const QString& name, const QDir& out, const std::vector<Shot>& shots) {
  if (!window.openLesson(name)) return 2;
  bool ok = true;
  for (const Shot& shot : shots) {
    lay_out(window, shot, false);
    window.openLesson(name);
    ok = save_widget(&window, out, "lesson-" + shot.prefix.section('-', 1, 1) + "-question.png") && ok;
  }
  auto* prediction = window.lessonPanel()->findChild<QLineEdit*>("LessonPrediction");
  prediction->setText("3");
  bool done = false;
  QObject::connect(window.lessonSession(), &loom::ui::LessonSession::measured, [&done] { done = true; });
  QObject::connect(window.lessonSession(), &loom::ui::LessonSession::failed, [&done] { done = true; });
  window.lessonPanel()->findChild<QPushButton*>("LessonRun")->click();
  QElapsedTimer clock;
  clock.start();
  while (!done && clock.elapsed() < 300000) wait_ms(100);
  wait_ms(1500);  // the last run's views settle
  for (const Shot& shot : shots) {
    lay_out(window, shot, false);
    window.openLesson(name);
    window.views()->timeline()->fitAll();
    ok = save_widget(&window, out, "lesson-" + shot.prefix.section('-', 1, 1) + "-result.png") && ok;
    lay_out(window, shot, true);
    window.openLesson(name);
    ok = save_widget(&window, out, "lesson-" + shot.prefix.section('-', 1, 1) + "-result-dark.png") && ok;
  }
  window.setDarkPalette(false);
  return ok && done ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("LoomScreenshots");  // keeps the user's settings out of it
  QStringList args = QApplication::arguments().mid(1);
  std::vector<Shot> shots;
  bool run = true;
  QString lesson;
  while (!args.isEmpty() && args.front().startsWith("--") && args.front() != "--runs") {
    const QString option = args.takeFirst();
    if (option == "--lesson" && !args.isEmpty()) {
      lesson = args.takeFirst();
    } else if (option == "--no-run") {
      run = false;
    } else if (option == "--size" && !args.isEmpty()) {
      const QString size = args.takeFirst();
      shots.push_back({QSize(size.section('x', 0, 0).toInt(), size.section('x', 1, 1).toInt()),
                       QStringLiteral("workbench-%1-").arg(size)});
    }
  }
  const bool stored_runs = !args.isEmpty() && args.front() == "--runs";
  if (stored_runs) args.removeFirst();
  if (args.size() < (stored_runs || !lesson.isEmpty() ? 2 : 3)) {
    std::fprintf(stderr, "usage: loom-screenshots [--size WxH]... [--no-run] OUT_DIR PLAN.json RUNS.db\n"
                         "       loom-screenshots [--size WxH]... --lesson NAME OUT_DIR RUNS.db\n"
                         "       loom-screenshots --runs OUT_DIR RUNS.db NAME=RUN_ID...\n");
    return 2;
  }
  const QDir out(args[0]);
  QDir().mkpath(out.path());
  // A lesson "before its runs" lists no result from an earlier screenshot run.
  if (!lesson.isEmpty()) QSettings().remove("lessons");
  MainWindow window;
  window.setSavePrompt([] { return MainWindow::SaveChoice::Discard; });
  window.setRunPlanPrompt([](qint64, const QString&) { return false; });
  window.setDbPath(stored_runs || !lesson.isEmpty() ? args[1] : args[2]);
  window.resize(1600, 1000);
  window.show();
  if (stored_runs) return save_stored_runs(window, out, args.mid(2));
  if (!lesson.isEmpty()) {
    if (shots.empty()) shots.push_back({QSize(1600, 1000), QStringLiteral("workbench-1600x1000-")});
    return save_lesson(window, lesson, out, shots);
  }
  if (!window.openPlanFile(args[1])) return 2;
  if (shots.empty()) shots.push_back({QSize(1600, 1000), QStringLiteral("workbench-")});
  return run_and_save(window, out, shots, run);
}
