// DesignerPanel (designer_panel.h).
#include "loom/ui/designer/designer_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QTableView>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>

#include "delegates.h"
#include "error_list.h"
#include "loom/ui/designer/layer_list_model.h"

namespace loom::ui {

DesignerPanel::DesignerPanel(PlanDocument* doc, QWidget* parent)
    : QWidget(parent), doc_(doc), model_(new LayerListModel(doc, this)), view_(new QTableView), totals_(new QLabel) {
  auto* bar = new QToolBar;
  auto* add = new QToolButton;
  add->setText(tr("Add layer"));
  add->setToolTip(tr("Add a layer of a kind after the selected row (inside a branch when a branch row is selected)"));
  add->setPopupMode(QToolButton::InstantPopup);
  auto* menu = new QMenu(add);
  for (int k = 0; k <= static_cast<int>(loom::LayerKind::Parallel); ++k) {
    const auto kind = static_cast<loom::LayerKind>(k);
    menu->addAction(QString::fromUtf8(loom::layer_kind_name(kind).data()), this,
                    [this, kind] { select(model_->insertLayer(currentRow() >= 0 ? currentRow() : model_->rowCount() - 1, kind)); });
  }
  add->setMenu(menu);
  bar->addWidget(add);
  // Short labels, so that the whole bar fits a laptop-width dock; the tooltips say more.
  bar->addAction(tr("Remove"), this, [this] {
    const int row = currentRow();
    if (model_->removeLayer(row)) select(std::min(row, model_->rowCount() - 1));
  })->setToolTip(tr("Remove the selected layer (a branch row removes the whole branch)"));
  bar->addAction(tr("Up"), this, [this] { select(model_->moveLayer(currentRow(), -1)); })
      ->setToolTip(tr("Move the selected layer up within its list"));
  bar->addAction(tr("Down"), this, [this] { select(model_->moveLayer(currentRow(), 1)); })
      ->setToolTip(tr("Move the selected layer down within its list"));
  bar->addAction(tr("Branch"), this, [this] { select(model_->addBranch(currentRow())); })
      ->setToolTip(tr("Add a branch to the selected parallel block"));

  QStringList kinds;
  for (int k = 0; k <= static_cast<int>(loom::LayerKind::Parallel); ++k) {
    kinds << QString::fromUtf8(loom::layer_kind_name(static_cast<loom::LayerKind>(k)).data());
  }
  view_->setModel(model_);
  view_->setItemDelegateForColumn(LayerListModel::Type, new ChoiceDelegate(kinds, view_));
  view_->setItemDelegateForColumn(LayerListModel::Settings, new SettingsDelegate(view_));
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setSelectionMode(QAbstractItemView::SingleSelection);
  view_->verticalHeader()->hide();
  // Columns as wide as their text: a narrow dock scrolls sideways instead of cutting
  // "Settings" to "etting" and wrapping "out 256".
  view_->setWordWrap(false);
  // No stretched last column: with sideways scrolling it would push the right-aligned
  // stage numbers out of view.
  view_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  view_->horizontalHeader()->setStretchLastSection(false);
  view_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed |
                         QAbstractItemView::AnyKeyPressed);

  totals_->setTextFormat(Qt::PlainText);
  errors_ = makeErrorList();
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(bar);
  layout->addWidget(view_, 1);
  layout->addWidget(errors_);
  layout->addWidget(totals_);
  connect(doc_, &PlanDocument::planChanged, this, &DesignerPanel::refreshTotals);
  refreshTotals();
}

int DesignerPanel::currentRow() const {
  const QModelIndex current = view_->currentIndex();
  return current.isValid() ? current.row() : -1;
}

void DesignerPanel::select(int row) {
  if (row >= 0 && row < model_->rowCount()) view_->selectRow(row);
}

void DesignerPanel::refreshTotals() {
  // The model has reset by now (it connected to planChanged first), so columns fit the new text.
  view_->resizeColumnsToContents();
  // The model's errors, not the placement ones (the Placement tab lists those).
  showErrors(errors_, *doc_, [](const std::string& path) {
    return path.rfind("/model", 0) == 0 && (path.size() < 6 || path.compare(path.size() - 6, 6, "/stage") != 0);
  });
  QStringList lines;
  const int ranks = std::clamp(loom::world_size(doc_->plan()), 0, 64);
  for (int rank = 0; rank < ranks; ++rank) lines << model_->deviceTotals(rank);
  if (loom::world_size(doc_->plan()) > ranks) lines << tr("...");
  totals_->setText(lines.join(QLatin1Char('\n')));
}

}  // namespace loom::ui
