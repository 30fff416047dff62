// LayerListModel: the editable layer table (layer_list_model.h). Rows are rebuilt from
// the plan after every change; edits name their row by address, which stays valid for
// the plan they are applied to because each edit starts from the current plan.
#include "loom/ui/designer/layer_list_model.h"

#include <QColor>

#include "loom/ui/model_table_model.h"
#include "loom/ui/designer/plan_help.h"
#include "loom/ui/designer/strategy.h"

namespace loom::ui {
namespace {

QString qs(std::string_view text) { return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size())); }

bool pathInside(const std::string& path, const std::string& rowPath) {
  return path == rowPath || path.rfind(rowPath + "/", 0) == 0;
}

std::optional<loom::LayerKind> kindFromName(const QString& name) {
  for (int k = 0; k <= static_cast<int>(loom::LayerKind::Parallel); ++k) {
    const auto kind = static_cast<loom::LayerKind>(k);
    if (qs(loom::layer_kind_name(kind)) == name) return kind;
  }
  return std::nullopt;
}

// Changing a layer's type keeps its name and stage and starts from the new kind's defaults.
void changeKind(loom::LayerSpec& layer, loom::LayerKind kind) {
  if (layer.kind == kind) return;
  loom::LayerSpec fresh = defaultLayer(kind, layer.stage);
  fresh.name = layer.name;
  layer = std::move(fresh);
}

// The words an undo step uses for a setting ("Change fc2 output to 64").
QString settingWord(const QString& key) {
  if (key == QLatin1String("out")) return LayerListModel::tr("output");
  if (key == QLatin1String("out_channels")) return LayerListModel::tr("channels");
  if (key == QLatin1String("p")) return LayerListModel::tr("drop probability");
  return key;  // kernel, stride, padding
}

// Names the edit by what changed: "Change fc2 output to 64", "Turn off fc2 bias",
// "Change conv1 kernel to 5, stride to 2". Bias goes last, as its own clause.
QString settingsEditText(const loom::LayerSpec& layer, const QVariantMap& after) {
  const QVariantMap before = LayerListModel::settingsOf(layer);
  const QString name = qs(layer.name);
  QStringList changes;
  QString bias;
  for (auto it = after.begin(); it != after.end(); ++it) {
    if (!before.contains(it.key()) || before.value(it.key()) == it.value()) continue;
    if (it.key() == QLatin1String("bias")) {
      bias = it.value().toBool() ? LayerListModel::tr("Turn on %1 bias").arg(name) : LayerListModel::tr("Turn off %1 bias").arg(name);
    } else {
      changes << LayerListModel::tr("%1 to %2").arg(settingWord(it.key()), it.value().toString());
    }
  }
  if (changes.isEmpty()) return bias.isEmpty() ? LayerListModel::tr("Change %1 settings").arg(name) : bias;
  QString text = LayerListModel::tr("Change %1 %2").arg(name, changes.join(QStringLiteral(", ")));
  return bias.isEmpty() ? text : text + QStringLiteral("; ") + bias.left(1).toLower() + bias.mid(1);
}

}  // namespace

LayerListModel::LayerListModel(PlanDocument* doc, QObject* parent) : QAbstractTableModel(parent), doc_(doc) {
  connect(doc_, &PlanDocument::planChanged, this, &LayerListModel::refresh);
  refresh();
}

void LayerListModel::refresh() {
  beginResetModel();
  rows_ = layerRows(doc_->plan().model, true);
  info_by_path_.clear();
  const auto& layers = doc_->info().layers;
  for (std::size_t i = 0; i < layers.size(); ++i) info_by_path_[layers[i].json_path] = i;
  attachErrors();
  endResetModel();
}

