// Device and run colours for colors.h: the Okabe-Ito set first, because its hues stay
// apart for the common colour-vision deficiencies; kind and category colours live in
// span_kinds.cpp. The run swatch is an icon engine, so models can hold it headless.
#include "loom/ui/colors.h"

#include <QIconEngine>
#include <QPainter>
#include <QPixmap>

#include <algorithm>
#include <array>

namespace loom::ui {

namespace {

// The swatch as QIcon(QPixmap 12x12 filled) drew it: the same size (smaller only when
// asked for less), no upscaling, but no pixmap until a view paints it.
class SwatchEngine : public QIconEngine {
 public:
  explicit SwatchEngine(const QColor& color) : color_(color) {}
  QIconEngine* clone() const override { return new SwatchEngine(color_); }
  QSize actualSize(const QSize& size, QIcon::Mode, QIcon::State) override { return kSize.boundedTo(size); }
  void paint(QPainter* painter, const QRect& rect, QIcon::Mode, QIcon::State) override {
    painter->fillRect(QRect(rect.topLeft(), kSize.boundedTo(rect.size())), color_);
  }
  QPixmap pixmap(const QSize& size, QIcon::Mode, QIcon::State) override {
    QPixmap pixmap(kSize.boundedTo(size));
    pixmap.fill(color_);
    return pixmap;
  }

 private:
  static constexpr QSize kSize{12, 12};
  QColor color_;
};

}  // namespace

QColor device_color(int rank) {
  static const std::array<QColor, 12> kColors = {
      QColor(0x00, 0x72, 0xb2), QColor(0xe6, 0x9f, 0x00), QColor(0x00, 0x9e, 0x73), QColor(0xcc, 0x79, 0xa7),
      QColor(0x56, 0xb4, 0xe9), QColor(0xd5, 0x5e, 0x00), QColor(0xf0, 0xe4, 0x42), QColor(0x88, 0x88, 0x88),
      QColor(0x6a, 0x3d, 0x9a), QColor(0xb1, 0x59, 0x28), QColor(0x1b, 0x9e, 0x77), QColor(0xe7, 0x29, 0x8a)};
  if (rank < 0) return QColor(0x80, 0x80, 0x80);
  return kColors[static_cast<std::size_t>(rank) % kColors.size()];
}

// Tableau's first six: saturated enough for thin lines on white and on near-black.
QColor run_color(int index) {
  static const std::array<QColor, 6> kColors = {QColor(0x1f, 0x77, 0xb4), QColor(0xd6, 0x27, 0x28),
                                                QColor(0x2c, 0xa0, 0x2c), QColor(0x94, 0x67, 0xbd),
                                                QColor(0xff, 0x7f, 0x0e), QColor(0x8c, 0x56, 0x4b)};
  return kColors[static_cast<std::size_t>(std::max(index, 0)) % kColors.size()];
}

QIcon swatch_icon(const QColor& color) { return QIcon(new SwatchEngine(color)); }

}  // namespace loom::ui
