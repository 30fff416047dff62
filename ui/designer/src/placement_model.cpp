// PlacementModel (placement_model.h).
#include "loom/ui/designer/placement_model.h"

#include <algorithm>

#include "loom/ui/colors.h"
#include "loom/ui/designer/strategy.h"
#include "loom/ui/item_roles.h"

namespace loom::ui {
namespace {
// Distinct from any field key of the strategy form, which hash JSON paths.
constexpr int kPlacementDragKey = 0x504c4143;  // "PLAC"
}  // namespace

PlacementModel::PlacementModel(PlanDocument* doc, QObject* parent) : QAbstractTableModel(parent), doc_(doc) {
  connect(doc_, &PlanDocument::planChanged, this, &PlacementModel::refresh);
  refresh();
}

void PlacementModel::refresh() {
  beginResetModel();
  rows_ = layerRows(doc_->plan().model, false);
  columns_ = std::clamp(loom::world_size(doc_->plan()), 0, kMaxDesignerRanks);
  endResetModel();
}

int PlacementModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int PlacementModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : columns_; }

QVariant PlacementModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const loom::RankRole device = loom::rank_role(doc_->plan(), index.column());
  const LayerRow& row = rows_[static_cast<std::size_t>(index.row())];
  const bool on = device.kind == loom::RankKind::Worker && device.stage == row.stage;
  switch (role) {
    case Qt::CheckStateRole:
      return device.kind == loom::RankKind::Worker ? QVariant(on ? Qt::Checked : Qt::Unchecked) : QVariant();
    case Qt::BackgroundRole: {
      if (!on) return {};
      QColor c = device_color(index.column());
      c.setAlpha(90);  // light enough for the check mark and text to stay readable
      return c;
    }
    case Qt::ToolTipRole:
      return QStringLiteral("%1 on rank %2 (%3)")
          .arg(QString::fromStdString(layerAt(doc_->plan().model, row.address).name))
          .arg(index.column())
          .arg(rankRoleText(doc_->plan(), index.column()));
    case JsonPathRole: return QString::fromStdString(row.json_path);
    default: return {};
  }
}

Qt::ItemFlags PlacementModel::flags(const QModelIndex& index) const {
  if (!index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return Qt::NoItemFlags;
  const bool worker = loom::rank_role(doc_->plan(), index.column()).kind == loom::RankKind::Worker;
  return worker ? Qt::ItemIsEnabled | Qt::ItemIsUserCheckable : Qt::ItemFlags(Qt::NoItemFlags);
}

bool PlacementModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (role != Qt::CheckStateRole || !index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return false;
  }
  // Unchecking means nothing on its own: a layer always runs somewhere.
  if (value.toInt() != Qt::Checked) return false;
  return place(index.row(), index.column());
}

bool PlacementModel::place(int row, int rank) {
  if (row < 0 || row >= rowCount() || rank < 0 || rank >= columns_) return false;
  const loom::RankRole device = loom::rank_role(doc_->plan(), rank);
  const LayerRow r = rows_[static_cast<std::size_t>(row)];
  if (device.kind != loom::RankKind::Worker || device.stage == r.stage) return false;
  doc_->edit(tr("Place layers"), [&](loom::Plan& p) { setRowStage(p.model, r.address, device.stage); },
             dragging_ ? kPlacementDragKey : 0);
  return true;
}

void PlacementModel::beginDrag() {
  doc_->endMerge();  // never merge into a step from an earlier drag
  dragging_ = true;
}

void PlacementModel::endDrag() {
  dragging_ = false;
  doc_->endMerge();
}

QVariant PlacementModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation == Qt::Horizontal) {
    if (section < 0 || section >= columns_) return {};
    if (role == Qt::DisplayRole) {
      return QStringLiteral("rank %1\n%2").arg(section).arg(rankRoleText(doc_->plan(), section));
    }
    if (role == Qt::DecorationRole || role == Qt::BackgroundRole) return device_color(section);
    return {};
  }
  if (section < 0 || section >= rowCount()) return {};
  const LayerRow& r = rows_[static_cast<std::size_t>(section)];
  if (role == Qt::DisplayRole) {
    return QString(2 * r.depth, QLatin1Char(' ')) + QString::fromStdString(layerAt(doc_->plan().model, r.address).name);
  }
  if (role == DepthRole) return r.depth;
  return {};
}

}  // namespace loom::ui
