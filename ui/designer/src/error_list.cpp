// The error list under a designer panel (error_list.h).
#include "error_list.h"

#include <QStringList>

#include "loom/ui/designer/plan_help.h"

namespace loom::ui {

QLabel* makeErrorList() {
  auto* label = new QLabel;
  label->setObjectName("errorList");
  label->setWordWrap(true);
  label->setTextFormat(Qt::PlainText);
  label->setStyleSheet(QStringLiteral("color: #e53935;"));  // readable on light and dark
  label->setVisible(false);
  return label;
}

void showErrors(QLabel* label, const PlanDocument& doc, const std::function<bool(const std::string& path)>& concerns) {
  QStringList lines;
  for (const loom::PlanError& e : doc.errors()) {
    if (!concerns(e.path)) continue;
    const ShownError shown = describePlanError(doc.plan(), e);
    lines << QStringLiteral("\u26a0 %1: %2").arg(shown.place, shown.text);
  }
  label->setText(lines.join(QLatin1Char('\n')));
  label->setVisible(!lines.isEmpty());
}

}  // namespace loom::ui
