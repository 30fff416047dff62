// LessonResultModel: a lesson's measured value beside the student's prediction, Loom's
// and the theory's, each prediction with its error in words (lessons::prediction_error_words).
#include "loom/ui/lesson_result_model.h"

#include <cmath>
#include <limits>

#include "loom/ui/item_roles.h"

namespace loom::ui {
namespace {

QString qs(const std::string& text) { return QString::fromStdString(text); }

// "x" in lesson files (as the terminal prints it) is the times sign on screen.
QString unit_text(const std::string& unit) { return unit == "x" ? QStringLiteral("×") : qs(unit); }

// "3.00 × (25% below the measured value)"; no parentheses where the words are empty.
QString with_error(const QString& value, double prediction, double measured) {
  const QString error = qs(lessons::prediction_error_words(prediction, measured));
  return error.isEmpty() ? value : value + QStringLiteral(" (%1)").arg(error);
}

}  // namespace

QString lesson_number_text(double v) {
  return QString::number(v, 'f', std::fabs(v) >= 100 ? 0 : std::fabs(v) >= 10 ? 1 : 2);
}

LessonResultModel::LessonResultModel(QObject* parent) : QAbstractTableModel(parent) {}

void LessonResultModel::setResult(const lessons::Lesson& l, double measured, std::optional<double> prediction,
                                  const predict::LessonAnswer& loom) {
  const QString unit = QLatin1Char(' ') + unit_text(l.unit);
  const double none = std::numeric_limits<double>::quiet_NaN();
  beginResetModel();
  rows_.clear();
  if (prediction) {
    rows_.push_back({tr("You said"), with_error(lesson_number_text(*prediction) + unit, *prediction, measured), {},
                     *prediction});
  }
  rows_.push_back({tr("Measured"), lesson_number_text(measured) + unit, {}, measured});
  if (loom.value) {
    rows_.push_back({tr("Loom predicted"), with_error(lesson_number_text(*loom.value) + unit, *loom.value, measured), {},
                     *loom.value});
  } else {
    rows_.push_back({tr("Loom predicted"), QStringLiteral("—"), QStringLiteral("(%1)").arg(qs(loom.why_not)), none});
  }
  if (l.theory) {
    rows_.push_back({tr("Theory"), lesson_number_text(*l.theory) + unit + QStringLiteral(" — ") + qs(l.theory_why), {},
                     *l.theory});
  }
  endResetModel();
}

void LessonResultModel::clear() {
  beginResetModel();
  rows_.clear();
  endResetModel();
}

int LessonResultModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int LessonResultModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant LessonResultModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Row& row = rows_[std::size_t(index.row())];
  const bool value = index.column() == Value;
  switch (role) {
    case Qt::DisplayRole: return value ? row.value : row.source;
    case DetailRole: return value && !row.detail.isEmpty() ? QVariant(row.detail) : QVariant();
    case SortRole: return value ? QVariant(row.number) : QVariant(row.source);
    case Qt::TextAlignmentRole: return value ? QVariant(Qt::AlignRight | Qt::AlignVCenter) : QVariant();
    default: return {};
  }
}

QVariant LessonResultModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Source: return tr("Answer");
    case Value: return tr("Value");
    default: return {};
  }
}

}  // namespace loom::ui
