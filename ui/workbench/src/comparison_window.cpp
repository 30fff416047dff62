// ComparisonWindow (see comparison_window.h). The Metrics and Phases tables show
// ui/models' CompareMetricsModel and ComparePhasesModel.
#include "loom/ui/workbench/comparison_window.h"

#include <QApplication>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QFileDialog>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QPointer>
#include <QSpinBox>
#include <QScrollArea>
#include <QTabWidget>
#include <QTableView>
#include <QThreadPool>
#include <QVBoxLayout>

#include <algorithm>
#include <limits>

#include "loom/analysis/analysis.h"
#include "loom/core/plan.h"
#include "loom/store/run_store.h"
#include "loom/text/run_text.h"
#include "loom/ui/charts/overlay_charts.h"
#include "loom/ui/colors.h"
#include "loom/ui/compare_metrics_model.h"
#include "loom/ui/compare_phases_model.h"
#include "loom/ui/run_rows.h"
#include "loom/ui/text_format.h"
#include "loom/ui/timeline/kind_legend.h"
#include "loom/ui/timeline/timeline_view.h"
#include "loom/ui/workbench/report_file.h"
#include "loom/ui/workbench/run_views.h"

namespace loom::ui {

namespace {

QString qs(const std::string& text) { return QString::fromStdString(text); }

// What the legend and the band titles say of a run, read before its events.
struct RunHeader {
  qint64 id = 0;
  QString name, mode, status, error;
  double samples_per_step = 1;  // the plan's global batch
};

RunHeader read_header(loom::store::RunStore& store, qint64 id) {
  RunHeader h;
  h.id = id;
  auto run = store.load_run(id);
  if (!run.ok()) {
    h.error = qs(run.error().describe());
    return h;
  }
  h.name = qs(run->name);
  h.mode = qs(loom::analysis::run_mode(*run));
  // "one process on NVIDIA H200": what its ranks ran on, where they said.
  if (auto ranks = store.load_ranks(id); ranks.ok()) {
    const std::string device = loom::analysis::devices_short(loom::analysis::group_devices(*ranks));
    if (!device.empty()) h.mode += QStringLiteral(" on ") + qs(device);
  }
  h.status = qs(run_status_label(run->status));
  auto plan = loom::parse_plan(run->plan_json);
  if (plan.ok()) h.samples_per_step = static_cast<double>(plan.plan->training.batch);
  return h;
}

QString swatch_html(const QColor& color) {
  return QStringLiteral("<span style=\"color:%1\">&#9632;</span>").arg(color.name());
}

// "+1.23" / "-0.50"; below 0.005 ms "+0.00", never "-0.00".
QString signed_ms(double ms) {
  if (std::abs(ms) < 0.005) ms = 0;
  return (ms >= 0 ? QStringLiteral("+") : QString()) + QString::number(ms, 'f', 2);
}

// A table of a comparison's model: no row numbers, columns as wide as their contents
// (resized when the model is refilled), the last one not stretched.
QTableView* result_table(QAbstractItemModel* model, const char* name) {
  auto* table = new QTableView;
  table->setObjectName(QLatin1String(name));
  table->setModel(model);
  table->verticalHeader()->hide();
  table->horizontalHeader()->setStretchLastSection(false);
  QObject::connect(model, &QAbstractItemModel::modelReset, table, &QTableView::resizeColumnsToContents);
  return table;
}

// Band 0's window once aligned: from a little before the anchor, three step lengths
// (at least a millisecond) for a step, the longest run for time zero.
constexpr double kStepsShown = 3;
// A band's height: enough per lane to read its row label, plus the time axis.
constexpr int kLanePx = 17, kAxisPx = 36, kBandMinPx = 90;

const QString kLegendGap = QStringLiteral(" &nbsp;&nbsp;&nbsp; ");

}  // namespace

ComparisonWindow::ComparisonWindow(const QString& dbPath, const QList<qint64>& runIds, QWidget* parent)
    : QWidget(parent, Qt::Window), db_path_(dbPath), ids_(runIds) {
  setObjectName("ComparisonWindow");
  QStringList names;
  for (qint64 id : ids_) names << QStringLiteral("#%1").arg(id);
  setWindowTitle(tr("Compare runs %1 — Loom").arg(names.join(QStringLiteral(", "))));

  charts_ = new charts::OverlayCharts;
  phase_model_ = new ComparePhasesModel(this);
  phases_ = result_table(phase_model_, "PhaseTable");
  tabs_ = new QTabWidget;
  tabs_->setObjectName("ComparisonTabs");
  tabs_->addTab(charts_, tr("Training"));
  tabs_->addTab(createTimelinesTab(), tr("Timelines"));
  tabs_->addTab(createMetricsTab(), tr("Metrics"));
  tabs_->addTab(phases_, tr("Phases"));
  tabs_->setTabToolTip(0, tr("Training loss and test accuracy of every run, against step, training time or samples"));
  tabs_->setTabToolTip(1, tr("One timeline per run, zoomed and panned together, aligned on a step"));
  tabs_->setTabToolTip(2, tr("Figures side by side, each with its ratio to run A and the better run starred"));
  tabs_->setTabToolTip(3, tr("Median time per step of each phase, per rank role, and the difference to run A"));

  auto* save = new QPushButton(tr("Save report…"));
  save->setObjectName("SaveReport");
  save->setToolTip(tr("The comparison as one HTML or PDF file: runs, figures, curves, timelines, plans"));
  connect(save, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Save report"), QStringLiteral("comparison.html"),
                                                      tr("HTML (*.html);;PDF (*.pdf)"));
    if (path.isEmpty()) return;
    const QString error = saveReport(path);
    if (!error.isEmpty()) QMessageBox::warning(this, tr("Report not saved"), error);
  });
  auto* top = new QHBoxLayout;
  top->addWidget(createLegend(), 1);
  top->addWidget(save, 0, Qt::AlignTop);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(tabs_, 1);
  resize(1200, 800);

  startFeeds(dbPath);
  computeComparison();
}

