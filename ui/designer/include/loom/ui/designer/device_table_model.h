// The plan's devices, one row per rank in rank order, with the role each rank plays
// (stage and replica, or parameter server) and its colour. Kind, host and GPU index are
// editable; rows come and go in whole replicas so the list always matches world_size.
#pragma once

#include <QAbstractTableModel>

#include "loom/ui/designer/plan_document.h"

namespace loom::ui {

class DeviceTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  // Kind's EditRole is "cpu" / "gpu"; Gpu's is the index (-1 for cpu devices).
  enum Column { Rank, Kind, Host, Gpu, Role, ColumnCount };

  explicit DeviceTableModel(PlanDocument* doc, QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  void addDevice();              // one more data-parallel replica (one device per stage)
  bool removeDevice(int row);    // that rank's replica, or that server; false for the last one

 private:
  PlanDocument* doc_;
};

}  // namespace loom::ui
