#include "loom/ui/workbench/calibration_view.h"

#include <QAction>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>
#include <QToolButton>
#include <QVBoxLayout>

namespace loom::ui {

namespace {
QString qs(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

CalibrationView::CalibrationView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  auto* top = new QHBoxLayout;
  summary_ = new QLabel;
  summary_->setObjectName("CalibrationSummary");
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  top->addWidget(summary_, 1);
  buttons_ = new QWidget;
  auto* buttons = new QHBoxLayout(buttons_);
  buttons->setContentsMargins(0, 0, 0, 0);
  reset_ = new QPushButton(tr("Reset calibration…"));
  reset_->setToolTip(tr("Tag every run below \u201cnot calibrating\u201d: they stay stored to open and compare, and "
                        "predictions no longer use them"));
  reset_->setEnabled(false);
  connect(reset_, &QPushButton::clicked, this, [this] { emit resetRequested(runs_); });
  buttons->addWidget(reset_);
  top->addWidget(buttons_, 0, Qt::AlignTop);
  layout->addLayout(top);
  table_ = new QTableWidget(0, 2);
  table_->setObjectName("CalibrationCosts");
  table_->setHorizontalHeaderLabels({tr("Cost"), tr("Size: median ms")});
  table_->horizontalHeaderItem(0)->setToolTip(tr("What was timed, on which device and threads"));
  table_->horizontalHeaderItem(1)->setToolTip(
      tr("Each size measured (samples, parameters or bytes) and the median ms there; between sizes the cost is "
         "linear (docs/prediction.md, Calibration)"));
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setWordWrap(false);
  // The keys are long ("backward linear 784->256 @cpu 2t shared x2.00") and the dock narrow
  // at 1280x720: both columns share the width, a key elided in its middle so that its
  // device and threads show; each cell's whole text is its tooltip.
  table_->setTextElideMode(Qt::ElideMiddle);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
  layout->addWidget(table_, 1);
  summary_->setText(tr("Reading the calibration…"));
}

void CalibrationView::setCalibrateAction(QAction* action) {
  auto* button = new QToolButton;
  button->setDefaultAction(action);
  button->setToolButtonStyle(Qt::ToolButtonTextOnly);
  static_cast<QHBoxLayout*>(buttons_->layout())->insertWidget(0, button);
}

QString CalibrationView::summaryText(const predict::Calibration& c) const {
  if (c.runs.empty())
    return tr("<b>No calibration on %1.</b> Nothing can be predicted yet: Calibrate runs this plan briefly in the "
              "layouts prediction needs, or run plans here.")
        .arg(qs(c.host).toHtmlEscaped());
  QString text = tr("<b>%1</b>: %2 costs from %3 (%4)")
                     .arg(qs(c.host).toHtmlEscaped())
                     .arg(c.costs.size())
                     .arg(qs(predict::runs_text(c.runs)).toHtmlEscaped())
                     .arg(c.runs.size() == 1 ? tr("1 run") : tr("%1 runs").arg(c.runs.size()));
  if (!c.by_configuration.empty())
    text += tr("; %1 configurations measured").arg(c.by_configuration.size());
  for (const predict::HostLink& h : c.links)
    text += tr("<br>link %1 \u2194 %2: %3 us, %4 GB/s")
                .arg(qs(h.first).toHtmlEscaped(), qs(h.second).toHtmlEscaped())
                .arg(h.link.latency_us, 0, 'f', 0)
                .arg(h.link.bandwidth_gbs, 0, 'g', 4) +
            (h.shared_cores > 0 ? tr(", one machine sharing %1 cores").arg(h.shared_cores) : QString());
  if (c.contended_share)
    text += tr("<br>crowded server's share %1, fitted to %2 runs' staleness")
                .arg(*c.contended_share, 0, 'f', 2)
                .arg(c.share_runs.size());
  return text;
}

void CalibrationView::setCalibration(const predict::Calibration& calibration) {
  runs_ = calibration.runs;
  reset_->setEnabled(!runs_.empty());
  summary_->setText(summaryText(calibration));
  QString tip = tr("What predictions on this machine stand on: each cost's median at each size measured in "
                   "these stored runs. A configuration that was measured is predicted from its own runs first.");
  if (calibration.contended_share)
    tip += tr("\n\nA parameter server crowded onto too few cores gets this share of the free ones in its "
              "simulation, the share that gave the staleness measured by %1.")
               .arg(qs(predict::runs_text(calibration.share_runs)));
  summary_->setToolTip(tip);
  table_->setRowCount(int(calibration.costs.size()));
  int row = 0;
  for (const auto& [key, cost] : calibration.costs) {
    auto* what = new QTableWidgetItem(qs(key));
    what->setToolTip(qs(key));
    const QString points = qs(predict::points_text(cost));
    auto* at_sizes = new QTableWidgetItem(points);
    at_sizes->setToolTip(tr("%1\nfrom %2 measured spans").arg(points).arg(cost.observations));
    table_->setItem(row, 0, what);
    table_->setItem(row, 1, at_sizes);
    ++row;
  }
}

void CalibrationView::setError(const QString& message) {
  summary_->setText(tr("<b>The calibration could not be read:</b> %1").arg(message.toHtmlEscaped()));
}

}  // namespace loom::ui