ComparisonWindow::~ComparisonWindow() {
  for (Band& b : bands_) b.feed->stop();
}

// One wrapping label, so that six long run names fit a laptop screen.
QWidget* ComparisonWindow::createLegend() {
  legend_ = new QLabel;
  legend_->setObjectName("ComparisonLegend");
  legend_->setTextFormat(Qt::RichText);
  legend_->setWordWrap(true);
  for (int i = 0; i < ids_.size(); ++i) {
    legend_html_ << swatch_html(run_color(i)) + QStringLiteral(" %1 #%2").arg(run_letter(i)).arg(ids_[i]);
    legend_lines_ << QStringLiteral("%1 #%2").arg(run_letter(i)).arg(ids_[i]);
  }
  legend_->setText(legend_html_.join(kLegendGap));
  return legend_;
}

QWidget* ComparisonWindow::createTimelinesTab() {
  auto* tab = new QWidget;
  QLayout* controls = createAlignControls();
  kinds_ = new timeline::KindLegend;
  kinds_->setObjectName("ComparisonKinds");
  // The bands stack in a scroll area: each keeps enough height per lane to read its rows,
  // and the window scrolls when six runs of many ranks need more than the screen.
  auto* stack = new QWidget;
  auto* stack_layout = new QVBoxLayout(stack);
  stack_layout->setContentsMargins(0, 0, 0, 0);
  for (int i = 0; i < ids_.size(); ++i) stack_layout->addWidget(createBand(i), 1);
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(stack);
  auto* layout = new QVBoxLayout(tab);
  layout->addLayout(controls);
  layout->addWidget(kinds_);
  layout->addWidget(scroll, 1);
  return tab;
}

// Where the bands line up: the start of a chosen step, or each run's first event.
QLayout* ComparisonWindow::createAlignControls() {
  align_choice_ = new QComboBox;
  align_choice_->setObjectName("AlignChoice");
  align_choice_->addItems({tr("start of step"), tr("time zero")});
  align_choice_->setToolTip(tr("Where the bands line up: the start of the chosen step in every run, "
                               "or each run's first event"));
  align_step_ = new QSpinBox;
  align_step_->setObjectName("AlignStep");
  align_step_->setRange(0, std::numeric_limits<int>::max());
  align_step_->setValue(loom::analysis::kWarmupSteps);  // the first steady step
  align_step_->setToolTip(tr("The step whose start coincides in every band (step 0 is warm-up)"));
  auto realign = [this] {
    setAlignment(align_choice_->currentIndex() == 0 ? Align::StepStart : Align::TimeZero, align_step_->value());
  };
  connect(align_choice_, &QComboBox::currentIndexChanged, this, realign);
  connect(align_step_, &QSpinBox::valueChanged, this, realign);
  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Align on")));
  controls->addWidget(align_choice_);
  controls->addWidget(align_step_);
  auto* hint = new QLabel(tr("Zoom (wheel) or drag any band: the others follow, relative to the alignment."));
  hint->setEnabled(false);
  controls->addWidget(hint, 1);
  return controls;
}

