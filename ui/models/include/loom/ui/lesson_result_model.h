// A lesson's result as a table model: one row per answer to its question, in the order
// the Lessons dock shows them: what the student said (with its error against the
// measurement), what was measured, what Loom predicted before the runs (or, under
// DetailRole, why it could not), and the textbook theory with its formula. Each value in
// the lesson's unit ("x" shown as ×); SortRole holds the bare number (NaN where none).
#pragma once

#include <QAbstractTableModel>
#include <QString>

#include <optional>
#include <vector>

#include "loom/lessons/lesson.h"
#include "loom/predict/lesson_answer.h"

namespace loom::ui {

class LessonResultModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Source, Value, ColumnCount };

  explicit LessonResultModel(QObject* parent = nullptr);

  // The answers to `lesson`: the runs measured `measured`; the student predicted
  // `prediction` (none when the box was empty); Loom predicted `loom` before the runs.
  void setResult(const lessons::Lesson& lesson, double measured, std::optional<double> prediction,
                 const predict::LessonAnswer& loom);
  void clear();

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    QString source, value, detail;
    double number;
  };
  std::vector<Row> rows_;
};

// A lesson's number as the dock prints it: 0 decimals from 100, 1 from 10, else 2.
QString lesson_number_text(double value);

}  // namespace loom::ui
