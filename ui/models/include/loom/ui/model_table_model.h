// The designer's layer table: one row per layer of a plan's model as loom::infer_model
// sees it (pre-order, so a parallel block is followed by its branches' layers), with
// shapes, parameters and memory. Rows whose JSON path carries an inference error are
// marked so the editor can point at the exact layer a user must fix.
#pragma once

#include <QAbstractTableModel>

#include <cstdint>
#include <vector>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"

namespace loom::ui {

class ModelTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Name, Type, Stage, Input, Output, Params, Memory, ColumnCount };

  explicit ModelTableModel(QObject* parent = nullptr);

  // Re-infers the model and resets the table. Inference errors do not stop it: the
  // rows it could build are shown and the problems are kept in errors().
  void setPlan(const loom::Plan& plan);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  const loom::ModelInfo& modelInfo() const { return info_; }
  const std::vector<loom::PlanError>& errors() const { return errors_; }
  // Errors attached to a row: those whose path is the row's JSON path or lies inside it
  // (a field such as "/out"), but not inside a nested layer that has its own row.
  std::vector<loom::PlanError> rowErrors(int row) const;
  // Errors that belong to no layer (e.g. "/model/input").
  std::vector<loom::PlanError> modelErrors() const;

  const loom::LayerInfo& layer(int row) const { return info_.layers.at(static_cast<std::size_t>(row)); }
  int rowForJsonPath(const QString& jsonPath) const;  // -1 when no layer has that path

  std::int64_t totalParams() const { return info_.total_params; }
  // Weights + activations of every layer; stageMemoryBytes adds gradients and
  // optimizer state on top, as infer_model computes it.
  std::int64_t totalMemoryBytes() const;
  int stageCount() const { return static_cast<int>(info_.stage_memory_bytes.size()); }
  std::int64_t stageParams(int stage) const;
  std::int64_t stageMemoryBytes(int stage) const;

  // A layer's own memory as the Memory column shows it: weights + output activations
  // for the global batch (no gradient/optimizer copies; those are per stage).
  static std::int64_t layerMemoryBytes(const loom::LayerInfo& layer);

 private:
  QVariant displayData(const loom::LayerInfo& layer, int column) const;
  QVariant sortData(const loom::LayerInfo& layer, int column) const;
  QString toolTip(int row) const;
  void attachErrors();

  loom::ModelInfo info_;
  std::vector<loom::PlanError> errors_;
  std::vector<std::vector<std::size_t>> row_errors_;  // indices into errors_, per row
  std::vector<std::size_t> model_errors_;             // indices into errors_ with no row
};

}  // namespace loom::ui