// Each error goes to the deepest row whose path contains it (a branch layer, not the
// block around it); errors outside every row stay with the document.
void LayerListModel::attachErrors() {
  row_errors_.assign(rows_.size(), {});
  for (const loom::PlanError& e : doc_->errors()) {
    int best = -1;
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      if (pathInside(e.path, rows_[r].json_path) &&
          (best < 0 || rows_[r].json_path.size() >= rows_[static_cast<std::size_t>(best)].json_path.size())) {
        best = static_cast<int>(r);
      }
    }
    if (best >= 0) row_errors_[static_cast<std::size_t>(best)] << describePlanError(doc_->plan(), e).text;
  }
}

int LayerListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int LayerListModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

const loom::LayerInfo* LayerListModel::infoFor(int row) const {
  auto it = info_by_path_.find(rowAt(row).json_path);
  return it == info_by_path_.end() ? nullptr : &doc_->info().layers[it->second];
}

QStringList LayerListModel::rowErrors(int row) const {
  return row >= 0 && row < rowCount() ? row_errors_[static_cast<std::size_t>(row)] : QStringList{};
}

int LayerListModel::rowForAddress(const LayerAddress& address) const {
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    if (rows_[r].address == address) return static_cast<int>(r);
  }
  return -1;
}

QVariant LayerListModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const int row = index.row();
  const LayerRow& r = rowAt(row);
  const bool hasError = !row_errors_[static_cast<std::size_t>(row)].isEmpty();
  switch (role) {
    case Qt::DisplayRole: return displayData(row, index.column());
    case Qt::EditRole: return editData(row, index.column());
    case DepthRole: return r.depth;
    case HasErrorRole: return hasError;
    case JsonPathRole: return qs(r.json_path);
    case IsBranchRole: return r.is_branch;
    case LayerKindRole:
      return r.is_branch ? -1 : static_cast<int>(layerAt(doc_->plan().model, r.address).kind);
    case Qt::ToolTipRole:
      // In the window's words; the JSON path stays available as JsonPathRole.
      return hasError ? QStringLiteral("%1: %2").arg(rowLabel(r), row_errors_[static_cast<std::size_t>(row)].join(QStringLiteral("\n")))
                      : QVariant(rowLabel(r));
    case Qt::ForegroundRole:
      // Branch headers are structure, not layers: quieter unless they carry an error.
      if (hasError) return QColor(Qt::red);
      return r.is_branch ? QVariant(QColor(Qt::darkGray)) : QVariant();
    case Qt::TextAlignmentRole:
      if (index.column() == Params || index.column() == Memory || index.column() == Stage) {
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
      }
      return {};
    default: return {};
  }
}

QVariant LayerListModel::displayData(int row, int column) const {
  const LayerRow& r = rowAt(row);
  const loom::ModelSpec& model = doc_->plan().model;
  if (r.is_branch) {
    // Branch headers sit half a level above their layers so the tree reads at a glance.
    const loom::BranchSpec& b = branchAt(model, r.address);
    switch (column) {
      case Name: return QString(4 * r.depth - 2, QLatin1Char(' ')) + QStringLiteral("branch %1").arg(r.address.back());
      case Type: return QStringLiteral("branch");
      case Settings: return QStringLiteral("%1 layer(s)").arg(b.layers.size());
      case Stage: return b.stage >= 0 ? QString::number(r.stage) : QStringLiteral("%1 (block)").arg(r.stage);
      default: return {};
    }
  }
  const loom::LayerSpec& layer = layerAt(model, r.address);
  const loom::LayerInfo* info = infoFor(row);
  switch (column) {
    case Name: return QString(4 * r.depth, QLatin1Char(' ')) + qs(layer.name);
    case Type: return qs(loom::layer_kind_name(layer.kind));
    case Settings: return settingsText(layer);
    case Output: return info ? qs(loom::format_shape(info->output)) : QStringLiteral("?");
    case Params: return info ? groupedDigits(info->params) : QString();
    case Memory: return info ? qs(loom::format_bytes(ModelTableModel::layerMemoryBytes(*info))) : QString();
    case Stage: return r.stage;
    default: return {};
  }
}

