// WhatIfPanel (see what_if_panel.h): knobs on the left, the figures in the middle, the
// scaling chart and the searched layouts in tabs on the right, for a wide, low dock.
#include "loom/ui/workbench/what_if_panel.h"

#include <QApplication>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPointer>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QThreadPool>

#include <cmath>
#include <functional>
#include <memory>
#include <utility>

#include "loom/core/model_info.h"
#include "loom/ui/charts/scaling_chart.h"
#include "loom/ui/workbench/calibration_view.h"

namespace loom::ui {

namespace {

constexpr int kScaleTo = 1024;

// The speed slider runs from x1/4 to x4 in steps of a quarter octave.
constexpr int kSpeedSteps = 8;
double speed_of(int slider) { return std::pow(2.0, double(slider) / 4.0); }

QString ms(double v) { return QString::number(v, 'f', v < 10 ? 3 : 1); }

std::int64_t peak(const predict::Prediction& p) {
  std::int64_t most = 0;
  for (const predict::RankMemory& m : p.memory) most = std::max(most, m.total());
  return most;
}

// Runs `work` on the thread pool and hands its result to `done` on the GUI thread, unless
// the panel is gone by then.
template <class Result>
void off_gui_thread(QWidget* panel, std::function<Result()> work, std::function<void(Result)> done) {
  QPointer<QWidget> self(panel);
  QThreadPool::globalInstance()->start([self, work = std::move(work), done = std::move(done)] {
    auto result = std::make_shared<Result>(work());
    QMetaObject::invokeMethod(qApp, [self, done, result] {
      if (self) done(std::move(*result));
    });
  });
}

QString change(double now, double before) {
  if (before <= 0) return {};
  return QStringLiteral(" (%1%2%)").arg(now >= before ? "+" : "").arg(100.0 * (now / before - 1.0), 0, 'f', 1);
}

}  // namespace

WhatIfPanel::WhatIfPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(createKnobs());
  figures_ = new QLabel;
  figures_->setObjectName("WhatIfFigures");
  figures_->setTextFormat(Qt::RichText);
  figures_->setWordWrap(true);
  figures_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  figures_->setMinimumWidth(160);
  figures_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(figures_, 2);
  tabs_ = new QTabWidget;
  auto* tabs = tabs_;
  chart_ = new charts::ScalingChart;
  tabs->addTab(chart_, tr("Scaling"));
  search_table_ = new QTableWidget(0, 6);
  search_table_->setObjectName("WhatIfLayouts");
  search_table_->setHorizontalHeaderLabels({tr("Layout"), tr("Step ms"), tr("Samples/s"), tr("Peak memory"), tr("Why slower"), {}});
  search_table_->verticalHeader()->setVisible(false);
  search_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  search_table_->setWordWrap(false);  // one line a layout; the whole of a cell in its tooltip
  search_table_->horizontalHeader()->setSectionResizeMode(4, QHeaderView::Stretch);
  tabs->addTab(search_table_, tr("Layouts"));
  calibration_view_ = new CalibrationView;
  tabs->addTab(calibration_view_, tr("Calibration"));
  connect(calibration_view_, &CalibrationView::resetRequested, this, &WhatIfPanel::resetCalibrationRequested);
  layout->addWidget(tabs, 5);
  connect(&what_if_, &WhatIf::predicted, this, &WhatIfPanel::showFigures);
}

