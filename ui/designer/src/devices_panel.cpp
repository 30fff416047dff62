// DevicesPanel (devices_panel.h).
#include "loom/ui/designer/devices_panel.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>

#include "delegates.h"
#include "error_list.h"
#include "loom/ui/designer/device_table_model.h"

namespace loom::ui {

DevicesPanel::DevicesPanel(PlanDocument* doc, QWidget* parent)
    : QWidget(parent), model_(new DeviceTableModel(doc, this)), view_(new QTableView) {
  view_->setModel(model_);
  view_->setItemDelegateForColumn(DeviceTableModel::Kind, new ChoiceDelegate({"cpu", "gpu"}, view_));
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setSelectionMode(QAbstractItemView::SingleSelection);
  view_->verticalHeader()->hide();
  view_->horizontalHeader()->setStretchLastSection(true);
  view_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);

  auto* add = new QPushButton(tr("Add replica"));
  add->setToolTip(tr("Adds one device per pipeline stage: the plan needs data_parallel x stages workers"));
  auto* remove = new QPushButton(tr("Remove"));
  remove->setToolTip(tr("Removes the selected rank's replica (one device per stage), or that server"));
  connect(add, &QPushButton::clicked, model_, &DeviceTableModel::addDevice);
  connect(remove, &QPushButton::clicked, this, [this] {
    const QModelIndex current = view_->currentIndex();
    if (current.isValid()) model_->removeDevice(current.row());
  });
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(add);
  buttons->addWidget(remove);
  buttons->addStretch();
  auto* errors = makeErrorList();
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(buttons);
  layout->addWidget(view_, 1);
  layout->addWidget(errors);
  auto refresh = [errors, doc] {
    showErrors(errors, *doc, [](const std::string& path) { return path.rfind("/parallel/devices", 0) == 0; });
  };
  connect(doc, &PlanDocument::planChanged, this, refresh);
  refresh();
}

}  // namespace loom::ui
