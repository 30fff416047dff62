// The device list: one row per rank (colour, kind, host, GPU index, role) with buttons
// to add a replica or remove the selected rank's replica (or server), and the devices'
// errors listed under the table in the window's words.
#pragma once

#include <QWidget>

#include "loom/ui/designer/plan_document.h"

class QTableView;

namespace loom::ui {

class DeviceTableModel;

class DevicesPanel : public QWidget {
  Q_OBJECT

 public:
  explicit DevicesPanel(PlanDocument* doc, QWidget* parent = nullptr);

  QTableView* view() const { return view_; }
  DeviceTableModel* model() const { return model_; }

 private:
  DeviceTableModel* model_;
  QTableView* view_;
};

}  // namespace loom::ui