QWidget* WhatIfPanel::createKnobs() {
  auto* box = new QWidget;
  auto* form = new QFormLayout(box);
  form->setContentsMargins(0, 0, 0, 0);
  form->setVerticalSpacing(2);
  target_ = new QComboBox;
  target_->addItems({tr("this machine"), tr("hosts like this one"), tr("cluster file…")});
  target_->setToolTip(tr("This machine: its cores and the messages its runs measured. Hosts like this one: one rank a "
                         "host, joined by the link below. Cluster file: hosts, devices and links from a file "
                         "(resources/clusters/)"));
  connect(target_, &QComboBox::activated, this, &WhatIfPanel::chooseTarget);
  form->addRow(tr("Predict on"), target_);
  replicas_ = new QSpinBox;
  replicas_->setRange(1, 4096);
  replicas_->setToolTip(tr("Data-parallel replicas; the global batch stays as the plan says"));
  microbatches_ = new QSpinBox;
  microbatches_->setRange(1, 256);
  bucket_ = new QDoubleSpinBox;
  bucket_->setRange(0.01, 1024);
  bucket_->setSuffix(tr(" MB"));
  speed_ = new QSlider(Qt::Horizontal);
  speed_->setRange(-kSpeedSteps, kSpeedSteps);
  speed_->setToolTip(tr("Every compute cost divided by this: a faster or slower device than the calibration's"));
  speed_label_ = new QLabel;
  auto* speed_row = new QHBoxLayout;
  speed_row->addWidget(speed_, 1);
  speed_row->addWidget(speed_label_);
  bandwidth_ = new QDoubleSpinBox;
  bandwidth_->setRange(0.001, 1000);
  bandwidth_->setDecimals(3);
  bandwidth_->setSuffix(tr(" GB/s"));
  latency_ = new QDoubleSpinBox;
  latency_->setRange(0, 100000);
  latency_->setSuffix(tr(" µs"));
  auto* link_row = new QHBoxLayout;
  link_row->addWidget(bandwidth_);
  link_row->addWidget(latency_);
  form->addRow(tr("Replicas"), replicas_);
  form->addRow(tr("Micro-batches"), microbatches_);
  form->addRow(tr("Buckets"), bucket_);
  form->addRow(tr("Device speed"), speed_row);
  form->addRow(tr("Link"), link_row);
  form->addRow(createButtons());
  // Narrow fields: the dock shares a 1280-pixel window with the designer column.
  for (QWidget* w : std::initializer_list<QWidget*>{replicas_, microbatches_, bucket_}) w->setMaximumWidth(110);
  for (QWidget* w : std::initializer_list<QWidget*>{bandwidth_, latency_}) w->setMaximumWidth(105);
  target_->setMaximumWidth(215);
  for (QSpinBox* s : {replicas_, microbatches_}) connect(s, &QSpinBox::valueChanged, this, &WhatIfPanel::knobsChanged);
  for (QDoubleSpinBox* s : {bucket_, bandwidth_, latency_}) connect(s, &QDoubleSpinBox::valueChanged, this, &WhatIfPanel::knobsChanged);
  connect(speed_, &QSlider::valueChanged, this, &WhatIfPanel::knobsChanged);
  syncKnobs();
  return box;
}

QLayout* WhatIfPanel::createButtons() {
  auto* buttons = new QHBoxLayout;
  auto* search = search_button_ = new QPushButton(tr("Search layouts"));
  search->setToolTip(tr("Predict every layout of this model and batch on these devices and rank them"));
  connect(search, &QPushButton::clicked, this, &WhatIfPanel::searchLayouts);
  auto* show = new QPushButton(tr("Show on timeline"));
  show->setToolTip(tr("Store this prediction as a run (predicted, not measured) and open it"));
  connect(show, &QPushButton::clicked, this, [this] {
    if (what_if_.variedPlan() && what_if_.prediction()) emit showPredictionRequested();
  });
  buttons->addWidget(search);
  buttons->addWidget(show);
  return buttons;
}

double WhatIfPanel::speed() const { return speed_of(speed_->value()); }

void WhatIfPanel::setPlan(const Plan& plan) {
  what_if_.setPlan(plan);
  syncKnobs();
  showScaling();
}

void WhatIfPanel::storeChanged(const QString& dbPath) {
  db_path_ = dbPath;
  stale_ = true;
  if (isVisible()) recalibrate();
}

void WhatIfPanel::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (stale_) recalibrate();
}

// Every stored run of this host is read: off the GUI thread, the figures keep the old
// calibration until the new one arrives.
void WhatIfPanel::recalibrate() {
  stale_ = false;
  calibrating_ = true;
  const quint64 generation = ++calibration_generation_;
  off_gui_thread<Expected<predict::Calibration>>(
      this, [path = db_path_] { return WhatIf::readCalibration(path); },
      [this, generation](Expected<predict::Calibration> calibration) {
        if (generation != calibration_generation_) return;  // another store since
        calibrating_ = false;
        calibration_error_ = calibration.ok() ? QString() : QString::fromStdString(calibration.error().describe());
        if (calibration.ok()) {
          calibration_view_->setCalibration(*calibration);
          what_if_.setCalibration(std::move(*calibration));
          syncKnobs();  // the link may now be the one runs across hosts measured
        } else {
          calibration_view_->setError(calibration_error_);
          showFigures();
        }
        showScaling();
        emit calibrationShown();
      });
}

