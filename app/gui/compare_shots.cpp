// `loom-compare-shots OUT_DIR DB RUN_ID... [--size WxH]... [--prefix NAME]`: the run comparison as a
// user sees it. Opens the real workbench on the store with the Runs dock raised and the
// runs selected (compare-WxH-runs.png), chooses Compare as the dock's button does, and
// saves each tab of the comparison window at each size (default 1280x720 and 1920x1080):
// compare-WxH-training.png (against step and against samples), -timelines.png (aligned on
// a step, zoomed to it), -metrics.png, -phases.png, and -dark-timelines.png and
// -dark-metrics.png in the dark palette ("compare" is --prefix's default).
// scripts/compare_screenshots.sh makes the runs for real and runs this under Xvfb.
// `--open RUN_ID --runs-only`: opens that run first (its caption over the timeline names
// what it ran on), saves PREFIX-WxH-runs.png and, with the tooltip of the run's Mode cell
// shown (the devices in full), PREFIX-WxH-runs-tooltip.png, and stops there
// (scripts/device_screenshots.sh).
#include <QAction>
#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QHeaderView>
#include <QScreen>
#include <QSortFilterProxyModel>
#include <QTabWidget>
#include <QTableView>
#include <QToolTip>

#include <cstdio>
#include <functional>

#include "shot_wait.h"
#include "loom/ui/charts/overlay_charts.h"
#include "loom/ui/item_roles.h"
#include "loom/ui/run_list_model.h"
#include "loom/ui/workbench/comparison_window.h"
#include "loom/ui/workbench/main_window.h"
#include "loom/ui/workbench/run_browser.h"

