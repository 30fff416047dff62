// KindLegend (kind_legend.h): laid out like words in a paragraph, so that at 1280 px the
// kinds of a data-parallel run fit on one line beside the step navigator and a pipeline's
// wrap onto a second one instead of being cut.
#include "loom/ui/timeline/kind_legend.h"

#include <QEvent>
#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include "loom/ui/span_kinds.h"

namespace loom::ui::timeline {

namespace {
constexpr int kSwatch = 10, kGap = 4, kEntryGap = 12, kMargin = 2;
}  // namespace

KindLegend::KindLegend(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("kindLegend"));
  QSizePolicy policy(QSizePolicy::Preferred, QSizePolicy::Preferred);
  policy.setHeightForWidth(true);
  setSizePolicy(policy);
  setToolTip(tr("Span kinds in this run. Zoomed out, a column of spans too narrow to draw one by one stacks "
                "these colours by the share of time each kind took in it; empty height is time with no span."));
}

void KindLegend::setKinds(std::uint32_t kinds) {
  if (kinds == kinds_) return;
  kinds_ = kinds;
  rebuild();
  updateGeometry();
}

void KindLegend::setFirstLine(int indent, int height) {
  if (indent == indent_ && height == first_height_) return;
  indent_ = indent, first_height_ = height;
  rebuild();
  updateGeometry();
}

int KindLegend::layout(int width, std::vector<Entry>* entries) const {
  const QFontMetrics fm = fontMetrics();
  const int line = std::max(fm.height(), kSwatch) + 2;
  const int first = std::max(line, first_height_);
  const bool dark = is_dark(palette());
  int x = indent_ + kMargin, y = (first - line) / 2, bottom = first_height_;
  bool first_line = true, at_line_start = true;
  for (const SpanKindStyle& style : span_kinds()) {
    if (!(kinds_ & (1u << static_cast<unsigned>(style.kind)))) continue;
    const QString name = style.displayName();
    const int w = kSwatch + kGap + fm.horizontalAdvance(name);
    if (!at_line_start && x + w > width - kMargin) {  // wrap
      y = first_line ? first : y + line;
      x = kMargin, first_line = false;
    } else if (first_line && at_line_start && x + w > width - kMargin && indent_ > 0) {
      y = first, x = kMargin, first_line = false;  // not even one entry beside the widget
    }
    if (entries) entries->push_back(Entry{style.kind, name, style.color(dark), QRect(x, y, w, line)});
    bottom = std::max(bottom, y + line);
    x += w + kEntryGap;
    at_line_start = false;
  }
  return bottom == 0 ? 0 : bottom + kMargin;
}

void KindLegend::rebuild() {
  entries_.clear();
  layout(std::max(1, width()), &entries_);
  update();
}

int KindLegend::heightForWidth(int width) const { return layout(width, nullptr); }

QSize KindLegend::sizeHint() const {
  std::vector<Entry> one_line;
  layout(1 << 20, &one_line);  // everything on the first line
  const int w = one_line.empty() ? 0 : one_line.back().rect.right() + kMargin;
  return QSize(w, heightForWidth(w));
}

QSize KindLegend::minimumSizeHint() const {
  // As narrow as the widest entry (one per line); the height follows from heightForWidth.
  int widest = 0;
  std::vector<Entry> all;
  layout(1 << 20, &all);
  for (const Entry& e : all) widest = std::max(widest, e.rect.width());
  return QSize(widest + 2 * kMargin, 0);
}

void KindLegend::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setPen(palette().color(QPalette::WindowText));
  for (const Entry& e : entries_) {
    const QRect swatch(e.rect.left(), e.rect.center().y() - kSwatch / 2, kSwatch, kSwatch);
    p.fillRect(swatch, e.color);
    p.drawText(e.rect.adjusted(kSwatch + kGap, 0, 0, 0), Qt::AlignVCenter | Qt::AlignLeft, e.name);
  }
}

void KindLegend::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  rebuild();
}

void KindLegend::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::FontChange) rebuild();
}

bool KindLegend::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    for (const Entry& e : entries_) {
      if (e.rect.contains(help->pos())) {
        QToolTip::showText(help->globalPos(), kind_tooltip(span_kind(e.kind)), this, e.rect);
        return true;
      }
    }
  }
  return QWidget::event(event);
}

}  // namespace loom::ui::timeline