// The widgets show the model's knobs (after a new plan), without re-predicting per widget.
void WhatIfPanel::syncKnobs() {
  syncing_ = true;
  const WhatIf::Knobs& k = what_if_.knobs();
  replicas_->setValue(k.replicas);
  microbatches_->setValue(k.microbatches);
  bucket_->setValue(k.bucket_mb);
  speed_->setValue(int(std::lround(4 * std::log2(k.device_speed))));
  bandwidth_->setValue(k.bandwidth_gbs);
  latency_->setValue(k.latency_us);
  speed_label_->setText(QStringLiteral("x%1").arg(speed(), 0, 'g', 3));
  const bool links = what_if_.target() == WhatIf::Target::HostsLikeThis;
  bandwidth_->setEnabled(links);
  latency_->setEnabled(links);
  const QString source = what_if_.linkSource();
  const QString tip = source.isEmpty() ? tr("The link between hosts like this one: bandwidth and latency")
                                       : tr("Learnt from this machine's runs across hosts: %1").arg(source);
  for (QWidget* w : std::initializer_list<QWidget*>{bandwidth_, latency_}) w->setToolTip(tip);
  syncing_ = false;
}

void WhatIfPanel::knobsChanged() {
  if (syncing_) return;
  speed_label_->setText(QStringLiteral("x%1").arg(speed(), 0, 'g', 3));
  WhatIf::Knobs k = what_if_.knobs();
  k.replicas = replicas_->value(), k.microbatches = microbatches_->value(), k.bucket_mb = bucket_->value();
  k.device_speed = speed();
  // The link fields may show a learnt link rounded: only a change of their own sets it.
  if (sender() == bandwidth_ || sender() == latency_) k.bandwidth_gbs = bandwidth_->value(), k.latency_us = latency_->value();
  what_if_.setKnobs(k);
  showScaling();
}

void WhatIfPanel::chooseTarget(int index) {
  if (index == 2) {
    const QString path = QFileDialog::getOpenFileName(this, tr("Cluster file"), {}, tr("Cluster files (*.json)"));
    if (path.isEmpty() || !loadClusterFile(path)) target_->setCurrentIndex(int(what_if_.target()));
    return;
  }
  what_if_.setTarget(index == 1 ? WhatIf::Target::HostsLikeThis : WhatIf::Target::ThisMachine);
  syncKnobs();
  showScaling();
}

bool WhatIfPanel::loadClusterFile(const QString& path) {
  if (!what_if_.loadCluster(path)) return false;
  target_->setItemText(2, tr("cluster: %1").arg(what_if_.clusterName()));
  target_->setCurrentIndex(2);
  syncKnobs();
  showScaling();
  return true;
}

void WhatIfPanel::clearSearch() {
  ++search_generation_;  // a search in flight was for other knobs
  searching_ = false;
  search_button_->setEnabled(true);
  if (search_table_->rowCount() == 0) return;
  searched_.clear();
  search_table_->setRowCount(0);
  tabs_->setTabText(1, tr("Layouts"));
  tabs_->setCurrentWidget(chart_);
}

void WhatIfPanel::showFigures() {
  clearSearch();  // searched for other knobs
  const auto& p = what_if_.prediction();
  const QString calibration_note =
      calibration_error_.isEmpty() ? QString() : tr("<br><span style='color:gray'>The calibration could not be read again: %1</span>").arg(calibration_error_.toHtmlEscaped());
  if (!p) {
    figures_->setText(tr("<b>No prediction.</b><br>%1").arg(what_if_.error().toHtmlEscaped()) + calibration_note);
    return;
  }
  const auto& base = what_if_.baseline();
  const int count = int(p->memory.size());
  const QString rank_count = count == 1 ? tr("1 rank") : tr("%1 ranks").arg(count);
  const QString ranks = p->threads_per_rank > 0 ? tr("%1, %2 BLAS threads each").arg(rank_count).arg(p->threads_per_rank)
                                                : tr("%1 on roofline devices").arg(rank_count);
  QString text = tr("<b>Step %1 ms</b>%2<br>%3 samples/s%4<br>peak memory %5 a rank<br>%6<br>slowest rank: %7")
                     .arg(ms(p->step_ms), base ? change(p->step_ms, base->step_ms) : QString())
                     .arg(p->samples_per_s, 0, 'f', 0)
                     .arg(base ? change(p->samples_per_s, base->samples_per_s) : QString())
                     .arg(QString::fromStdString(format_bytes(peak(*p))), ranks,
                          QString::fromStdString(predict::step_breakdown(*p)).toHtmlEscaped());
  figures_->setText(text + calibration_note);
  // The narrow column keeps the figures; how they were made is the tooltip, rich text so
  // that Qt wraps it: a grouped note names every layer it covers on one line.
  QStringList about{tr("Changes in brackets are against the plan as it stands. Predicted in %1 ms from %2 stored runs.")
                        .arg(what_if_.lastPredictionMs(), 0, 'f', 1)
                        .arg(what_if_.calibrationRuns())};
  for (const std::string& n : predict::grouped_notes(p->notes)) about << QString::fromStdString(n).toHtmlEscaped();
  figures_->setToolTip("<p>" + about.join("</p><p>") + "</p>");
}

