// A compact legend of span kinds: a swatch and the name of each kind the run holds, in
// the one table's colours and names (span_kinds.h) for the current palette, wrapped onto
// as many lines as the width needs; hovering an entry explains the kind.
#pragma once

#include <QColor>
#include <QRect>
#include <QString>
#include <QWidget>
#include <cstdint>
#include <vector>

#include "loom/trace/event.h"

namespace loom::ui::timeline {

class KindLegend : public QWidget {
  Q_OBJECT
 public:
  explicit KindLegend(QWidget* parent = nullptr);

  // Bit k set: EventKind k is shown. Entries follow the table's order.
  void setKinds(std::uint32_t kinds);
  std::uint32_t kinds() const { return kinds_; }

  struct Entry {
    loom::trace::EventKind kind;
    QString name;
    QColor color;
    QRect rect;  // swatch and name, in widget coordinates, for the current width
  };
  const std::vector<Entry>& entries() const { return entries_; }

  // The first line starts indent px in and is height px tall (the entries centred in it),
  // so that the legend can flow around a widget placed at its top left (the timeline puts
  // the step navigator there).
  void setFirstLine(int indent, int height);

  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void changeEvent(QEvent* event) override;
  bool event(QEvent* event) override;

 private:
  void rebuild();
  // Lays the entries out for a width; returns the height used.
  int layout(int width, std::vector<Entry>* entries) const;

  std::uint32_t kinds_ = 0;
  int indent_ = 0, first_height_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace loom::ui::timeline
