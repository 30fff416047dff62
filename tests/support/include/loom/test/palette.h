// The dark palette GUI tests switch to, to check that what they paint follows the
// palette (and is not fixed to the light one).
#pragma once

#include <QColor>
#include <QPalette>

namespace loom::testing {

inline QPalette dark_palette() {
  QPalette p;
  p.setColor(QPalette::Window, QColor(0x2b, 0x2d, 0x31));
  p.setColor(QPalette::WindowText, QColor(0xdf, 0xe1, 0xe5));
  p.setColor(QPalette::Base, QColor(0x1e, 0x1f, 0x22));
  p.setColor(QPalette::Text, QColor(0xdf, 0xe1, 0xe5));
  return p;
}

}  // namespace loom::testing
