// The comparison window's Metrics tab as a table model: analysis::compare_runs' figures,
// one row per figure, the figure's name and then one column per run with its value, its
// ratio to run A (the baseline) and the better run starred in bold. Figures no run has a
// value for (staleness of synchronous runs, bubbles without pipelines) are left out and
// counted in hiddenCount(). Headers name each run by letter and id beside its colour.
#pragma once

#include <QAbstractTableModel>
#include <QString>

#include <cstdint>
#include <vector>

#include "loom/analysis/compare.h"

namespace loom::ui {

class CompareMetricsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Figure, FirstRun };  // run i is column FirstRun + i

  explicit CompareMetricsModel(QObject* parent = nullptr);

  void setComparison(const loom::analysis::Comparison& comparison);
  void clear();  // no runs, no rows: what the tab shows while a comparison failed

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  int runCount() const { return static_cast<int>(run_ids_.size()); }
  int hiddenCount() const { return hidden_; }  // figures left out: no run has them
  const loom::analysis::CompareRow& figure(int row) const { return rows_.at(static_cast<std::size_t>(row)); }
  int rowForKey(const QString& key) const;  // -1 when the figure is not listed

 private:
  QString figureText(const loom::analysis::CompareRow& row) const;
  QString valueText(const loom::analysis::CompareRow& row, int run) const;
  QVariant toolTip(const loom::analysis::CompareRow& row, int column) const;

  std::vector<std::int64_t> run_ids_;
  std::vector<loom::analysis::CompareRow> rows_;
  int hidden_ = 0;
};

// "lower is better", "higher is better", "neither side is better".
QString better_text(loom::analysis::Better better);

}  // namespace loom::ui