namespace {

using loom::ui::ComparisonWindow;
using loom::ui::MainWindow;

using loom::shots::wait_ms;
using loom::shots::wait_for;
bool save(QWidget* widget, const QDir& out, const QString& name) {
  wait_ms(500);  // let throttled views repaint
  const QString path = out.filePath(name);
  const bool ok = widget->grab().save(path);
  std::fprintf(stderr, "%s %s (%dx%d)\n", ok ? "saved" : "FAILED to save", qPrintable(path), widget->width(),
               widget->height());
  return ok;
}

bool save_tabs(ComparisonWindow& cmp, const QDir& out, const QString& stem) {
  bool ok = true;
  cmp.tabs()->setCurrentIndex(0);
  cmp.charts()->setXAxis(loom::ui::charts::XAxis::Step);
  ok = save(&cmp, out, stem + "training.png") && ok;
  cmp.charts()->setXAxis(loom::ui::charts::XAxis::Samples);
  ok = save(&cmp, out, stem + "training-samples.png") && ok;
  cmp.charts()->setXAxis(loom::ui::charts::XAxis::Step);
  cmp.tabs()->setCurrentIndex(1);
  wait_ms(200);
  cmp.setAlignment(ComparisonWindow::Align::StepStart, cmp.alignStep());  // at this width
  ok = save(&cmp, out, stem + "timelines.png") && ok;
  cmp.tabs()->setCurrentIndex(2);
  ok = save(&cmp, out, stem + "metrics.png") && ok;
  cmp.tabs()->setCurrentIndex(3);
  ok = save(&cmp, out, stem + "phases.png") && ok;
  return ok;
}

// The window with the tooltip of `row`'s Mode cell showing: a tooltip is a window of its
// own, so the screen is grabbed where the window is, not the window alone.
bool save_mode_tooltip(MainWindow& window, QTableView* table, int row, const QDir& out, const QString& name) {
  const QModelIndex index = table->model()->index(row, loom::ui::RunListModel::Mode);
  const QRect cell = table->visualRect(index);
  // Below the rows, where it covers none of them.
  const QPoint at = table->viewport()->mapToGlobal(cell.center() + QPoint(0, (table->model()->rowCount() - row) * cell.height()));
  QToolTip::showText(at, index.data(Qt::ToolTipRole).toString(), table->viewport(), cell);
  wait_ms(800);
  const QRect frame = window.frameGeometry();
  const QImage shot = window.screen()->grabWindow(0, frame.x(), frame.y(), frame.width(), frame.height()).toImage();
  QToolTip::hideText();
  const bool ok = shot.save(out.filePath(name));
  std::fprintf(stderr, "%s %s\n", ok ? "saved" : "FAILED to save", qPrintable(out.filePath(name)));
  return ok;
}

// Opens a run as the Runs list does and waits until it is drawn.
bool open_run(MainWindow& window, qint64 id) {
  bool loaded = false;
  auto connection = QObject::connect(&window, &MainWindow::runLoaded, [&] { loaded = true; });
  window.openRun(id);
  wait_for([&] { return loaded; }, 60000);
  QObject::disconnect(connection);
  return loaded;
}

// What the command line asked for.
struct Options {
  std::vector<QSize> sizes;
  QString prefix = QStringLiteral("compare");
  QStringList rest;  // OUT_DIR DB RUN_ID RUN_ID...
  qint64 open_id = 0;
  bool runs_only = false;
};

Options parse_options(QStringList args) {
  Options o;
  while (!args.isEmpty()) {
    const QString a = args.takeFirst();
    if (a == "--runs-only") {
      o.runs_only = true;
    } else if (a == "--open" && !args.isEmpty()) {
      o.open_id = args.takeFirst().toLongLong();
    } else if (a == "--prefix" && !args.isEmpty()) {
      o.prefix = args.takeFirst();
    } else if (a == "--size" && !args.isEmpty()) {
      const QString s = args.takeFirst();
      o.sizes.emplace_back(s.section('x', 0, 0).toInt(), s.section('x', 1, 1).toInt());
    } else {
      o.rest << a;
    }
  }
  if (o.sizes.empty()) o.sizes = {QSize(1280, 720), QSize(1920, 1080)};
  return o;
}

// The opened run's row of the Runs list (else the first) with its Mode tooltip.
bool save_runs_tooltip(MainWindow& window, const Options& o, const QDir& out, const QString& stem) {
  loom::ui::RunBrowser* browser = window.runBrowser();
  int row = 0;
  const QAbstractItemModel* rows = browser->table()->model();
  for (int r = 0; r < rows->rowCount(); ++r)
    if (rows->index(r, 0).data(loom::ui::RunIdRole).toLongLong() == o.open_id) row = r;
  return save_mode_tooltip(window, browser->table(), row, out, stem + "runs-tooltip.png");
}

// The comparison window of the selected runs, every tab, then two tabs in the dark palette.
// -1: it did not load.
int save_comparison(MainWindow& window, QSize size, const QDir& out, const QString& stem) {
  ComparisonWindow* cmp = nullptr;
  auto connection = QObject::connect(&window, &MainWindow::comparisonOpened, [&](ComparisonWindow* w) { cmp = w; });
  window.runBrowser()->compareAction()->trigger();
  QObject::disconnect(connection);
  if (!cmp || !wait_for([&] { return cmp->runsLoaded() && cmp->comparisonShown(); }, 120000)) {
    std::fprintf(stderr, "the comparison did not load within 2 minutes\n");
    return -1;
  }
  cmp->resize(size);
  bool ok = save_tabs(*cmp, out, stem);
  // The dark palette (View > Dark palette applies to every window of the application).
  window.setDarkPalette(true);
  cmp->tabs()->setCurrentIndex(1);
  ok = save(cmp, out, stem + "dark-timelines.png") && ok;
  cmp->tabs()->setCurrentIndex(2);
  ok = save(cmp, out, stem + "dark-metrics.png") && ok;
  window.setDarkPalette(false);
  cmp->close();
  wait_ms(200);
  return ok ? 1 : 0;
}

// One window size: the Runs list with the runs selected, then the tooltip or the comparison.
// -1: something did not load.
int save_at_size(MainWindow& window, const Options& o, const QList<qint64>& ids, QSize size, const QDir& out) {
  loom::ui::RunBrowser* browser = window.runBrowser();
  window.resize(size);
  window.applyDefaultLayout(size);
  if (auto* dock = window.findChild<QDockWidget*>("RunsDock")) dock->raise();
  browser->refresh();
  if (!wait_for([&] { return browser->model()->rowCount() >= ids.size(); }, 20000)) {
    std::fprintf(stderr, "the Runs dock did not list the runs\n");
    return -1;
  }
  browser->selectRuns(o.runs_only && o.open_id > 0 ? QList<qint64>{o.open_id} : ids);
  const QString stem = QStringLiteral("%1-%2x%3-").arg(o.prefix).arg(size.width()).arg(size.height());
  bool ok = save(&window, out, stem + "runs.png");
  if (o.runs_only) return save_runs_tooltip(window, o, out, stem) && ok ? 1 : 0;
  const int compared = save_comparison(window, size, out, stem);
  return compared < 0 ? -1 : compared == 1 && ok ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("LoomScreenshots");  // keeps the user's settings out of it
  const Options o = parse_options(QApplication::arguments().mid(1));
  if (o.rest.size() < 4) {
    std::fprintf(stderr, "usage: loom-compare-shots OUT_DIR DB RUN_ID RUN_ID... [--size WxH]... [--prefix NAME]\n");
    return 2;
  }
  const QDir out(o.rest[0]);
  QDir().mkpath(out.path());
  QList<qint64> ids;
  for (const QString& id : o.rest.mid(2)) ids << id.toLongLong();
  MainWindow window;
  window.setSavePrompt([] { return MainWindow::SaveChoice::Discard; });
  // No modal question; a run opened for its own pictures brings its plan into the designer.
  window.setRunPlanPrompt([open_id = o.open_id](qint64, const QString&) { return open_id > 0; });
  window.setDbPath(o.rest[1]);
  window.show();
  if (o.open_id > 0 && !open_run(window, o.open_id)) {
    std::fprintf(stderr, "run %lld did not load within a minute\n", static_cast<long long>(o.open_id));
    return 1;
  }
  bool ok = true;
  for (const QSize& size : o.sizes) {
    const int saved = save_at_size(window, o, ids, size, out);
    if (saved < 0) return 1;
    ok = saved == 1 && ok;
  }
  return ok ? 0 : 1;
}