void WhatIfPanel::showScaling() {
  if (scaling_busy_) {
    scaling_pending_ = true;
    return;
  }
  scaling_busy_ = true;
  const QString where = target_->currentIndex() == 0 ? tr("this machine") : target_->currentText();
  off_gui_thread<Expected<std::vector<predict::ScalePoint>>>(
      this, what_if_.scalingWork(kScaleTo), [this, where](Expected<std::vector<predict::ScalePoint>> curve) {
        scaling_busy_ = false;
        if (std::exchange(scaling_pending_, false)) return showScaling();  // the knobs moved on
        std::vector<charts::ScalingPoint> points;
        if (curve.ok())
          for (const predict::ScalePoint& p : *curve) points.push_back({p.devices, p.samples_per_s, p.efficiency});
        chart_->setPoints(points, tr("Scaling on %1 (predicted)").arg(where));
        tabs_->setTabToolTip(0, tr("Predicted samples/s for 1, 2, 4, ... replicas, each keeping the plan's per-replica batch, "
                                   "beside the ideal line and the efficiency"));
        emit scalingShown();
      });
}

void WhatIfPanel::searchLayouts() {
  clearSearch();
  searching_ = true;
  search_button_->setEnabled(false);
  const quint64 generation = search_generation_;
  off_gui_thread<Expected<std::vector<predict::Candidate>>>(
      this, what_if_.searchWork(), [this, generation, devices = what_if_.searchDevices()](Expected<std::vector<predict::Candidate>> ranked) {
        if (generation != search_generation_) return;  // the knobs changed meanwhile
        searching_ = false;
        search_button_->setEnabled(true);
        showSearch(std::move(ranked), devices);
        emit searchShown();
      });
}

void WhatIfPanel::showSearch(Expected<std::vector<predict::Candidate>> ranked, int devices) {
  searched_ = ranked.ok() ? std::move(*ranked) : std::vector<predict::Candidate>{};
  search_table_->setRowCount(0);
  if (!ranked.ok()) {
    search_table_->insertRow(0);
    search_table_->setItem(0, 0, new QTableWidgetItem(tr("No layout predicted: %1").arg(QString::fromStdString(ranked.error().describe()))));
    search_table_->setSpan(0, 0, 1, search_table_->columnCount());
  }
  int row = 0;
  for (const predict::Candidate& c : searched_) {
    if (!c.left_out.empty() || row == 5) break;
    search_table_->insertRow(row);
    auto set = [&](int column, const QString& text) { search_table_->setItem(row, column, new QTableWidgetItem(text)); };
    set(0, QString::fromStdString(c.choice.describe()));
    search_table_->item(row, 0)->setToolTip(search_table_->item(row, 0)->text());
    set(1, ms(c.prediction.step_ms));
    set(2, QString::number(c.prediction.samples_per_s, 'f', 0));
    set(3, QString::fromStdString(format_bytes(c.peak_memory)));
    set(4, row == 0 ? tr("the fastest") : QString::fromStdString(predict::why_slower(searched_.front().prediction, c.prediction)));
    search_table_->item(row, 4)->setToolTip(search_table_->item(row, 4)->text());
    auto* open = new QPushButton(tr("Open"));
    open->setToolTip(tr("Open this layout in the designer"));
    const predict::LayoutChoice choice = c.choice;
    connect(open, &QPushButton::clicked, this, [this, choice] {
      if (auto plan = predict::with_layout(*what_if_.variedPlan(), choice); plan.ok()) emit openPlanRequested(*plan);
    });
    search_table_->setCellWidget(row, 5, open);
    ++row;
  }
  search_table_->resizeColumnsToContents();
  search_table_->setColumnWidth(0, std::min(search_table_->columnWidth(0), 250));
  search_table_->horizontalHeader()->setSectionResizeMode(4, QHeaderView::Stretch);
  tabs_->setTabText(1, tr("Layouts on %1 devices").arg(devices));
  tabs_->setCurrentWidget(search_table_);
}

}  // namespace loom::ui
