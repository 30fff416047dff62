// The run browser's list: one row per stored run, newest first; FilterRole holds the text
// a filter box matches (name, mode, status, tags, id). The model only holds
// rows; where they come from is load_run_rows (run_rows.h), called synchronously by
// reload() today and from a worker thread through setRows() once the GUI needs that.
#pragma once

#include <QAbstractTableModel>
#include <QString>

#include <cstdint>
#include <vector>

#include "loom/core/status.h"
#include "loom/ui/run_rows.h"

namespace loom::ui {

class RunListModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Id, Name, Started, Mode, Ranks, Status, Steps, WallTime, Throughput, TestAccuracy, Tags, ColumnCount };

  explicit RunListModel(QObject* parent = nullptr);

  // Loads the run list from a store file. On failure the previous rows stay (a browser
  // that blanks on a transient error loses the user's selection) and errorMessage()
  // says what went wrong; on success the error is cleared.
  loom::Status reload(const QString& dbPath);
  // Replaces every row, e.g. with a worker thread's load_run_rows result.
  void setRows(std::vector<RunRow> rows);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  std::int64_t runId(int row) const;      // -1 for a row out of range
  int rowForRunId(std::int64_t id) const; // -1 when not listed
  const RunRow& run(int row) const { return rows_.at(static_cast<std::size_t>(row)); }
  const std::vector<RunRow>& rows() const { return rows_; }
  const QString& errorMessage() const { return error_; }
  const QString& databasePath() const { return path_; }

 signals:
  void errorChanged(const QString& message);  // empty after a successful reload

 private:
  QVariant displayData(const RunRow& run, int column) const;
  QVariant sortData(const RunRow& run, int column) const;
  static QString tagsText(const RunRow& run);
  static QString filterText(const RunRow& run);
  static QString headerToolTip(int section);
  void setError(const QString& message);

  std::vector<RunRow> rows_;
  QString error_;
  QString path_;
};

}  // namespace loom::ui
