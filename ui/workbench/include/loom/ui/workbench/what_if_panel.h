// The What-if dock: knobs (where to predict, replicas, micro-batches, bucket size, device
// speed, the link between hosts), the predicted figures beside the plan as it stands, a
// scaling chart to 1,024 devices, the layout search, whose layouts open in the
// designer, and the calibration they all stand on (CalibrationView). Every knob re-predicts the step at once (WhatIf); the calibration, the scaling
// chart and the search are computed off the GUI thread and shown when they arrive, the
// result of knobs since changed dropped; docs/prediction.md, "What-if".
#pragma once

#include <QWidget>

#include "loom/ui/workbench/what_if.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLayout;
class QPushButton;
class QSlider;
class QSpinBox;
class QTableWidget;
class QTabWidget;

namespace loom::ui {

namespace charts {
class ScalingChart;
}
class CalibrationView;

class WhatIfPanel : public QWidget {
  Q_OBJECT

 public:
  explicit WhatIfPanel(QWidget* parent = nullptr);

  WhatIf* model() { return &what_if_; }
  void setPlan(const Plan& plan);
  // The store changed (another store, a run finished or deleted): the calibration is read
  // again now if the panel is on screen, else when it is shown (reading every run of a
  // large store takes a while, so a hidden panel does not pay for it).
  void storeChanged(const QString& dbPath);

  // For tests and screenshots: the widgets as a user reaches them.
  QSpinBox* replicasBox() const { return replicas_; }
  QSlider* speedSlider() const { return speed_; }
  QComboBox* targetBox() const { return target_; }
  QLabel* figuresLabel() const { return figures_; }
  charts::ScalingChart* scalingChart() const { return chart_; }
  QTableWidget* searchTable() const { return search_table_; }
  CalibrationView* calibrationView() const { return calibration_view_; }
  // Starts the layout search for the plan on the current target; the table fills when it
  // is done (searchShown), unless a knob changed meanwhile.
  void searchLayouts();
  // Whether a calibration, scaling curve or search is being computed.
  bool working() const { return calibrating_ || scaling_busy_ || searching_; }
  // Loads a cluster file as the target; false (the error shown) when it is wrong.
  bool loadClusterFile(const QString& path);

 signals:
  // "Open" on a searched layout: the plan re-laid, for the designer.
  void openPlanRequested(const loom::Plan& plan);
  // Reset calibration in the Calibration tab: these runs should stop calibrating.
  void resetCalibrationRequested(const std::vector<std::int64_t>& runs);
  // "Show on timeline": the prediction on screen (model()'s), to store as a run and open.
  void showPredictionRequested();
  // The off-thread work arrived on screen (tests and screenshots wait for these).
  void calibrationShown();
  void scalingShown();
  void searchShown();

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  void recalibrate();
  QWidget* createKnobs();
  QLayout* createButtons();
  void knobsChanged();
  void chooseTarget(int index);
  void showFigures();
  void clearSearch();
  void showScaling();
  void showSearch(Expected<std::vector<predict::Candidate>> ranked, int devices);
  void syncKnobs();
  double speed() const;

  WhatIf what_if_;
  std::vector<predict::Candidate> searched_;
  QComboBox* target_ = nullptr;
  QSpinBox* replicas_ = nullptr;
  QSpinBox* microbatches_ = nullptr;
  QDoubleSpinBox* bucket_ = nullptr;
  QSlider* speed_ = nullptr;
  QLabel* speed_label_ = nullptr;
  QDoubleSpinBox* bandwidth_ = nullptr;
  QDoubleSpinBox* latency_ = nullptr;
  QLabel* figures_ = nullptr;
  charts::ScalingChart* chart_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  QTableWidget* search_table_ = nullptr;
  CalibrationView* calibration_view_ = nullptr;
  QPushButton* search_button_ = nullptr;
  bool syncing_ = false;
  QString db_path_;
  bool stale_ = false;
  // Off the GUI thread: a result whose generation is no longer current is dropped. The
  // scaling curve is recomputed once more after the one in flight when knobs changed
  // meanwhile (a drag asks for one per pixel; only the last matters).
  quint64 calibration_generation_ = 0, search_generation_ = 0;
  bool calibrating_ = false, searching_ = false, scaling_busy_ = false, scaling_pending_ = false;
  QString calibration_error_;
};

}  // namespace loom::ui
