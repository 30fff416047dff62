// The layer designer: a toolbar (add a layer of a kind, remove, move up/down, add a
// branch to a parallel block), the editable layer table with delegates for type, stage
// and settings, the model's errors in the window's words, and what each device holds
// below it.
#pragma once

#include <QWidget>

#include "loom/ui/designer/plan_document.h"

class QLabel;
class QTableView;

namespace loom::ui {

class LayerListModel;

class DesignerPanel : public QWidget {
  Q_OBJECT

 public:
  explicit DesignerPanel(PlanDocument* doc, QWidget* parent = nullptr);

  QTableView* view() const { return view_; }
  LayerListModel* model() const { return model_; }
  QLabel* totalsLabel() const { return totals_; }
  QLabel* errorList() const { return errors_; }  // the model's errors in the window's words

 private:
  int currentRow() const;  // -1 without a selection
  void select(int row);
  void refreshTotals();

  PlanDocument* doc_;
  LayerListModel* model_;
  QTableView* view_;
  QLabel* totals_;
  QLabel* errors_ = nullptr;
};

}  // namespace loom::ui
