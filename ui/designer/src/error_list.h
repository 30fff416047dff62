// The errors a panel is about, listed under it in the window's words ("fc2 › Settings ›
// out: expected a positive integer, got 0"), so an error is next to the control it
// concerns and not only in the Run button's tooltip. Private to loom_ui_designer.
#pragma once

#include <QLabel>

#include <functional>
#include <string>

#include "loom/ui/designer/plan_document.h"

namespace loom::ui {

// A red, word-wrapped label, hidden while there is nothing to say.
QLabel* makeErrorList();
// Shows every error of `doc` whose JSON path `concerns` accepts; hides the label when none.
void showErrors(QLabel* label, const PlanDocument& doc, const std::function<bool(const std::string& path)>& concerns);

}  // namespace loom::ui