QVariant LayerListModel::editData(int row, int column) const {
  const LayerRow& r = rowAt(row);
  if (column == Stage) return r.stage;
  if (r.is_branch) return {};
  const loom::LayerSpec& layer = layerAt(doc_->plan().model, r.address);
  switch (column) {
    case Name: return qs(layer.name);
    case Type: return qs(loom::layer_kind_name(layer.kind));
    case Settings: return settingsOf(layer);
    default: return {};
  }
}

Qt::ItemFlags LayerListModel::flags(const QModelIndex& index) const {
  if (!index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return Qt::NoItemFlags;
  Qt::ItemFlags f = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
  const LayerRow& r = rowAt(index.row());
  const int c = index.column();
  bool editable = c == Stage;
  if (!r.is_branch) {
    const loom::LayerSpec& layer = layerAt(doc_->plan().model, r.address);
    editable = editable || c == Name || c == Type || (c == Settings && !settingsOf(layer).isEmpty());
  }
  return editable ? f | Qt::ItemIsEditable : f;
}

bool LayerListModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (role != Qt::EditRole || !index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return false;
  }
  const LayerRow r = rowAt(index.row());  // a copy: the edit resets rows_
  if (index.column() == Stage) {
    bool ok = false;
    const int stage = value.toInt(&ok);
    if (!ok) return false;
    doc_->edit(tr("Move %1 to stage %2").arg(rowLabel(r)).arg(stage),
               [&](loom::Plan& p) { setRowStage(p.model, r.address, stage); });
    return true;
  }
  return !r.is_branch && setLayerField(r, index.column(), value);
}

bool LayerListModel::setLayerField(const LayerRow& r, int column, const QVariant& value) {
  const LayerAddress a = r.address;
  if (column == Name) {
    const std::string name = value.toString().trimmed().toStdString();
    if (name.empty()) return false;  // an empty name would only be refilled with the default
    doc_->edit(tr("Rename layer to %1").arg(qs(name)), [&](loom::Plan& p) { layerAt(p.model, a).name = name; });
    return true;
  }
  if (column == Type) {
    const auto kind = kindFromName(value.toString());
    if (!kind) return false;
    doc_->edit(tr("Change %1 type to %2").arg(qs(layerAt(doc_->plan().model, a).name), value.toString()),
               [&](loom::Plan& p) { changeKind(layerAt(p.model, a), *kind); });
    return true;
  }
  if (column != Settings) return false;
  const QVariantMap map = value.toMap();
  doc_->edit(settingsEditText(layerAt(doc_->plan().model, a), map), [&](loom::Plan& p) {
    loom::LayerSpec& l = layerAt(p.model, a);
    if (map.contains("out")) l.out = map["out"].toLongLong();
    if (map.contains("bias")) l.bias = map["bias"].toBool();
    if (map.contains("out_channels")) l.out_channels = map["out_channels"].toLongLong();
    if (map.contains("kernel")) l.kernel = map["kernel"].toLongLong();
    if (map.contains("stride")) l.stride = map["stride"].toLongLong();
    if (map.contains("padding")) l.padding = map["padding"].toLongLong();
    if (map.contains("p")) l.p = map["p"].toDouble();
  });
  return !map.isEmpty();
}

QVariant LayerListModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Name: return tr("Layer");
    case Type: return tr("Type");
    case Settings: return tr("Settings");
    case Output: return tr("Output");
    case Params: return tr("Params");
    case Memory: return tr("Memory");
    case Stage: return tr("Stage");
    default: return {};
  }
}

QVariantMap LayerListModel::settingsOf(const loom::LayerSpec& l) {
  using K = loom::LayerKind;
  switch (l.kind) {
    case K::Linear: return {{"out", qlonglong(l.out)}, {"bias", l.bias}};
    case K::Conv2d:
      return {{"out_channels", qlonglong(l.out_channels)}, {"kernel", qlonglong(l.kernel)},
              {"stride", qlonglong(l.stride)}, {"padding", qlonglong(l.padding)}, {"bias", l.bias}};
    case K::MaxPool2d: return {{"kernel", qlonglong(l.kernel)}, {"stride", qlonglong(l.stride)}};
    case K::Dropout: return {{"p", l.p}};
    default: return {};
  }
}

