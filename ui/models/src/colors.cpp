// Colour tables for colors.h. Hues were picked to stay apart for the common colour-vision
// deficiencies (the Okabe-Ito set for devices) and to keep kinds of one family close.
#include "loom/ui/colors.h"

#include <array>

namespace loom::ui {

using loom::trace::EventKind;

QColor event_kind_color(EventKind kind) {
  switch (kind) {
    case EventKind::Forward: return QColor(0x4c, 0x9b, 0xe8);
    case EventKind::Backward: return QColor(0x2f, 0x6d, 0xb5);
    case EventKind::Loss: return QColor(0x6f, 0xb7, 0xf0);
    case EventKind::Optimizer: return QColor(0x3c, 0xb3, 0x71);
    case EventKind::DataLoad: return QColor(0x9a, 0xc8, 0x5a);
    case EventKind::Evaluate: return QColor(0x7f, 0xc9, 0xc0);
    case EventKind::AllReduce: return QColor(0xf0, 0x8a, 0x24);
    case EventKind::Broadcast: return QColor(0xe0, 0xa0, 0x40);
    case EventKind::Barrier: return QColor(0xc0, 0x80, 0x30);
    case EventKind::Send: return QColor(0xe5, 0x5b, 0x3c);
    case EventKind::Recv: return QColor(0xc9, 0x3f, 0x5a);
    case EventKind::Push: return QColor(0xd9, 0x5f, 0x0e);
    case EventKind::Pull: return QColor(0xb8, 0x4a, 0x8a);
    case EventKind::Wait: return QColor(0xa0, 0xa0, 0xa0);
    case EventKind::Idle: return QColor(0xc8, 0xc8, 0xc8);
    case EventKind::InjectedDelay: return QColor(0x8e, 0x5c, 0xc4);
    case EventKind::Step: return QColor(0x70, 0x78, 0x88);
    case EventKind::Setup: return QColor(0xb0, 0xa0, 0x80);
  }
  return QColor(0x80, 0x80, 0x80);
}

QColor device_color(int rank) {
  static const std::array<QColor, 12> kColors = {
      QColor(0x00, 0x72, 0xb2), QColor(0xe6, 0x9f, 0x00), QColor(0x00, 0x9e, 0x73), QColor(0xcc, 0x79, 0xa7),
      QColor(0x56, 0xb4, 0xe9), QColor(0xd5, 0x5e, 0x00), QColor(0xf0, 0xe4, 0x42), QColor(0x88, 0x88, 0x88),
      QColor(0x6a, 0x3d, 0x9a), QColor(0xb1, 0x59, 0x28), QColor(0x1b, 0x9e, 0x77), QColor(0xe7, 0x29, 0x8a)};
  if (rank < 0) return QColor(0x80, 0x80, 0x80);
  return kColors[static_cast<std::size_t>(rank) % kColors.size()];
}

QColor breakdown_color(BreakdownCategory category) {
  switch (category) {
    case BreakdownCategory::Compute: return event_kind_color(EventKind::Forward);
    case BreakdownCategory::Communication: return event_kind_color(EventKind::AllReduce);
    case BreakdownCategory::ExposedCommunication: return event_kind_color(EventKind::Send);
    case BreakdownCategory::Optimizer: return event_kind_color(EventKind::Optimizer);
    case BreakdownCategory::Data: return event_kind_color(EventKind::DataLoad);
    case BreakdownCategory::Idle: return event_kind_color(EventKind::Idle);
  }
  return QColor(0x80, 0x80, 0x80);
}

}  // namespace loom::ui
