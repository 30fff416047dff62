// MainWindow: what explains the workbench. The Help menu's glossary (every term, from
// the one table in glossary.h) and "first five minutes" tour, and the Examples menu,
// which lists the example plans by title with what each shows and what to look at.
#include <QAction>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "loom/ui/glossary.h"
#include "loom/ui/workbench/main_window.h"

namespace loom::ui {

namespace {

QDialog* textDialog(QWidget* parent, const QString& objectName, const QString& title, const QString& html) {
  auto* dialog = new QDialog(parent);
  dialog->setObjectName(objectName);
  dialog->setWindowTitle(title);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  auto* text = new QTextBrowser;
  text->setOpenLinks(false);
  text->setHtml(html);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  QObject::connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::close);
  auto* layout = new QVBoxLayout(dialog);
  layout->addWidget(text);
  layout->addWidget(buttons);
  dialog->resize(640, 560);
  return dialog;
}

QStringList examplePlanFiles() {
  QStringList files;
  for (QDirIterator it(":/plans", {"*.json"}); it.hasNext();) files << QFileInfo(it.next()).fileName();
  files.sort();
  return files;
}

}  // namespace

void MainWindow::createHelpMenu() {
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&First five minutes"), this, [this] { showTour(); });
  help->addAction(tr("&Glossary"), QKeySequence::HelpContents, this, [this] { showGlossary(); });
  help->addSeparator();
  help->addAction(tr("&About Loom"), this, [this] {
    QMessageBox::about(this, tr("About Loom"),
                       tr("<b>Loom %1</b><p>A workbench for designing and profiling parallel training: lay a model "
                          "out on devices, press Run, and watch what each device does.</p>")
                           .arg(QStringLiteral(LOOM_VERSION)));
  });
}

void MainWindow::showGlossary(const QString& anchor) {
  QDialog* dialog = textDialog(this, "GlossaryDialog", tr("Loom glossary"), glossary_html());
  if (!anchor.isEmpty()) dialog->findChild<QTextBrowser*>()->scrollToAnchor(anchor);
  dialog->show();
}

void MainWindow::showTour() {
  QString html = tr(
      "<h3>The first five minutes</h3>"
      "<ol>"
      "<li><b>Open an example.</b> File › Examples lists plans from one process to pipelines and parameter "
      "servers; hover one to see what it shows. Start with <i>One process</i>, then <i>Data parallel</i>.</li>"
      "<li><b>Read the plan.</b> The Model tab lists the layers (output shape, parameters, memory); Devices lists "
      "one rank per row; Strategy holds data parallel, pipeline and sync settings (hover any field for what it "
      "means and its formula); Placement shows which rank runs which layer.</li>"
      "<li><b>Press Run.</b> Real processes start (mpirun), and the timeline in the middle fills with one lane per "
      "rank. The line above it says which run you are looking at.</li>"
      "<li><b>Read the timeline.</b> Zoom with the wheel, drag to pan, 0 fits everything; hover a span for its "
      "kind, layer and duration. Setup (starting the ranks, loading data, aligning their clocks) comes before the "
      "first step. View › Timeline only gives it the whole window.</li>"
      "<li><b>Read the results.</b> Training: loss, accuracy and samples/s. Breakdown: where each rank's time "
      "went (hover a category for what it counts); for pipelines, the bubble per stage next to its theory. "
      "Runs: every stored run, double-click to show one again.</li>"
      "</ol>"
      "<p>Help › Glossary explains every term: bubble, all-reduce, staleness, oversubscription…</p>"
      "<h3>The examples</h3><dl>");
  for (const ExamplePlan& e : examples_.examples()) {
    html += QStringLiteral("<dt><b>%1</b></dt><dd>%2<br><i>%3</i> %4</dd>")
                .arg(e.title.toHtmlEscaped(), e.description.toHtmlEscaped(), tr("Look at:"), e.look_at.toHtmlEscaped());
  }
  textDialog(this, "TourDialog", tr("First five minutes with Loom"), html + QStringLiteral("</dl>"))->show();
}

// In the index's order (simple to advanced); plans the index does not describe follow,
// by file name, so a new plan is never hidden.
void MainWindow::rebuildExamplesMenu() {
  examples_menu_->clear();
  const QStringList files = examplePlanFiles();
  auto add = [this](const QString& file, const QString& text, const QString& tip) {
    QAction* a = examples_menu_->addAction(text, this, [this, file] {
      if (maybeSave()) openExample(QStringLiteral(":/plans/") + file);
    });
    a->setToolTip(tip);
    a->setStatusTip(tip);
    a->setData(file);
  };
  for (const ExamplePlan& e : examples_.examples()) {
    if (files.contains(e.file)) add(e.file, e.title, ExampleCatalog::toolTip(e));
  }
  for (const QString& file : examples_.undescribed(files)) {
    if (examples_.find(file) == nullptr) add(file, QFileInfo(file).completeBaseName(), file);
  }
}

bool MainWindow::openExample(const QString& resource) {
  QFile file(resource);
  if (!file.open(QIODevice::ReadOnly)) {
    showError(tr("Cannot open example"), resource);
    return false;
  }
  auto parsed = loom::parse_plan(file.readAll().toStdString());
  if (!parsed.ok()) {
    const auto& e = parsed.errors.front();
    showError(tr("Example plan is invalid"), QString::fromStdString(e.path + ": " + e.reason));
    return false;
  }
  // An example is a starting point: no file path, so saving asks where to put it.
  document_.reset(*parsed.plan);
  const ExamplePlan* example = examples_.find(QFileInfo(resource).fileName());
  planReplaced(example != nullptr ? example->look_at : QString());
  return true;
}

}  // namespace loom::ui
