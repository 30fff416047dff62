// CompareMetricsModel: formats analysis::Comparison's figures as the Metrics tab shows
// them, with loom-cli compare's number and ratio formats (loom::text) so the window and
// the terminal print the same figures.
#include "loom/ui/compare_metrics_model.h"

#include <QFont>

#include <algorithm>
#include <cmath>

#include "loom/text/run_text.h"
#include "loom/ui/colors.h"
#include "loom/ui/item_roles.h"
#include "loom/ui/text_format.h"

namespace loom::ui {
namespace {

QString qs(const std::string& text) { return QString::fromStdString(text); }

bool any_value(const loom::analysis::CompareRow& row) {
  return std::any_of(row.values.begin(), row.values.end(), [](double v) { return std::isfinite(v); });
}

}  // namespace

QString better_text(loom::analysis::Better better) {
  switch (better) {
    case loom::analysis::Better::Lower: return QObject::tr("lower is better");
    case loom::analysis::Better::Higher: return QObject::tr("higher is better");
    case loom::analysis::Better::Neither: break;
  }
  return QObject::tr("neither side is better");
}

CompareMetricsModel::CompareMetricsModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareMetricsModel::setComparison(const loom::analysis::Comparison& c) {
  beginResetModel();
  run_ids_.clear();
  for (const auto& run : c.runs) run_ids_.push_back(run.id);
  rows_.clear();
  hidden_ = 0;
  for (const auto& row : c.metrics) {
    if (any_value(row)) rows_.push_back(row);
    else ++hidden_;
  }
  endResetModel();
}

void CompareMetricsModel::clear() {
  beginResetModel();
  run_ids_.clear();
  rows_.clear();
  hidden_ = 0;
  endResetModel();
}

int CompareMetricsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

// No runs, no columns: a failed comparison leaves an empty table, not a bare header.
int CompareMetricsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() || run_ids_.empty() ? 0 : FirstRun + runCount();
}

QVariant CompareMetricsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& row = figure(index.row());
  const int run = index.column() - FirstRun;
  const bool best = run >= 0 && run == row.best;
  switch (role) {
    case Qt::DisplayRole: return run < 0 ? figureText(row) : valueText(row, run);
    case Qt::ToolTipRole: return toolTip(row, index.column());
    case SortRole: return run < 0 ? QVariant(figureText(row)) : QVariant(row.values[std::size_t(run)]);
    case FigureKeyRole: return qs(row.key);
    case Qt::TextAlignmentRole: return run < 0 ? QVariant() : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    case Qt::FontRole: {
      if (!best) return {};
      QFont bold;  // only the weight is set: the view's font supplies the rest
      bold.setBold(true);
      return bold;
    }
    default: return {};
  }
}

QString CompareMetricsModel::figureText(const loom::analysis::CompareRow& row) const {
  const QString unit = qs(row.unit);
  return qs(row.label) + (unit.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(unit));
}

// "★ 52514  (1.78×)": the value, its ratio to run A after the first run, the star on the
// better run.
QString CompareMetricsModel::valueText(const loom::analysis::CompareRow& row, int run) const {
  const double v = row.values[std::size_t(run)];
  QString text = qs(loom::text::format_compare_value(v));
  const std::string ratio = loom::text::format_compare_ratio(v, row.values[0], "\u00d7");
  if (run > 0 && !ratio.empty()) text += QStringLiteral("  (%1)").arg(qs(ratio));
  return run == row.best ? QStringLiteral("★ ") + text : text;
}

QVariant CompareMetricsModel::toolTip(const loom::analysis::CompareRow& row, int column) const {
  if (column == Figure) return QStringLiteral("%1 — %2").arg(qs(row.key), better_text(row.better));
  if (column - FirstRun == row.best) return tr("The better value (%1)").arg(better_text(row.better));
  return {};
}

QVariant CompareMetricsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= columnCount()) return {};
  const int run = section - FirstRun;
  if (role == Qt::DisplayRole) {
    return run < 0 ? tr("Figure") : QStringLiteral("%1 #%2").arg(run_letter(run)).arg(run_ids_[std::size_t(run)]);
  }
  if (role == Qt::DecorationRole && run >= 0) return swatch_icon(run_color(run));
  return {};
}

int CompareMetricsModel::rowForKey(const QString& key) const {
  const std::string k = key.toStdString();
  for (std::size_t r = 0; r < rows_.size(); ++r)
    if (rows_[r].key == k) return static_cast<int>(r);
  return -1;
}

}  // namespace loom::ui
