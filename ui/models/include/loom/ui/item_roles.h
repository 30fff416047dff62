// Custom item-data roles shared by Loom's item models, so views and proxies (sorting,
// delegates that indent or colour rows) ask every model the same way.
#pragma once

#include <Qt>

namespace loom::ui {

enum ItemRole {
  // The unformatted value behind a display string (qint64 bytes, double seconds, ...):
  // QSortFilterProxyModel::setSortRole(SortRole) sorts numbers as numbers.
  SortRole = Qt::UserRole,
  DepthRole,      // int: nesting level of a layer (0 top level, 1 inside a branch, ...)
  HasErrorRole,   // bool: the row has at least one problem attached
  JsonPathRole,   // QString: the plan JSON pointer a row edits ("/model/layers/2")
  RunIdRole,      // qint64: run id in the run store
  PointsRole,     // QVector<QPointF>: a metric series, x = step
  FilterRole,     // QString: the text a filter box matches against the row
  FigureKeyRole,  // QString: a comparison figure's stable name ("samples_per_s", docs/figures.md)
  DetailRole,     // QString: a qualifier drawn lighter after the value ("(no calibration)")
};

}  // namespace loom::ui
