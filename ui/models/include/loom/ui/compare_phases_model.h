// The comparison window's Phases tab as a table model: analysis::compare_runs' phase diff,
// one row per (rank role, phase) with each run's median ms per step and, after run A,
// the difference to A; each value's tooltip says how many (rank, step) pairs it is the
// median of. Headers name each run by letter and id beside its colour.
#pragma once

#include <QAbstractTableModel>

#include <cstdint>
#include <vector>

#include "loom/analysis/compare.h"

namespace loom::ui {

class ComparePhasesModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Role, Phase, FirstRun };  // run i is column FirstRun + i

  explicit ComparePhasesModel(QObject* parent = nullptr);

  void setComparison(const loom::analysis::Comparison& comparison);
  void clear();  // no runs, no rows: what the tab shows while a comparison failed

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  int runCount() const { return static_cast<int>(run_ids_.size()); }
  const loom::analysis::PhaseRow& phase(int row) const { return rows_.at(static_cast<std::size_t>(row)); }

 private:
  QString valueText(const loom::analysis::PhaseRow& row, int run) const;

  std::vector<std::int64_t> run_ids_;
  std::vector<loom::analysis::PhaseRow> rows_;
};

}  // namespace loom::ui