// One run's band: its title (colour, letter, id) over its timeline, fed live from the store.
QWidget* ComparisonWindow::createBand(int index) {
  Band b;
  b.id = ids_[index];
  b.feed = new RunFeed(this);
  b.feed->setBreakdownWanted(false);  // the metrics table has compare_runs' figures
  b.view = new timeline::TimelineView;
  b.view->setObjectName(QStringLiteral("ComparisonBand%1").arg(index));
  b.view->setHeaderVisible(false);  // one legend and one step control for every band
  b.view->setMinimumHeight(kBandMinPx);
  b.title = new QLabel(swatch_html(run_color(index)) + QStringLiteral(" %1 #%2").arg(run_letter(index)).arg(b.id));
  b.title->setTextFormat(Qt::RichText);
  auto* box = new QWidget;
  auto* column = new QVBoxLayout(box);
  column->setContentsMargins(0, 2, 0, 0);
  column->setSpacing(0);
  column->addWidget(b.title);
  column->addWidget(b.view, 1);
  connect(b.view, &timeline::TimelineView::viewportChanged, this, [this, index] { couple(index); });
  bands_.push_back(b);
  return box;
}

QWidget* ComparisonWindow::createMetricsTab() {
  auto* tab = new QWidget;
  metric_model_ = new CompareMetricsModel(this);
  metrics_ = result_table(metric_model_, "MetricsTable");
  target_ = new QDoubleSpinBox;
  target_->setObjectName("TargetAccuracy");
  target_->setRange(0, 100);
  target_->setDecimals(1);
  target_->setSuffix(QStringLiteral(" %"));
  target_->setSpecialValueText(tr("off"));
  target_->setKeyboardTracking(false);
  target_->setToolTip(tr("A test accuracy: adds the training time and the steps each run took to reach it"));
  connect(target_, &QDoubleSpinBox::valueChanged, this,
          [this](double pct) { setTargetAccuracy(pct > 0 ? pct / 100.0 : std::nan("")); });
  metrics_note_ = new QLabel(tr("Computing…"));
  metrics_note_->setWordWrap(true);
  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Target test accuracy")));
  controls->addWidget(target_);
  controls->addWidget(metrics_note_, 1);
  step_split_ = new QLabel;
  step_split_->setObjectName("StepTimeSplit");
  step_split_->setTextFormat(Qt::RichText);
  step_split_->setWordWrap(true);
  step_split_->setToolTip(tr("The critical path walks back from the rank whose step ends last, through the "
                             "messages and collectives that held it up (Help > Glossary: critical path)"));
  auto* layout = new QVBoxLayout(tab);
  layout->addLayout(controls);
  layout->addWidget(metrics_, 1);
  layout->addWidget(step_split_);
  return tab;
}

// Reads each run's record for the legend, then starts one feed per run: charts need the
// runs' batch sizes before their first metrics arrive.
void ComparisonWindow::startFeeds(const QString& dbPath) {
  QPointer<ComparisonWindow> self(this);
  const std::string path = dbPath.toStdString();
  const QList<qint64> ids = ids_;
  QThreadPool::globalInstance()->start([self, path, ids] {
    std::vector<RunHeader> headers;
    auto store = loom::store::RunStore::open(path);
    for (qint64 id : ids) {
      if (store.ok()) {
        headers.push_back(read_header(*store, id));
      } else {
        headers.push_back(RunHeader{id, {}, {}, {}, qs(store.error().describe())});
      }
    }
    QMetaObject::invokeMethod(qApp, [self, headers] {
      if (!self) return;
      std::vector<charts::OverlayCharts::Run> runs;
      for (std::size_t i = 0; i < headers.size(); ++i) {
        const RunHeader& h = headers[i];
        const int index = static_cast<int>(i);
        const QString label = QStringLiteral("%1 #%2 %3").arg(run_letter(index)).arg(h.id).arg(h.name);
        const QString detail = h.error.isEmpty() ? QStringLiteral("%1 · %2").arg(h.mode, h.status) : h.error;
        const QString text = swatch_html(run_color(index)) + QStringLiteral(" <b>%1</b> — %2")
                                                                  .arg(label.toHtmlEscaped(), detail.toHtmlEscaped());
        self->legend_html_[int(i)] = text;
        self->legend_lines_[int(i)] = label + QStringLiteral(" — ") + detail;
        self->bands_[i].title->setText(text);
        runs.push_back({label, run_color(index), h.samples_per_step});
      }
      self->legend_->setText(self->legend_html_.join(kLegendGap));
      self->charts_->setRuns(runs);
      for (std::size_t i = 0; i < self->bands_.size(); ++i) {
        Band& b = self->bands_[i];
        connect(b.feed, &RunFeed::batchReady, self, [self, i](std::shared_ptr<const FeedBatch> batch) {
          if (self && batch->generation == self->bands_[i].feed->generation()) self->onBatch(int(i), *batch);
        });
        b.feed->follow(self->db_path_, b.id);
      }
    });
  });
}

