// ComparePhasesModel: formats analysis::Comparison's phase diff as the Phases tab shows
// it (values as loom-cli compare prints them, differences to run A to the microsecond).
#include "loom/ui/compare_phases_model.h"

#include <cmath>

#include "loom/text/run_text.h"
#include "loom/ui/colors.h"
#include "loom/ui/item_roles.h"
#include "loom/ui/text_format.h"

namespace loom::ui {
namespace {

QString qs(const std::string& text) { return QString::fromStdString(text); }

}  // namespace

ComparePhasesModel::ComparePhasesModel(QObject* parent) : QAbstractTableModel(parent) {}

void ComparePhasesModel::setComparison(const loom::analysis::Comparison& c) {
  beginResetModel();
  run_ids_.clear();
  for (const auto& run : c.runs) run_ids_.push_back(run.id);
  rows_ = c.phases;
  endResetModel();
}

void ComparePhasesModel::clear() {
  beginResetModel();
  run_ids_.clear();
  rows_.clear();
  endResetModel();
}

int ComparePhasesModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int ComparePhasesModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() || run_ids_.empty() ? 0 : FirstRun + runCount();
}

QVariant ComparePhasesModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& row = phase(index.row());
  const int run = index.column() - FirstRun;
  switch (role) {
    case Qt::DisplayRole:
    case SortRole:
      if (index.column() == Role) return qs(row.role);
      if (index.column() == Phase) return qs(row.phase);
      return role == SortRole ? QVariant(row.median_ms[std::size_t(run)]) : QVariant(valueText(row, run));
    case Qt::ToolTipRole:
      if (run < 0) return {};
      return tr("median over %1 (rank, step) pairs").arg(row.samples[std::size_t(run)]);
    case Qt::TextAlignmentRole: return run < 0 ? QVariant() : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    default: return {};
  }
}

// "4.14  (+0.250)": the median, and after run A its difference to A's.
QString ComparePhasesModel::valueText(const loom::analysis::PhaseRow& row, int run) const {
  const double v = row.median_ms[std::size_t(run)];
  QString text = qs(loom::text::format_compare_value(v));
  double delta = v - row.median_ms[0];
  if (std::abs(delta) < 5e-4) delta = 0;  // no "-0.000"
  if (run > 0 && std::isfinite(delta)) text += QStringLiteral("  (%1%2)").arg(delta >= 0 ? "+" : "").arg(delta, 0, 'f', 3);
  return text;
}

QVariant ComparePhasesModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= columnCount()) return {};
  const int run = section - FirstRun;
  if (role == Qt::DecorationRole && run >= 0) return swatch_icon(run_color(run));
  if (role != Qt::DisplayRole) return {};
  if (section == Role) return tr("Role");
  if (section == Phase) return tr("Phase");
  const qint64 id = run_ids_[std::size_t(run)];
  return run == 0 ? tr("%1 #%2 ms").arg(run_letter(run)).arg(id) : tr("%1 #%2 ms (− A)").arg(run_letter(run)).arg(id);
}

}  // namespace loom::ui