QString LayerListModel::settingsText(const loom::LayerSpec& l) {
  using K = loom::LayerKind;
  // A stride of 0 means the kind's default (1 for conv, the window for pooling).
  const auto stride = [&](std::int64_t fallback) { return l.stride > 0 ? l.stride : fallback; };
  switch (l.kind) {
    case K::Linear: return QStringLiteral("out %1%2").arg(l.out).arg(l.bias ? "" : ", no bias");
    case K::Conv2d:
      return QStringLiteral("%1 ch, k%2 s%3 p%4").arg(l.out_channels).arg(l.kernel).arg(stride(1)).arg(l.padding);
    case K::MaxPool2d: return QStringLiteral("k%1 s%2").arg(l.kernel).arg(stride(l.kernel));
    case K::Dropout: return QStringLiteral("p %1").arg(l.p);
    case K::Parallel: return QStringLiteral("%1 branches").arg(l.branches.size());
    default: return {};
  }
}

int LayerListModel::insertLayer(int row, loom::LayerKind kind) {
  if (row < -1 || row >= rowCount()) return -1;
  LayerAddress inserted;
  if (row == -1) {
    inserted = {0};
  } else if (rowAt(row).is_branch) {
    inserted = rowAt(row).address;
    inserted.push_back(0);
  } else {
    inserted = rowAt(row).address;
    inserted.back() += 1;
  }
  // The neighbour's stage keeps the new layer in model order and inside its branch.
  const int stage = row >= 0 ? rowAt(row).stage : (rows_.empty() ? 0 : rows_.front().stage);
  doc_->edit(tr("Add %1 layer").arg(qs(loom::layer_kind_name(kind))), [&](loom::Plan& p) {
    std::vector<loom::LayerSpec>& list = row >= 0 && rowAt(row).is_branch ? branchAt(p.model, rowAt(row).address).layers
                                                                            : layerList(p.model, inserted);
    list.insert(list.begin() + inserted.back(), defaultLayer(kind, stage));
  });
  return rowForAddress(inserted);
}

bool LayerListModel::removeLayer(int row) {
  if (row < 0 || row >= rowCount()) return false;
  if (rowAt(row).is_branch) return removeBranch(row);
  const LayerAddress a = rowAt(row).address;
  doc_->edit(tr("Remove layer %1").arg(qs(layerAt(doc_->plan().model, a).name)), [&](loom::Plan& p) {
    std::vector<loom::LayerSpec>& list = layerList(p.model, a);
    list.erase(list.begin() + a.back());
  });
  return true;
}

int LayerListModel::moveLayer(int row, int delta) {
  if (row < 0 || row >= rowCount() || delta == 0) return -1;
  const LayerAddress a = rowAt(row).address;
  const int target = a.back() + delta;
  LayerAddress moved = a;
  moved.back() = target;
  if (!addressValid(doc_->plan().model, moved)) return -1;
  doc_->edit((delta < 0 ? tr("Move %1 up") : tr("Move %1 down")).arg(rowLabel(rowAt(row))), [&](loom::Plan& p) {
    if (isBranchAddress(a)) {
      LayerAddress block(a.begin(), a.end() - 1);
      auto& branches = layerAt(p.model, block).branches;
      auto item = branches[static_cast<std::size_t>(a.back())];
      branches.erase(branches.begin() + a.back());
      branches.insert(branches.begin() + target, std::move(item));
    } else {
      auto& list = layerList(p.model, a);
      auto item = list[static_cast<std::size_t>(a.back())];
      list.erase(list.begin() + a.back());
      list.insert(list.begin() + target, std::move(item));
    }
  });
  return rowForAddress(moved);
}