void ComparisonWindow::onBatch(int index, const FeedBatch& batch) {
  Band& b = bands_[std::size_t(index)];
  if (batch.first && !batch.plan_json.isEmpty()) b.view->setLayerNames(plan_layer_names(batch.plan_json));
  if (batch.ranks_changed) b.view->setClocks(batch.ranks);
  for (const RankEvents& r : batch.events) {
    b.view->appendEvents(r.rank, r.events);
    // Training time starts at each rank's first step (setup is not training).
    if (b.origin_set[r.rank]) continue;
    for (const auto& e : r.events) {
      if (e.kind != loom::trace::EventKind::Step) continue;
      charts_->setOrigin(index, r.rank, e.start_ns);
      b.origin_set[r.rank] = true;
      break;
    }
  }
  if (!batch.metrics.empty()) charts_->appendMetrics(index, batch.metrics);
  if (batch.finished) b.finished = true;
  if (!batch.events.empty()) fitBandHeights();
  // Align as soon as every band can be (a live run may never finish).
  if (!aligned_once_) {
    bool every_anchor = true;
    for (int i = 0; i < bandCount(); ++i)
      every_anchor = every_anchor && std::isfinite(anchorNs(i)) && band(i)->data().event_count() > 0;
    if (runsLoaded() || every_anchor) setAlignment(align_, alignStep());
  }
  if (batch.finished && runsLoaded()) {
    charts_->replotNow();
    emit allRunsLoaded();
  }
}

// Every band tall enough for its lanes; the legend names the kinds of every band.
void ComparisonWindow::fitBandHeights() {
  std::uint32_t kinds = 0;
  for (const Band& b : bands_) {
    const auto lanes = static_cast<int>(b.view->data().lanes().size());
    b.view->setMinimumHeight(std::max(kBandMinPx, kLanePx * lanes + kAxisPx));
    kinds |= b.view->data().kinds_present();
  }
  kinds_->setKinds(kinds);
}

bool ComparisonWindow::runsLoaded() const {
  return std::all_of(bands_.begin(), bands_.end(), [](const Band& b) { return b.finished; });
}

int ComparisonWindow::alignStep() const { return align_step_->value(); }

double ComparisonWindow::anchorNs(int index) const {
  if (align_ == Align::TimeZero) return 0;
  const auto range = bands_.at(std::size_t(index)).view->data().step_range(alignStep());
  return range ? static_cast<double>(range->begin_ns) : std::nan("");
}

void ComparisonWindow::setAlignment(Align align, int step) {
  align_ = align;
  {
    const QSignalBlocker block_choice(align_choice_), block_step(align_step_);
    align_choice_->setCurrentIndex(align == Align::StepStart ? 0 : 1);
    align_step_->setValue(step);
    align_step_->setEnabled(align == Align::StepStart);
  }
  // The reference: the first band that has the anchor.
  int reference = -1;
  for (int i = 0; i < bandCount() && reference < 0; ++i)
    if (std::isfinite(anchorNs(i)) && band(i)->data().event_count() > 0) reference = i;
  if (reference < 0) return;
  const timeline::TimelineView* view = band(reference);
  double width = 0;
  if (align == Align::StepStart) {
    const auto range = view->data().step_range(step);
    width = std::max(kStepsShown * double(range->end_ns - range->begin_ns), 1e6);
  } else {
    for (const Band& b : bands_) width = std::max(width, double(b.view->data().end_ns()));
    width = std::max(width, 1e6);
  }
  const double anchor = anchorNs(reference);
  aligned_once_ = true;
  // Setting band `reference` couples the others through its viewportChanged.
  band(reference)->setViewport({anchor - 0.05 * width, anchor + width, view->viewport().width_px});
}

