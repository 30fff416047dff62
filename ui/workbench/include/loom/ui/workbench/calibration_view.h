// The What-if dock's Calibration tab: what predictions on this machine stand on, as
// `loom-cli calibration` prints it (each cost with the median ms measured at each size,
// the runs it came from, the configurations measured, links between hosts), with Run >
// Calibrate as a button and Reset calibration, which asks for resetRequested.
#pragma once

#include <QWidget>

#include "loom/predict/calibration.h"

class QAction;
class QLabel;
class QPushButton;
class QTableWidget;

namespace loom::ui {

class CalibrationView : public QWidget {
  Q_OBJECT

 public:
  explicit CalibrationView(QWidget* parent = nullptr);

  // The button beside Reset follows this action (text, enabled, tooltip): Run > Calibrate.
  void setCalibrateAction(QAction* action);
  void setCalibration(const predict::Calibration& calibration);
  // The calibration could not be read: said above the table, which keeps the last one.
  void setError(const QString& message);

  QLabel* summaryLabel() const { return summary_; }
  QTableWidget* costsTable() const { return table_; }
  QPushButton* resetButton() const { return reset_; }

 signals:
  // Reset calibration: every run this calibration came from should stop calibrating.
  void resetRequested(const std::vector<std::int64_t>& runs);

 private:
  QString summaryText(const predict::Calibration& calibration) const;

  QLabel* summary_ = nullptr;
  QTableWidget* table_ = nullptr;
  QPushButton* reset_ = nullptr;
  QWidget* buttons_ = nullptr;
  std::vector<std::int64_t> runs_;
};

}  // namespace loom::ui
