// RunListModel: formats RunRows (ids, status, local start time, wall time, throughput)
// for the run browser's table and keeps the last good list when a reload fails.
#include "loom/ui/run_list_model.h"

#include <QColor>
#include <QDateTime>
#include <QStringList>

#include <cmath>

#include "loom/ui/item_roles.h"

namespace loom::ui {
namespace {

QString qs(const std::string& text) { return QString::fromStdString(text); }

}  // namespace

RunListModel::RunListModel(QObject* parent) : QAbstractTableModel(parent) {}

loom::Status RunListModel::reload(const QString& dbPath) {
  auto rows = load_run_rows(dbPath.toStdString());
  if (!rows.ok()) {
    setError(qs(rows.error().describe()));
    return rows.status();
  }
  path_ = dbPath;
  setRows(std::move(rows).value());
  setError({});
  return {};
}

void RunListModel::setRows(std::vector<RunRow> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

void RunListModel::setError(const QString& message) {
  if (message == error_) return;
  error_ = message;
  emit errorChanged(error_);
}

int RunListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int RunListModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RunListModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const RunRow& r = run(index.row());
  switch (role) {
    case Qt::DisplayRole: return displayData(r, index.column());
    case SortRole: return sortData(r, index.column());
    case RunIdRole: return static_cast<qlonglong>(r.id);
    case HasErrorRole: return trace::ended_badly(r.status);  // shown in red, with its error
    case FilterRole: return filterText(r);
    case Qt::ToolTipRole: {
      if (!r.error.empty()) return qs(r.error);
      const QString tip = QStringLiteral("%1 on %2, Loom %3").arg(qs(r.name), qs(r.host), qs(r.version));
      // The column says "on NVIDIA H200"; the tooltip has the whole identity per rank.
      return r.device_detail.empty() ? tip : tip + QLatin1Char('\n') + qs(r.device_detail);
    }
    case Qt::ForegroundRole: return trace::ended_badly(r.status) ? QVariant(QColor(Qt::red)) : QVariant();
    case Qt::TextAlignmentRole:
      if (index.column() == Id || index.column() == Ranks || (index.column() >= Steps && index.column() <= TestAccuracy))
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
      return {};
    default: return {};
  }
}

QVariant RunListModel::displayData(const RunRow& r, int column) const {
  switch (column) {
    case Id: return static_cast<qlonglong>(r.id);
    case Name: return qs(r.name);
    case Started:
      return QDateTime::fromMSecsSinceEpoch(r.started_unix_ms).toLocalTime().toString(
          QStringLiteral("yyyy-MM-dd hh:mm"));
    case Mode: return qs(mode_with_device(r));
    case Ranks: return r.world_size;
    case Status: return qs(run_status_label(r.status));
    case Steps: return r.steps > 0 ? QVariant(static_cast<qlonglong>(r.steps)) : QVariant(QString());
    case WallTime: return qs(format_duration(r.wall_s));
    case Throughput: return r.samples_per_s > 0 ? QString::number(r.samples_per_s, 'f', 0) : QString();
    case TestAccuracy:
      return std::isfinite(r.test_accuracy) ? QStringLiteral("%1%").arg(r.test_accuracy * 100.0, 0, 'f', 1) : QString();
    case Tags: return tagsText(r);
    default: return {};
  }
}

// Unknown figures sort below every known one, whichever way the column is sorted.
QVariant RunListModel::sortData(const RunRow& r, int column) const {
  switch (column) {
    case Id: return static_cast<qlonglong>(r.id);
    case Name: return qs(r.name).toLower();
    case Started: return static_cast<qlonglong>(r.started_unix_ms);
    case Mode: return qs(mode_with_device(r));
    case Ranks: return r.world_size;
    case Status: return qs(run_status_label(r.status));
    case Steps: return static_cast<qlonglong>(r.steps);
    case WallTime: return r.wall_s;
    case Throughput: return r.samples_per_s;
    case TestAccuracy: return std::isfinite(r.test_accuracy) ? r.test_accuracy : -1.0;
    case Tags: return tagsText(r);
    default: return {};
  }
}

QString RunListModel::tagsText(const RunRow& r) {
  QStringList tags;
  for (const std::string& t : r.tags) tags << qs(t);
  return tags.join(QStringLiteral(", "));
}

QString RunListModel::filterText(const RunRow& r) {
  return QStringLiteral("#%1 %2 %3 %4 %5 %6")
      .arg(r.id)
      .arg(qs(r.name), qs(mode_with_device(r)), qs(run_status_label(r.status)), tagsText(r), qs(r.device_detail));
}

QVariant RunListModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  if (role == Qt::ToolTipRole) return headerToolTip(section);
  if (role != Qt::DisplayRole) return {};
  switch (section) {
    case Id: return tr("Id");
    case Name: return tr("Name");
    case Started: return tr("Started");
    case Mode: return tr("Mode");
    case Ranks: return tr("Ranks");
    case Status: return tr("Status");
    case Steps: return tr("Steps");
    case WallTime: return tr("Wall time");
    case Throughput: return tr("Samples/s");
    case TestAccuracy: return tr("Test acc.");
    case Tags: return tr("Tags");
    default: return {};
  }
}

QString RunListModel::headerToolTip(int section) {
  switch (section) {
    case Mode: return tr("How the run trains (data-parallel synchronisation, or pipeline schedule and micro-batches) and on "
                          "what: the device its ranks reported; hover a run for the whole identity");
    case Steps: return tr("Training steps with a recorded loss");
    case WallTime: return tr("From launch to end, setup included");
    case Throughput: return tr("Samples per second over the steady steps (warm-up and setup excluded)");
    case TestAccuracy: return tr("The latest test-set accuracy the run recorded");
    case Tags: return tr("Your labels for the run (Runs > Tag)");
    default: return {};
  }
}

std::int64_t RunListModel::runId(int row) const {
  if (row < 0 || row >= rowCount()) return -1;
  return rows_[static_cast<std::size_t>(row)].id;
}

int RunListModel::rowForRunId(std::int64_t id) const {
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    if (rows_[r].id == id) return static_cast<int>(r);
  }
  return -1;
}

}  // namespace loom::ui
