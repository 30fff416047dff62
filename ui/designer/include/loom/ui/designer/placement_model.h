// Which device runs which layer: rows are layers (pre-order, branch layers included),
// columns are ranks. A cell is checked when the layer's stage is that rank's stage;
// checking a cell moves the layer (a branch layer: its whole branch) to that stage.
// Parameter servers hold no layers. A drag over many cells is one undo step, named after
// the layers it moved. Cells a placement error concerns are marked (HasErrorRole, a red
// background, the error in the tooltip): the layer's cell for its stage errors, every
// cell and the header of a stage's devices when that stage has no layers.
#pragma once

#include <QAbstractTableModel>
#include <QList>
#include <QPair>
#include <QStringList>

#include <set>

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
  // The errors shown at a cell, in the window's words; empty when it is fine.
  QStringList cellErrors(int row, int column) const;

 private:
  void refresh();
  void collectErrors();
  QString stageEmptyText(int stage) const;
  QString placeText() const;

  PlanDocument* doc_;
  std::vector<LayerRow> rows_;
  int columns_ = 0;
  bool dragging_ = false;
  std::vector<QStringList> row_errors_;  // per row: errors at its "/stage"
  std::set<int> empty_stages_;           // stages no layer is placed on
  QList<QPair<QString, int>> placed_;    // layers moved by the current stroke, with their stage
};

}  // namespace loom::ui