int LayerListModel::addBranch(int row) {
  if (row < 0 || row >= rowCount()) return -1;
  LayerAddress block = rowAt(row).address;
  if (rowAt(row).is_branch) block.pop_back();
  const loom::LayerSpec& spec = layerAt(doc_->plan().model, block);
  if (spec.kind != loom::LayerKind::Parallel) return -1;
  LayerAddress added = block;
  added.push_back(static_cast<int>(spec.branches.size()));
  doc_->edit(tr("Add branch to %1").arg(qs(spec.name)), [&](loom::Plan& p) {
    loom::LayerSpec& b = layerAt(p.model, block);
    b.branches.push_back(loom::BranchSpec{{defaultLayer(loom::LayerKind::Relu, b.stage)}, -1});
  });
  return rowForAddress(added);
}

bool LayerListModel::removeBranch(int row) {
  if (row < 0 || row >= rowCount() || !rowAt(row).is_branch) return false;
  const LayerAddress a = rowAt(row).address;
  doc_->edit(tr("Remove %1").arg(rowLabel(rowAt(row))), [&](loom::Plan& p) {
    LayerAddress block(a.begin(), a.end() - 1);
    auto& branches = layerAt(p.model, block).branches;
    branches.erase(branches.begin() + a.back());
  });
  return true;
}

QString LayerListModel::rowLabel(const LayerRow& r) const {
  const loom::ModelSpec& model = doc_->plan().model;
  if (!r.is_branch) return qs(layerAt(model, r.address).name);
  const LayerAddress block(r.address.begin(), r.address.end() - 1);
  return tr("branch %1 of %2").arg(r.address.back()).arg(qs(layerAt(model, block).name));
}

std::int64_t LayerListModel::deviceParams(int rank) const {
  const loom::Plan& plan = doc_->plan();
  const loom::RankRole role = loom::rank_role(plan, rank);
  const loom::ModelInfo& info = doc_->info();
  if (role.kind == loom::RankKind::Worker) {
    const auto s = static_cast<std::size_t>(role.stage);
    return s < info.stage_params.size() ? info.stage_params[s] : 0;
  }
  if (role.kind == loom::RankKind::InferenceServer) return info.total_params;  // the whole model, forward only
  if (role.kind == loom::RankKind::Server && plan.parallel.sync.servers > 0) {
    // Tensors are sharded across servers: roughly an equal share each.
    return (info.total_params + plan.parallel.sync.servers - 1) / plan.parallel.sync.servers;
  }
  return 0;
}

std::int64_t LayerListModel::deviceMemoryBytes(int rank) const {
  const loom::RankRole role = loom::rank_role(doc_->plan(), rank);
  const auto& memory = doc_->info().stage_memory_bytes;
  if (role.kind != loom::RankKind::Worker || static_cast<std::size_t>(role.stage) >= memory.size()) return 0;
  return memory[static_cast<std::size_t>(role.stage)];
}

QString LayerListModel::deviceTotals(int rank) const {
  const loom::RankRole role = loom::rank_role(doc_->plan(), rank);
  const QString head = QStringLiteral("rank %1 (%2)").arg(rank).arg(rankRoleText(doc_->plan(), rank));
  switch (role.kind) {
    case loom::RankKind::Worker:
      return QStringLiteral("%1: %2 params, %3").arg(head, groupedDigits(deviceParams(rank)),
                                                     qs(loom::format_bytes(deviceMemoryBytes(rank))));
    case loom::RankKind::Server:
      return QStringLiteral("%1: ~%2 params (a shard of every tensor)").arg(head, groupedDigits(deviceParams(rank)));
    case loom::RankKind::InferenceServer:
      return QStringLiteral("%1: %2 params, forward passes only").arg(head, groupedDigits(deviceParams(rank)));
    default: return head;
  }
}

}  // namespace loom::ui
