// MetricSeriesModel and its loader: turns a run's metric rows into per-metric curves
// (mean over ranks per step) and lists them for a chart's legend.
#include "loom/ui/metric_series_model.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "loom/store/run_store.h"
#include "loom/ui/item_roles.h"

namespace loom::ui {

std::vector<std::string> default_chart_metrics() { return {"loss", "test_accuracy"}; }

MetricSeries make_metric_series(const std::vector<loom::trace::MetricRecord>& metrics, const std::string& name) {
  std::map<std::int64_t, std::pair<double, int>> byStep;  // step -> (sum, ranks)
  for (const auto& m : metrics) {
    if (m.name != name) continue;
    auto& [sum, count] = byStep[m.step];
    sum += m.value;
    ++count;
  }
  MetricSeries series{QString::fromStdString(name), {}};
  series.points.reserve(static_cast<qsizetype>(byStep.size()));
  for (const auto& [step, acc] : byStep) {
    series.points.append(QPointF(static_cast<double>(step), acc.first / acc.second));
  }
  return series;
}

loom::Expected<std::vector<MetricSeries>> load_metric_series(const std::string& path, std::int64_t run_id,
                                                             const std::vector<std::string>& names) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return loom::make_error(loom::ErrorCode::NotFound, "no run database at " + path);
  }
  auto store = loom::store::RunStore::open(path);
  if (!store.ok()) return store.error();
  LOOM_TRY(store->load_run(run_id));  // NotFound for an unknown run, not empty curves
  auto metrics = store->load_metrics(run_id);
  if (!metrics.ok()) return metrics.error();
  std::vector<MetricSeries> out;
  for (const std::string& name : names) out.push_back(make_metric_series(*metrics, name));
  return out;
}

MetricSeriesModel::MetricSeriesModel(QObject* parent) : QAbstractTableModel(parent) {}

loom::Status MetricSeriesModel::load(const QString& dbPath, std::int64_t runId,
                                     const std::vector<std::string>& names) {
  auto series = load_metric_series(dbPath.toStdString(), runId, names);
  if (!series.ok()) return series.status();
  setSeries(std::move(series).value());
  return {};
}

void MetricSeriesModel::setSeries(std::vector<MetricSeries> series) {
  beginResetModel();
  series_ = std::move(series);
  endResetModel();
}

int MetricSeriesModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(series_.size());
}

int MetricSeriesModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant MetricSeriesModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const MetricSeries& s = series(index.row());
  switch (role) {
    case Qt::DisplayRole: {
      const QVariant v = columnValue(s, index.column());
      // Four significant digits: enough to tell curves apart in a legend.
      return v.typeId() == QMetaType::Double ? QVariant(QString::number(v.toDouble(), 'g', 4)) : v;
    }
    case SortRole: return columnValue(s, index.column());
    case PointsRole: return QVariant::fromValue(s.points);
    default: return {};
  }
}

// Raw value of a column; empty for a series with no points.
QVariant MetricSeriesModel::columnValue(const MetricSeries& s, int column) const {
  if (column == Name) return s.name;
  if (column == Points) return static_cast<int>(s.points.size());
  if (s.points.isEmpty()) return {};
  auto byY = [](const QPointF& a, const QPointF& b) { return a.y() < b.y(); };
  switch (column) {
    case Last: return s.points.back().y();
    case Min: return std::min_element(s.points.begin(), s.points.end(), byY)->y();
    case Max: return std::max_element(s.points.begin(), s.points.end(), byY)->y();
    default: return {};
  }
}

QVariant MetricSeriesModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Name: return tr("Metric");
    case Points: return tr("Points");
    case Last: return tr("Last");
    case Min: return tr("Min");
    case Max: return tr("Max");
    default: return {};
  }
}

QVector<QPointF> MetricSeriesModel::points(const QString& name) const {
  for (const MetricSeries& s : series_) {
    if (s.name == name) return s.points;
  }
  return {};
}

}  // namespace loom::ui
