// The workbench's colour vocabulary: one colour per device (rank), and, through
// span_kinds.h (the one table of span kinds and breakdown categories), one colour and one
// name per event kind and per breakdown category, for the light and the dark palette.
#pragma once

#include <QColor>
#include <QIcon>

#include "loom/ui/span_kinds.h"

namespace loom::ui {

// A distinct colour per rank, cycling after 12.
QColor device_color(int rank);

// The colour of the index-th run of a comparison, the same in every view of it (legend,
// curves, timeline band); 6 hues, one per comparable run, cycling after.
QColor run_color(int index);

// A 12 px square of `color`, as the comparison tables' headers show beside each run.
// Drawn when a view paints it, so a model can hand it out without a display (a QPixmap
// needs a QGuiApplication).
QIcon swatch_icon(const QColor& color);

}  // namespace loom::ui
