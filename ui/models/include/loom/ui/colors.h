// The workbench's colour vocabulary, in one place so the timeline, the breakdown bars and
// the designer agree: one colour per event kind (forward, backward, all-reduce, ...) and
// one per device (rank), readable on both the light and the dark palette.
#pragma once

#include <QColor>

#include "loom/profiles/event.h"

namespace loom::ui {

// Span colour for an event kind: compute in blues/greens, communication in oranges/reds,
// waiting and bubbles in greys, injected delay in purple.
QColor event_kind_color(loom::trace::EventKind kind);
// A distinct colour per rank, cycling after 12.
QColor device_color(int rank);
// The breakdown categories of analysis::RankBreakdown, coloured like their event kinds.
enum class BreakdownCategory { Compute, Communication, ExposedCommunication, Optimizer, Data, Idle };
QColor breakdown_color(BreakdownCategory category);

}  // namespace loom::ui
