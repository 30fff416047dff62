// The designer's editable layer table over a PlanDocument. A flat list in pre-order with
// DepthRole for nesting: each parallel block is followed by a header row per branch and
// the branch's layers, so branches are rows one can select, re-stage, move and remove.
// Every setData and operation goes through PlanDocument::edit (one undo step each); the
// model resets itself from the document on planChanged.
#pragma once

#include <QAbstractTableModel>
#include <QVariantMap>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "loom/ui/designer/layer_rows.h"
#include "loom/ui/designer/plan_document.h"
#include "loom/ui/item_roles.h"
#include "loom/ui/text_format.h"  // groupedDigits, used with these rows

namespace loom::ui {

enum DesignerRole {
  IsBranchRole = PointsRole + 32,  // bool: the row is a branch header, not a layer
  LayerKindRole,                   // int: loom::LayerKind of a layer row (-1 for a branch)
};

class LayerListModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  // Settings: display "out 256", "8 ch, k3 s1 p1", "p 0.2"; its EditRole is a QVariantMap
  // of the kind's settings ({"out": 256, "bias": true}) and setData takes such a map
  // (any subset of keys). Type's EditRole is the kind name ("linear").
  enum Column { Name, Type, Settings, Output, Params, Memory, Stage, ColumnCount };

  explicit LayerListModel(PlanDocument* doc, QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  // Inserts a new layer after the layer at `row` in the same list (as the first layer of
  // the branch when `row` is a branch header; at the very start for row -1). Returns the
  // new layer's row, -1 when `row` is out of range.
  int insertLayer(int row, loom::LayerKind kind);
  bool removeLayer(int row);          // a branch header row removes the whole branch
  int moveLayer(int row, int delta);  // within its list (branches among branches); new row or -1
  int addBranch(int row);             // row: a parallel block or one of its branch headers; new header row
  bool removeBranch(int row);         // row: a branch header

  const LayerRow& rowAt(int row) const { return rows_.at(static_cast<std::size_t>(row)); }
  int rowForAddress(const LayerAddress& address) const;  // -1 when none
  QStringList rowErrors(int row) const;
  // How undo texts and messages name a row: "fc2", or "branch 1 of block1".
  QString rowLabel(const LayerRow& row) const;

  // Per device (rank): what it holds. Workers hold their stage's layers (params and the
  // memory infer_model computes for one replica of that stage); servers hold a shard of
  // every parameter. deviceTotals gives the line the designer shows under the table.
  std::int64_t deviceParams(int rank) const;
  std::int64_t deviceMemoryBytes(int rank) const;  // 0 for servers: not modelled yet
  QString deviceTotals(int rank) const;

  static QVariantMap settingsOf(const loom::LayerSpec& layer);
  static QString settingsText(const loom::LayerSpec& layer);

 private:
  void refresh();
  void attachErrors();
  QVariant displayData(int row, int column) const;
  QVariant editData(int row, int column) const;
  const loom::LayerInfo* infoFor(int row) const;
  bool setLayerField(const LayerRow& row, int column, const QVariant& value);

  PlanDocument* doc_;
  std::vector<LayerRow> rows_;
  std::unordered_map<std::string, std::size_t> info_by_path_;  // json path -> info().layers index
  std::vector<QStringList> row_errors_;
};


}  // namespace loom::ui
