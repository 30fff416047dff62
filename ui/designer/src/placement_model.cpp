// PlacementModel (placement_model.h).
#include "loom/ui/designer/placement_model.h"

#include <algorithm>

#include "loom/ui/colors.h"
#include "loom/ui/designer/plan_help.h"
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
  collectErrors();
  endResetModel();
}

// A layer's stage errors go to its row; a stage without layers to the columns of that
// stage's devices. Computed from the plan rather than read from the error texts, so the
// marks stay right whatever words validation uses.
void PlacementModel::collectErrors() {
  const loom::Plan& plan = doc_->plan();
  row_errors_.assign(rows_.size(), {});
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    for (const loom::PlanError& e : doc_->errors()) {
      if (e.path == rows_[r].json_path + "/stage") row_errors_[r] << describePlanError(plan, e).text;
    }
  }
  empty_stages_.clear();
  std::vector<bool> used(static_cast<std::size_t>(std::max(0, plan.parallel.stages)), false);
  for (const LayerRow& r : rows_) {
    if (r.stage >= 0 && r.stage < plan.parallel.stages) used[static_cast<std::size_t>(r.stage)] = true;
  }
  if (rows_.empty()) return;
  for (std::size_t s = 0; s < used.size(); ++s) {
    if (!used[s]) empty_stages_.insert(static_cast<int>(s));
  }
}

QStringList PlacementModel::cellErrors(int row, int column) const {
  if (row < 0 || row >= rowCount() || column < 0 || column >= columns_) return {};
  QStringList out;
  const loom::RankRole device = loom::rank_role(doc_->plan(), column);
  const LayerRow& r = rows_[static_cast<std::size_t>(row)];
  const QStringList& mine = row_errors_[static_cast<std::size_t>(row)];
  // The cell holding the layer carries its error; a layer on a stage no device has
  // (out of range) marks its whole row, since it has no such cell.
  const bool on = device.kind == loom::RankKind::Worker && device.stage == r.stage;
  const bool placed_somewhere = r.stage >= 0 && r.stage < doc_->plan().parallel.stages;
  if (!mine.isEmpty() && (on || !placed_somewhere)) out << mine;
  if (device.kind == loom::RankKind::Worker && empty_stages_.count(device.stage)) out << stageEmptyText(device.stage);
  return out;
}

QString PlacementModel::stageEmptyText(int stage) const {
  return tr("Stage %1 has no layers: drag some layers onto a stage-%1 device here, or lower Strategy › Pipeline › Stages.")
      .arg(stage);
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
      if (!cellErrors(index.row(), index.column()).isEmpty()) return QColor(0xe5, 0x39, 0x35, on ? 170 : 90);
      if (!on) return {};
      QColor c = device_color(index.column());
      c.setAlpha(90);  // light enough for the check mark and text to stay readable
      return c;
    }
    case HasErrorRole: return !cellErrors(index.row(), index.column()).isEmpty();
    case Qt::ToolTipRole: {
      QString tip = QStringLiteral("%1 on rank %2 (%3)")
                        .arg(QString::fromStdString(layerAt(doc_->plan().model, row.address).name))
                        .arg(index.column())
                        .arg(rankRoleText(doc_->plan(), index.column()));
      const QStringList errors = cellErrors(index.row(), index.column());
      return errors.isEmpty() ? tip : tip + QStringLiteral("\n\u26a0 ") + errors.join(QStringLiteral("\n\u26a0 "));
    }
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
  const QString name = QString::fromStdString(layerAt(doc_->plan().model, r.address).name);
  if (!dragging_) placed_.clear();
  placed_.removeIf([&](const auto& entry) { return entry.first == name; });
  placed_.append({name, device.stage});
  doc_->edit(placeText(), [&](loom::Plan& p) { setRowStage(p.model, r.address, device.stage); },
             dragging_ ? kPlacementDragKey : 0);
  return true;
}

// "Place fc2 on stage 1"; a drag over several layers names them all (the merged undo
// step takes the newest text): "Place fc2, relu2 on stage 1".
QString PlacementModel::placeText() const {
  QStringList parts;
  bool one_stage = true;
  for (const auto& entry : placed_) one_stage = one_stage && entry.second == placed_.front().second;
  if (one_stage) {
    QStringList names;
    for (const auto& entry : placed_) names << entry.first;
    return tr("Place %1 on stage %2").arg(names.join(QStringLiteral(", "))).arg(placed_.front().second);
  }
  for (const auto& entry : placed_) parts << tr("%1 on stage %2").arg(entry.first).arg(entry.second);
  return tr("Place %1").arg(parts.join(QStringLiteral(", ")));
}

void PlacementModel::beginDrag() {
  doc_->endMerge();  // never merge into a step from an earlier drag
  dragging_ = true;
  placed_.clear();
}

void PlacementModel::endDrag() {
  dragging_ = false;
  doc_->endMerge();
}

QVariant PlacementModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation == Qt::Horizontal) {
    if (section < 0 || section >= columns_) return {};
    const loom::RankRole device = loom::rank_role(doc_->plan(), section);
    const bool empty = device.kind == loom::RankKind::Worker && empty_stages_.count(device.stage) > 0;
    if (role == Qt::DisplayRole) {
      const QString text = QStringLiteral("rank %1\n%2").arg(section).arg(rankRoleText(doc_->plan(), section));
      return empty ? QStringLiteral("\u26a0 ") + text : text;
    }
    if (role == Qt::ToolTipRole && empty) return stageEmptyText(device.stage);
    if (role == HasErrorRole) return empty;
    if (role == Qt::ForegroundRole && empty) return QColor(0xc6, 0x28, 0x28);
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
