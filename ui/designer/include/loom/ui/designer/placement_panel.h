// The placement grid: layers down, devices across, each column headed in its device's
// colour. Pressing on a cell and dragging over others paints those layers onto the
// devices' stages; the whole stroke is one undo step. The placement errors (a stage
// without layers, a layer out of model order) are listed under the grid in the window's
// words, and the model marks the cells they concern.
#pragma once

#include <QWidget>

#include "loom/ui/designer/plan_document.h"

class QTableView;

namespace loom::ui {

class PlacementModel;

class PlacementPanel : public QWidget {
  Q_OBJECT

 public:
  explicit PlacementPanel(PlanDocument* doc, QWidget* parent = nullptr);

  QTableView* view() const { return view_; }
  PlacementModel* model() const { return model_; }

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void paintAt(const QPoint& viewportPos);

  PlacementModel* model_;
  QTableView* view_;
  bool painting_ = false;
};

}  // namespace loom::ui
