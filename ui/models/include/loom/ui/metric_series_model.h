// Training curves of one run for the charts: each metric (loss, test_accuracy, ...) as
// points (step, value), averaged over the ranks that reported the step, because with
// data parallelism every replica reports its own loss for the same step.
#pragma once

#include <QAbstractTableModel>
#include <QPointF>
#include <QString>
#include <QVector>

#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/status.h"
#include "loom/trace/records.h"

namespace loom::ui {

struct MetricSeries {
  QString name;
  QVector<QPointF> points;  // x = step (0-based), y = mean over ranks; ascending x
};

// The metrics the run view charts by default.
std::vector<std::string> default_chart_metrics();  // {"loss", "test_accuracy"}

// Pure: one series from a run's metric records (any order, any ranks).
MetricSeries make_metric_series(const std::vector<loom::trace::MetricRecord>& metrics, const std::string& name);
// Opens the store (NotFound for a missing file, without creating it) and builds one
// series per name, in the order given; a metric the run never reported gives an empty
// series. Safe on a worker thread: it opens its own connection.
loom::Expected<std::vector<MetricSeries>> load_metric_series(const std::string& path, std::int64_t run_id,
                                                             const std::vector<std::string>& names);

class MetricSeriesModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Name, Points, Last, Min, Max, ColumnCount };

  explicit MetricSeriesModel(QObject* parent = nullptr);

  // Loads the run's series; on failure the previous series stay and the error is returned.
  loom::Status load(const QString& dbPath, std::int64_t runId,
                    const std::vector<std::string>& names = default_chart_metrics());
  void setSeries(std::vector<MetricSeries> series);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  const MetricSeries& series(int row) const { return series_.at(static_cast<std::size_t>(row)); }
  QVector<QPointF> points(const QString& name) const;  // empty when not loaded

 private:
  QVariant columnValue(const MetricSeries& s, int column) const;

  std::vector<MetricSeries> series_;
};

}  // namespace loom::ui
