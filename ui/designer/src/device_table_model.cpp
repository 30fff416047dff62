// DeviceTableModel (device_table_model.h).
#include "loom/ui/designer/device_table_model.h"

#include <QColor>

#include "loom/ui/colors.h"
#include "loom/ui/designer/strategy.h"
#include "loom/ui/item_roles.h"

namespace loom::ui {

DeviceTableModel::DeviceTableModel(PlanDocument* doc, QObject* parent) : QAbstractTableModel(parent), doc_(doc) {
  connect(doc_, &PlanDocument::planChanged, this, [this] {
    beginResetModel();
    endResetModel();
  });
}

int DeviceTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(doc_->plan().parallel.devices.size());
}

int DeviceTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant DeviceTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const int rank = index.row();
  const loom::DeviceSpec& d = doc_->plan().parallel.devices[static_cast<std::size_t>(rank)];
  const QString path = QStringLiteral("/parallel/devices/%1").arg(rank);
  const QStringList errors = doc_->shownErrorsAt(path);
  switch (role) {
    case Qt::DisplayRole:
    case Qt::EditRole:
      switch (index.column()) {
        case Rank: return rank;
        case Kind: return QString::fromUtf8(loom::device_kind_name(d.kind).data());
        case Host: return QString::fromStdString(d.host);
        case Gpu: return role == Qt::EditRole || d.gpu >= 0 ? QVariant(d.gpu) : QVariant(QStringLiteral("\u2013"));
        case Role: return rankRoleText(doc_->plan(), rank);
        default: return {};
      }
    case Qt::DecorationRole: return index.column() == Rank ? QVariant(device_color(rank)) : QVariant();
    case JsonPathRole: return path;
    case HasErrorRole: return !errors.isEmpty();
    case Qt::ToolTipRole: return errors.isEmpty() ? QVariant() : QVariant(errors.join(QLatin1Char('\n')));
    case Qt::ForegroundRole: return errors.isEmpty() ? QVariant() : QVariant(QColor(Qt::red));
    default: return {};
  }
}

Qt::ItemFlags DeviceTableModel::flags(const QModelIndex& index) const {
  if (!index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return Qt::NoItemFlags;
  const Qt::ItemFlags f = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
  const auto& d = doc_->plan().parallel.devices[static_cast<std::size_t>(index.row())];
  const bool editable = index.column() == Kind || index.column() == Host ||
                        (index.column() == Gpu && d.kind == loom::DeviceKind::Gpu);
  return editable ? f | Qt::ItemIsEditable : f;
}

bool DeviceTableModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (role != Qt::EditRole || !index.isValid() || !checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return false;
  }
  const auto rank = static_cast<std::size_t>(index.row());
  const QString text = value.toString().trimmed();
  switch (index.column()) {
    case Kind: {
      if (text != QLatin1String("cpu") && text != QLatin1String("gpu")) return false;
      const bool gpu = text == QLatin1String("gpu");
      doc_->edit(tr("Change rank %1 kind to %2").arg(rank).arg(text), [&](loom::Plan& p) {
        loom::DeviceSpec& d = p.parallel.devices[rank];
        d.kind = gpu ? loom::DeviceKind::Gpu : loom::DeviceKind::Cpu;
        // A gpu needs an index and a cpu must not have one; choose for the person.
        d.gpu = gpu ? std::max(d.gpu, 0) : -1;
      });
      return true;
    }
    case Host:
      if (text.isEmpty()) return false;
      doc_->edit(tr("Change rank %1 host to %2").arg(rank).arg(text),
                 [&](loom::Plan& p) { p.parallel.devices[rank].host = text.toStdString(); });
      return true;
    case Gpu: {
      bool ok = false;
      const int gpu = value.toInt(&ok);
      if (!ok) return false;
      doc_->edit(tr("Change rank %1 GPU to %2").arg(rank).arg(gpu), [&](loom::Plan& p) { p.parallel.devices[rank].gpu = gpu; });
      return true;
    }
    default: return false;
  }
}

QVariant DeviceTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Rank: return tr("Rank");
    case Kind: return tr("Kind");
    case Host: return tr("Host");
    case Gpu: return tr("GPU");
    case Role: return tr("Role");
    default: return {};
  }
}

void DeviceTableModel::addDevice() {
  doc_->edit(tr("Add replica"), [](loom::Plan& p) { addReplica(p); });
}

bool DeviceTableModel::removeDevice(int row) {
  if (row < 0 || row >= rowCount()) return false;
  const int before = rowCount();
  doc_->edit(tr("Remove rank %1").arg(row), [row](loom::Plan& p) { removeDeviceAt(p, row); });
  return rowCount() != before;
}

}  // namespace loom::ui