// A band moved: every other band shows the same window relative to its own anchor.
void ComparisonWindow::couple(int source) {
  if (coupling_ || !aligned_once_) return;
  const double source_anchor = anchorNs(source);
  if (!std::isfinite(source_anchor)) return;
  coupling_ = true;
  const timeline::Viewport v = band(source)->viewport();
  for (int i = 0; i < bandCount(); ++i) {
    const double anchor = anchorNs(i);
    if (i == source || !std::isfinite(anchor)) continue;
    band(i)->setViewport(timeline::coupled_viewport(v, source_anchor, anchor, band(i)->viewport().width_px));
  }
  coupling_ = false;
}

QString ComparisonWindow::legendText() const { return legend_lines_.join(QLatin1Char('\n')); }

QString ComparisonWindow::saveReport(const QString& path) {
  QApplication::setOverrideCursor(Qt::WaitCursor);
  const QString error = write_report_file(db_path_, std::vector<std::int64_t>(ids_.begin(), ids_.end()),
                                          target_accuracy_, alignStep(), path);
  QApplication::restoreOverrideCursor();
  return error;
}

void ComparisonWindow::setTargetAccuracy(double fraction) {
  target_accuracy_ = fraction;
  {
    const QSignalBlocker block(target_);
    target_->setValue(std::isfinite(fraction) ? fraction * 100.0 : 0.0);
  }
  computeComparison();
}

// compare_runs on the thread pool with its own connection; a newer request wins.
void ComparisonWindow::computeComparison() {
  QPointer<ComparisonWindow> self(this);
  const quint64 generation = ++compare_generation_;
  const std::string path = db_path_.toStdString();
  std::vector<std::int64_t> ids(ids_.begin(), ids_.end());
  loom::analysis::CompareOptions options;
  options.target_accuracy = target_accuracy_;
  comparison_shown_ = false;
  metrics_note_->setText(tr("Computing…"));
  QThreadPool::globalInstance()->start([self, path, ids, options, generation] {
    auto store = loom::store::RunStore::open(path);
    loom::Expected<loom::analysis::Comparison> result =
        store.ok() ? loom::analysis::compare_runs(*store, ids, options)
                   : loom::Expected<loom::analysis::Comparison>(store.error());
    QMetaObject::invokeMethod(qApp, [self, result = std::move(result), generation] {
      if (self && generation == self->compare_generation_) self->showComparison(result);
    });
  });
}

void ComparisonWindow::showComparison(const loom::Expected<loom::analysis::Comparison>& result) {
  comparison_shown_ = true;
  if (!result.ok()) {
    comparison_error_ = qs(result.error().describe());
    metrics_note_->setText(tr("Cannot compare: %1").arg(comparison_error_));
    metric_model_->clear();
    phase_model_->clear();
    emit comparisonReady();
    return;
  }
  comparison_error_.clear();
  metric_model_->setComparison(*result);
  phase_model_->setComparison(*result);
  showMetricsNote(*result);
  emit comparisonReady();
}

// The figures no run has (staleness of synchronous runs, bubbles without pipelines) are
// left out of the table and counted here.
void ComparisonWindow::showMetricsNote(const loom::analysis::Comparison& c) {
  const int hidden = metric_model_->hiddenCount();
  QString note = tr("Ratios are to run A. ★ marks the better run where one is better.");
  if (hidden == 1) note += tr(" One figure no run has is left out.");
  if (hidden > 1) note += tr(" %1 figures no run has are left out.").arg(hidden);
  metrics_note_->setText(note);
  step_split_->setText(stepTimeSplit(c));
}

// Where the step time went: each run's critical path per step against run A's, split into
// the parts the path is made of (analysis::critical_path): work on the path, exposed
// communication, waiting for a late rank, time descheduled, and untraced gaps.
QString ComparisonWindow::stepTimeSplit(const loom::analysis::Comparison& c) const {
  const auto split = loom::analysis::step_time_split(c);
  if (split.empty()) return tr("Where the step time went: no critical path to compare.");
  double base = std::nan("");
  for (const auto& row : c.metrics)
    if (row.key == "path_ms") base = row.values[0];
  QStringList lines{tr("<b>Where the step time went</b> (critical path per step, against run A's %1 ms):")
                        .arg(qs(loom::text::format_compare_value(base)))};
  for (const auto& d : split) {
    QStringList parts;
    for (const auto& [name, ms] : d.parts) parts << qs(name) + QLatin1Char(' ') + signed_ms(ms);
    lines << QStringLiteral("%1 %2: %3 ms = %4")
                 .arg(swatch_html(run_color(d.run)), run_letter(d.run), signed_ms(d.total_ms), parts.join(QStringLiteral(", ")));
  }
  return lines.join(QStringLiteral("<br>"));
}

}  // namespace loom::ui
