// `loom-state-shots OUT_DIR DB [--size WxH]...`: the window states issue 31 names, each
// reached in the real workbench as a user reaches it, saved at each size (default
// 1280x720 and 1920x1080) in the light and the dark palette as
// state-WxH-{light,dark}-NAME.png, for looking at: the Breakdown dock with a bar's tooltip
// (breakdown-hover), the whole run's message arrows of a 1F1B and a parameter-server run
// (arrows-1f1b, arrows-ps), rank 1 waiting while rank 0 evaluates (eval-wait), the Runs,
// Training and Lessons docks (runs-dock, training-dock, throughput, lessons-list), the
// replay bar (replay-icons), the window after opening an empty store and after deleting
// the run on screen (after-open-store, after-delete), the Open store dialog, a layer size
// past the limit (layer-size-error, layer-size-error-blocked), the status bar after a run
// from the window (status-bar) and a stored run that shared cores (oversubscribed-banner).
// DB holds the runs scripts/state_screenshots.sh makes, found by their plan names
// (1f1b-60, ps-3, dp2-eval). Tooltips and dialogs are windows of their own: the screen is
// grabbed where the window is, or the dialog itself. Run it under xvfb-run.
#include <QAbstractButton>
#include <QAbstractItemView>
#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QHelpEvent>
#include <QScreen>
#include <QSpinBox>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QTimer>
#include <QToolTip>
#include <QUndoStack>
#include <QtTest/QTest>
#include <qcustomplot.h>

#include <cstdio>
#include <functional>
#include <map>

#include "shot_wait.h"
#include "loom/store/run_store.h"
#include "loom/ui/charts/training_charts.h"
#include "loom/ui/run_list_model.h"
#include "loom/ui/designer/designer_panel.h"
#include "loom/ui/designer/layer_list_model.h"
#include "loom/ui/timeline/replay_bar.h"
#include "loom/ui/timeline/timeline_view.h"
#include "loom/ui/workbench/main_window.h"
#include "loom/ui/workbench/run_browser.h"

