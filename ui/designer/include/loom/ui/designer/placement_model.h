// Which device runs which layer: rows are layers (pre-order, branch layers included),
// columns are ranks. A cell is checked when the layer's stage is that rank's stage;
// checking a cell moves the layer (a branch layer: its whole branch) to that stage.
// Parameter servers hold no layers. A drag over many cells is one undo step.
#pragma once

#include <QAbstractTableModel>

#include "loom/ui/designer/layer_rows.h"
#include "loom/ui/designer/plan_document.h"

namespace loom::ui {

class PlacementModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  explicit PlacementModel(PlanDocument* doc, QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::CheckStateRole) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  // Between beginDrag and endDrag every placement change merges into one undo step.
  void beginDrag();
  void endDrag();
  // Moves the layer at `row` to the stage of device `rank`; false for servers and no-ops.
  bool place(int row, int rank);

 private:
  void refresh();

  PlanDocument* doc_;
  std::vector<LayerRow> rows_;
  int columns_ = 0;
  bool dragging_ = false;
};

}  // namespace loom::ui
