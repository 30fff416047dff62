// PlacementPanel (placement_panel.h). The mouse is handled on the viewport so a drag
// paints instead of toggling single check boxes; the model merges the stroke.
#include "loom/ui/designer/placement_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QMouseEvent>
#include <QTableView>
#include <QVBoxLayout>

#include "error_list.h"
#include "loom/ui/designer/placement_model.h"

namespace loom::ui {

PlacementPanel::PlacementPanel(PlanDocument* doc, QWidget* parent)
    : QWidget(parent), model_(new PlacementModel(doc, this)), view_(new QTableView) {
  view_->setModel(model_);
  view_->setSelectionMode(QAbstractItemView::NoSelection);
  view_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  view_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  view_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  view_->verticalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  view_->viewport()->installEventFilter(this);
  auto* hint = new QLabel(tr("Press and drag across cells to place layers on a device's stage."));
  hint->setWordWrap(true);
  auto* errors = makeErrorList();
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(view_, 1);
  layout->addWidget(errors);
  layout->addWidget(hint);
  // Where layers run: their stages, and the stage count against the layers placed.
  auto refresh = [errors, doc] {
    showErrors(errors, *doc, [](const std::string& path) {
      const bool layer_stage = path.rfind("/model", 0) == 0 && path.size() >= 6 &&
                               path.compare(path.size() - 6, 6, "/stage") == 0;
      return layer_stage || path == "/parallel/stages";
    });
  };
  connect(doc, &PlanDocument::planChanged, this, refresh);
  refresh();
}

bool PlacementPanel::eventFilter(QObject* watched, QEvent* event) {
  if (watched != view_->viewport()) return QWidget::eventFilter(watched, event);
  switch (event->type()) {
    case QEvent::MouseButtonPress:
    case QEvent::MouseButtonDblClick: {
      auto* mouse = static_cast<QMouseEvent*>(event);
      if (mouse->button() != Qt::LeftButton) return false;
      painting_ = true;
      model_->beginDrag();
      paintAt(mouse->position().toPoint());
      return true;
    }
    case QEvent::MouseMove:
      if (!painting_) return false;
      paintAt(static_cast<QMouseEvent*>(event)->position().toPoint());
      return true;
    case QEvent::MouseButtonRelease:
      if (!painting_) return false;
      painting_ = false;
      model_->endDrag();
      return true;
    default: return false;
  }
}

void PlacementPanel::paintAt(const QPoint& viewportPos) {
  const QModelIndex index = view_->indexAt(viewportPos);
  if (index.isValid()) model_->place(index.row(), index.column());
}

}  // namespace loom::ui