namespace {

using loom::ui::MainWindow;

using loom::shots::wait_ms;
using loom::shots::wait_for;
// One size in one palette: where the pictures go and what they are called.
struct Shot {
  MainWindow& window;
  QDir out;
  QSize size;
  bool dark = false;
  QString name(const QString& state) const {
    return QStringLiteral("state-%1x%2-%3-%4.png").arg(size.width()).arg(size.height()).arg(dark ? "dark" : "light", state);
  }
};

bool report(bool ok, const QString& path, const QSize& size) {
  std::fprintf(stderr, "%s %s (%dx%d)\n", ok ? "saved" : "FAILED to save", qPrintable(path), size.width(), size.height());
  return ok;
}

bool save_widget(const Shot& s, QWidget* widget, const QString& state) {
  wait_ms(500);  // let throttled views repaint
  const QString path = s.out.filePath(s.name(state));
  return report(widget->grab().save(path), path, widget->size());
}

// The screen where the window is, and as far as a tooltip (a window of its own) reaches.
bool save_screen(const Shot& s, const QString& state) {
  wait_ms(700);
  QRect frame = s.window.frameGeometry();
  for (QWidget* w : QApplication::topLevelWidgets())
    if (w->isVisible() && w->inherits("QTipLabel")) frame |= w->frameGeometry();
  const QPixmap shot = s.window.screen()->grabWindow(0, frame.x(), frame.y(), frame.width(), frame.height());
  const QString path = s.out.filePath(s.name(state));
  return report(shot.save(path), path, frame.size());
}

void raise_dock(MainWindow& window, const char* name) {
  if (auto* dock = window.findChild<QDockWidget*>(name)) dock->raise();
  wait_ms(200);
}

void lay_out(const Shot& s) {
  s.window.setDarkPalette(s.dark);
  s.window.resize(s.size);
  wait_ms(100);
  s.window.applyDefaultLayout(s.size);
  wait_ms(200);
}

// Opens a stored run as the Runs list does and waits until it is drawn.
bool open_run(MainWindow& window, qint64 id) {
  bool loaded = false;
  auto connection = QObject::connect(&window, &MainWindow::runLoaded, [&] { loaded = true; });
  window.openRun(id);
  wait_for([&] { return loaded; }, 60000);
  QObject::disconnect(connection);
  if (!loaded) std::fprintf(stderr, "run %lld did not load within a minute\n", static_cast<long long>(id));
  return loaded;
}

// The newest run of each plan name in the store.
std::map<std::string, qint64> runs_by_name(const QString& db) {
  std::map<std::string, qint64> ids;
  auto store = loom::store::RunStore::open(db.toStdString());
  if (!store.ok()) return ids;
  auto runs = store->list_runs();
  if (!runs.ok()) return ids;
  for (const auto& r : *runs) ids[r.name] = std::max<qint64>(ids[r.name], r.id);
  return ids;
}

// Rests the pointer on rank 0's compute bar, halfway along it, as QToolTip needs it.
bool save_breakdown_hover(const Shot& s) {
  raise_dock(s.window, "BreakdownDock");
  auto* chart = s.window.views()->breakdown();
  chart->plot()->replot();
  QCPBars* compute = chart->bars("compute");
  if (compute == nullptr || compute->data()->isEmpty()) return false;
  const double seconds = compute->data()->begin()->value / 2;
  const QPoint over(int(chart->plot()->xAxis->coordToPixel(seconds)), int(chart->plot()->yAxis->coordToPixel(0.0)));
  QTest::mouseMove(chart->plot(), over);
  QHelpEvent rest(QEvent::ToolTip, over, chart->plot()->mapToGlobal(over));
  QApplication::sendEvent(chart->plot(), &rest);
  std::fprintf(stderr, "  tooltip: %s\n", qPrintable(QToolTip::text().left(200)));
  const bool ok = save_screen(s, "breakdown-hover");
  QToolTip::hideText();
  return ok;
}

// The 1F1B run: breakdown, its arrows over the whole run, the Training and Runs docks and
// the replay bar halfway through.
bool save_pipeline_run(const Shot& s, qint64 id) {
  if (!open_run(s.window, id)) return false;
  lay_out(s);
  bool ok = save_breakdown_hover(s);
  s.window.views()->timeline()->fitAll();
  ok = save_widget(s, &s.window, "arrows-1f1b") && ok;
  raise_dock(s.window, "TrainingDock");
  ok = save_widget(s, &s.window, "training-dock") && ok;
  {
    auto* t = s.window.views()->training();
    auto* lp = t->lossPlot();
    std::fprintf(stderr, "  training %dx%d, loss plot %dx%d, axis rect %d, legend outer %d..%d inner %d..%d\n", t->width(), t->height(),
                 lp->width(), lp->height(), lp->axisRect()->height(), lp->legend->outerRect().top(), lp->legend->outerRect().bottom(),
                 lp->legend->rect().top(), lp->legend->rect().bottom());
  }
  ok = save_widget(s, s.window.views()->training()->throughputPlot(), "throughput") && ok;
  raise_dock(s.window, "RunsDock");
  ok = save_widget(s, &s.window, "runs-dock") && ok;
  auto* replay = s.window.views()->replay();
  replay->setCursor(s.window.views()->timeline()->data().end_ns() / 2.0);
  ok = save_widget(s, replay, "replay-icons") && ok;
  replay->setReplaying(false);
  return ok;
}

// The parameter-server run: its arrows over the whole run; it ran 3 ranks on this
// machine's 2 cores, so the window says so under the caption.
bool save_ps_run(const Shot& s, qint64 id) {
  if (!open_run(s.window, id)) return false;
  lay_out(s);
  s.window.views()->timeline()->fitAll();
  bool ok = save_widget(s, &s.window, "arrows-ps");
  std::fprintf(stderr, "  oversubscription: %s\n", qPrintable(s.window.oversubscriptionText()));
  return save_widget(s, &s.window, "oversubscribed-banner") && ok;
}

// The 2-replica run zoomed on rank 0's first evaluation, a third of its length either side.
bool save_eval_wait(const Shot& s, qint64 id) {
  if (!open_run(s.window, id)) return false;
  lay_out(s);
  auto* timeline = s.window.views()->timeline();
  const auto& data = timeline->data();
  for (std::uint32_t i = 0; i < data.event_count(); ++i) {
    const auto& e = data.event(i);
    if (data.event_rank(i) != 0 || e.kind != loom::trace::EventKind::Evaluate) continue;
    const double t0 = double(e.start_ns - data.origin_ns()), t1 = double(e.end_ns - data.origin_ns());
    const double pad = (t1 - t0) / 3;
    timeline->setViewport({t0 - pad, t1 + pad, timeline->viewport().width_px});
    return save_widget(s, &s.window, "eval-wait");
  }
  std::fprintf(stderr, "run %lld has no evaluation on rank 0\n", static_cast<long long>(id));
  return false;
}

// A run on screen, then another (empty) store opened: what is left on screen.
bool save_after_open_store(const Shot& s, qint64 id, const QString& empty_db) {
  if (!open_run(s.window, id)) return false;
  const QString db = s.window.dbPath();
  s.window.setDbPath(empty_db);
  wait_ms(500);
  const bool ok = save_widget(s, &s.window, "after-open-store");
  s.window.setDbPath(db);
  return ok;
}

// A short run of the designer's plan from the window (Run): the status bar after it; then
// that run deleted from the Runs dock (its Delete… answered yes): what is left on screen.
bool save_live_run(const Shot& s) {
  bool finished = false, loaded = false;
  auto f = QObject::connect(&s.window, &MainWindow::runFinished, [&] { finished = true; });
  auto l = QObject::connect(&s.window, &MainWindow::runLoaded, [&] { loaded = true; });
  s.window.document()->edit("a short run", [](loom::Plan& p) { p.training.steps = 40, p.training.eval_every = 20; });
  s.window.runPlan();
  const bool done = wait_for([&] { return finished && loaded; }, 180000);
  QObject::disconnect(f), QObject::disconnect(l);
  s.window.document()->undoStack()->undo();
  if (!done) return false;
  wait_for([&] { return !s.window.rateText().isEmpty(); }, 10000);
  lay_out(s);
  std::fprintf(stderr, "  status: %s | %s\n", qPrintable(s.window.statusText()), qPrintable(s.window.rateText()));
  bool ok = save_widget(s, s.window.statusBar(), "status-bar");
  loom::ui::RunBrowser* browser = s.window.runBrowser();
  raise_dock(s.window, "RunsDock");
  wait_for([&] { return browser->model()->rowCount() > 0; }, 10000);
  browser->selectRuns({s.window.currentRunId()});
  browser->setDeletePrompt([](const QString&) { return true; });
  browser->deleteAction()->trigger();
  wait_for([&] { return s.window.currentRunId() == 0; }, 20000);
  return save_widget(s, &s.window, "after-delete") && ok;
}

// The linear layer's out typed as 99999999999: the tooltip while typing, then the plan
// the finished edit leaves (Run blocked); undone after.
bool save_layer_size_error(const Shot& s) {
  raise_dock(s.window, "ModelDock");
  auto* panel = s.window.findChild<loom::ui::DesignerPanel*>();
  const int undo_index = s.window.document()->undoStack()->index();
  panel->view()->edit(panel->view()->model()->index(1, loom::ui::LayerListModel::Settings));
  auto* spin = panel->view()->findChild<QSpinBox*>("out");
  if (spin == nullptr) return false;
  spin->setFocus();
  spin->selectAll();
  QTest::keyClicks(spin, "99999999999");
  bool ok = save_screen(s, "layer-size-error");
  QTest::keyClick(spin, Qt::Key_Return);
  ok = save_widget(s, &s.window, "layer-size-error-blocked") && ok;
  std::fprintf(stderr, "  blocked: %s\n", qPrintable(s.window.document()->runBlockedReason()));
  while (s.window.document()->undoStack()->index() > undo_index) s.window.document()->undoStack()->undo();
  return ok;
}

// Runs dock > Open store…: the dialog as it opens (a modal loop, answered by a timer).
bool save_open_store_dialog(const Shot& s) {
  bool ok = false;
  QTimer::singleShot(800, [&] {
    if (auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget())) {
      ok = save_widget(s, dialog, "open-store-dialog");
      dialog->reject();
    }
  });
  s.window.runBrowser()->openStoreAction()->trigger();
  if (!ok) std::fprintf(stderr, "the Open store dialog was not found\n");
  return ok;
}

