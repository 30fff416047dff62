// ModelTableModel: formats loom::infer_model's per-layer results for a table view and
// maps inference errors (JSON pointers) back onto the rows they concern.
#include "loom/ui/model_table_model.h"

#include <QColor>
#include <QStringList>

#include "loom/ui/item_roles.h"
#include "loom/ui/text_format.h"

namespace loom::ui {
namespace {

QString qs(const std::string& text) { return QString::fromStdString(text); }

// True when `path` is `layerPath` itself or a pointer below it ("/model/layers/1/out"
// is inside "/model/layers/1"; "/model/layers/10" is not).
bool pathInside(const std::string& path, const std::string& layerPath) {
  if (path.size() < layerPath.size() || path.compare(0, layerPath.size(), layerPath) != 0) return false;
  return path.size() == layerPath.size() || path[layerPath.size()] == '/';
}

}  // namespace

ModelTableModel::ModelTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void ModelTableModel::setPlan(const loom::Plan& plan) {
  beginResetModel();
  errors_.clear();
  info_ = loom::infer_model(plan, &errors_);
  attachErrors();
  endResetModel();
}

// Each error goes to the deepest row whose path contains it, so an error inside a
// branch layer marks that layer, not the parallel block around it.
void ModelTableModel::attachErrors() {
  row_errors_.assign(info_.layers.size(), {});
  model_errors_.clear();
  for (std::size_t e = 0; e < errors_.size(); ++e) {
    int best = -1;
    std::size_t bestLength = 0;
    for (std::size_t r = 0; r < info_.layers.size(); ++r) {
      const std::string& jp = info_.layers[r].json_path;
      if (jp.size() >= bestLength && pathInside(errors_[e].path, jp)) {
        best = static_cast<int>(r);
        bestLength = jp.size();
      }
    }
    if (best < 0) {
      model_errors_.push_back(e);
    } else {
      row_errors_[static_cast<std::size_t>(best)].push_back(e);
    }
  }
}

int ModelTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(info_.layers.size());
}

int ModelTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant ModelTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const int row = index.row();
  const loom::LayerInfo& l = layer(row);
  const bool hasError = !row_errors_[static_cast<std::size_t>(row)].empty();
  switch (role) {
    case Qt::DisplayRole: return displayData(l, index.column());
    case SortRole: return sortData(l, index.column());
    case DepthRole: return l.depth;
    case HasErrorRole: return hasError;
    case JsonPathRole: return qs(l.json_path);
    case Qt::ToolTipRole: return toolTip(row);
    case Qt::ForegroundRole: return hasError ? QVariant(QColor(Qt::red)) : QVariant();
    case Qt::TextAlignmentRole:
      if (index.column() == Params || index.column() == Memory || index.column() == Stage) {
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
      }
      return {};
    default: return {};
  }
}

QVariant ModelTableModel::displayData(const loom::LayerInfo& l, int column) const {
  switch (column) {
    // Two spaces per level: a flat table still reads as the block/branch tree.
    case Name: return QString(2 * l.depth, QLatin1Char(' ')) + qs(l.name);
    case Type: return qs(std::string(loom::layer_kind_name(l.kind)));
    case Stage: return l.stage;
    case Input: return qs(loom::format_shape(l.input));
    case Output: return qs(loom::format_shape(l.output));
    case Params: return groupedDigits(l.params);
    case Memory: return qs(loom::format_bytes(layerMemoryBytes(l)));
    default: return {};
  }
}

// Raw values for sorting; shapes sort by element count, which is what a user comparing
// sizes means.
QVariant ModelTableModel::sortData(const loom::LayerInfo& l, int column) const {
  auto elements = [](const loom::Shape& s) {
    qlonglong n = s.empty() ? 0 : 1;
    for (auto d : s) n *= d;
    return n;
  };
  switch (column) {
    case Name: return qs(l.name);
    case Type: return qs(std::string(loom::layer_kind_name(l.kind)));
    case Stage: return l.stage;
    case Input: return elements(l.input);
    case Output: return elements(l.output);
    case Params: return static_cast<qlonglong>(l.params);
    case Memory: return static_cast<qlonglong>(layerMemoryBytes(l));
    default: return {};
  }
}

QString ModelTableModel::toolTip(int row) const {
  const loom::LayerInfo& l = layer(row);
  QStringList lines;
  lines << QStringLiteral("%1 (%2) at %3")
               .arg(qs(l.name), qs(std::string(loom::layer_kind_name(l.kind))), qs(l.json_path));
  lines << QStringLiteral("weights %1, activations %2 for the global batch")
               .arg(qs(loom::format_bytes(l.param_bytes)), qs(loom::format_bytes(l.activation_bytes)));
  for (std::size_t e : row_errors_[static_cast<std::size_t>(row)]) {
    lines << QStringLiteral("error: %1 (%2)").arg(qs(errors_[e].reason), qs(errors_[e].path));
  }
  return lines.join(QLatin1Char('\n'));
}

QVariant ModelTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Name: return tr("Layer");
    case Type: return tr("Type");
    case Stage: return tr("Stage");
    case Input: return tr("Input");
    case Output: return tr("Output");
    case Params: return tr("Params");
    case Memory: return tr("Memory");
    default: return {};
  }
}

std::vector<loom::PlanError> ModelTableModel::rowErrors(int row) const {
  std::vector<loom::PlanError> out;
  if (row < 0 || row >= rowCount()) return out;
  for (std::size_t e : row_errors_[static_cast<std::size_t>(row)]) out.push_back(errors_[e]);
  return out;
}

std::vector<loom::PlanError> ModelTableModel::modelErrors() const {
  std::vector<loom::PlanError> out;
  for (std::size_t e : model_errors_) out.push_back(errors_[e]);
  return out;
}

int ModelTableModel::rowForJsonPath(const QString& jsonPath) const {
  const std::string path = jsonPath.toStdString();
  for (std::size_t r = 0; r < info_.layers.size(); ++r) {
    if (info_.layers[r].json_path == path) return static_cast<int>(r);
  }
  return -1;
}

std::int64_t ModelTableModel::layerMemoryBytes(const loom::LayerInfo& l) { return l.param_bytes + l.activation_bytes; }

std::int64_t ModelTableModel::totalMemoryBytes() const {
  return info_.total_param_bytes + info_.total_activation_bytes;
}

std::int64_t ModelTableModel::stageParams(int stage) const {
  if (stage < 0 || stage >= stageCount()) return 0;
  return info_.stage_params[static_cast<std::size_t>(stage)];
}

std::int64_t ModelTableModel::stageMemoryBytes(int stage) const {
  if (stage < 0 || stage >= stageCount()) return 0;
  return info_.stage_memory_bytes[static_cast<std::size_t>(stage)];
}

}  // namespace loom::ui