bool shoot(const Shot& s, const std::map<std::string, qint64>& runs, const QString& empty_db) {
  lay_out(s);
  bool ok = save_live_run(s);
  ok = save_pipeline_run(s, runs.at("1f1b-60")) && ok;
  ok = save_after_open_store(s, runs.at("1f1b-60"), empty_db) && ok;
  ok = save_ps_run(s, runs.at("ps-3")) && ok;
  ok = save_eval_wait(s, runs.at("dp2-eval")) && ok;
  lay_out(s);
  raise_dock(s.window, "LessonsDock");
  ok = save_widget(s, &s.window, "lessons-list") && ok;
  ok = save_layer_size_error(s) && ok;
  return save_open_store_dialog(s) && ok;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication::setAttribute(Qt::AA_DontUseNativeDialogs);  // a Qt dialog can be grabbed
  QApplication app(argc, argv);
  QApplication::setOrganizationName("LoomScreenshots");  // keeps the user's settings out of it
  QStringList args = QApplication::arguments().mid(1);
  std::vector<QSize> sizes;
  QStringList rest;
  while (!args.isEmpty()) {
    const QString a = args.takeFirst();
    if (a == "--size" && !args.isEmpty()) {
      const QString size = args.takeFirst();
      sizes.emplace_back(size.section('x', 0, 0).toInt(), size.section('x', 1, 1).toInt());
    } else {
      rest << a;
    }
  }
  if (rest.size() != 2) {
    std::fprintf(stderr, "usage: loom-state-shots OUT_DIR DB [--size WxH]...\n");
    return 2;
  }
  if (sizes.empty()) sizes = {QSize(1280, 720), QSize(1920, 1080)};
  const QDir out(rest[0]);
  QDir().mkpath(out.path());
  const auto runs = runs_by_name(rest[1]);
  for (const char* name : {"1f1b-60", "ps-3", "dp2-eval"}) {
    if (runs.count(name) == 0) {
      std::fprintf(stderr, "%s holds no run of the plan %s\n", qPrintable(rest[1]), name);
      return 2;
    }
  }
  QTemporaryDir empty;
  MainWindow window;
  window.setSavePrompt([] { return MainWindow::SaveChoice::Discard; });
  window.setRunPlanPrompt([](qint64, const QString&) { return false; });  // the designer keeps its plan
  window.setDbPath(rest[1]);
  window.show();
  bool ok = true;
  for (const QSize& size : sizes)
    for (const bool dark : {false, true}) ok = shoot(Shot{window, out, size, dark}, runs, empty.filePath("empty.db")) && ok;
  window.setDarkPalette(false);
  return ok ? 0 : 1;
}
