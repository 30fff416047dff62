// Palette-driven plot styling for the charts (plot_style.h).
#include "plot_style.h"

#include <qcustomplot.h>

namespace loom::ui::charts::detail {

namespace {

void style_axis(QCPAxis* axis, const QColor& text, const QColor& grid) {
  const QPen pen(text, 0);
  axis->setBasePen(pen);
  axis->setTickPen(pen);
  axis->setSubTickPen(pen);
  axis->setTickLabelColor(text);
  axis->setLabelColor(text);
  axis->grid()->setPen(QPen(grid, 0, Qt::DotLine));
  axis->grid()->setZeroLinePen(Qt::NoPen);
}

void style_legend(QCPLegend* legend, const QPalette& palette) {
  QColor fill = palette.color(QPalette::Base);
  fill.setAlpha(210);  // legends inside an axis rect stay legible over the curves
  legend->setBrush(fill);
  legend->setBorderPen(QPen(palette.color(QPalette::Mid), 0));
  legend->setTextColor(palette.color(QPalette::Text));
  // itemCount() counts the grid's cells; a wrapped legend's last row may have empty ones.
  for (int i = 0; i < legend->itemCount(); ++i)
    if (QCPAbstractLegendItem* item = legend->item(i)) item->setTextColor(palette.color(QPalette::Text));
}

}  // namespace

void apply_palette(QCustomPlot* plot, const QPalette& palette) {
  const QColor text = palette.color(QPalette::WindowText);
  // Mid is too close to the dark Window colour; a translucent text colour reads on both.
  QColor grid = text;
  grid.setAlpha(60);
  plot->setBackground(palette.brush(QPalette::Window));
  for (QCPAxisRect* rect : plot->axisRects()) {
    rect->setBackground(palette.brush(QPalette::Base));
    for (QCPAxis* axis : rect->axes()) style_axis(axis, text, grid);
  }
  for (QCPLayoutElement* element : plot->plotLayout()->elements(true)) {
    if (auto* legend = qobject_cast<QCPLegend*>(element)) style_legend(legend, palette);
    if (auto* title = qobject_cast<QCPTextElement*>(element)) title->setTextColor(text);
  }
  for (int i = 0; i < plot->itemCount(); ++i) {
    if (auto* item = qobject_cast<QCPItemText*>(plot->item(i))) item->setColor(text);
  }
}

void put_legend_below(QCustomPlot* plot, int columns) {
  QCPLegend* legend = plot->legend;
  legend->setVisible(true);
  plot->axisRect()->insetLayout()->take(legend);
  plot->plotLayout()->addElement(plot->plotLayout()->rowCount(), 0, legend);
  legend->setWrap(columns);  // before the fill order, which rearranges with the wrap it finds
  legend->setFillOrder(QCPLegend::foColumnsFirst);
  legend->setMargins(QMargins(4, 2, 4, 2));
  // A grid's maximum width is the sum of its items' maxima, so a legend with no items would
  // cap the whole layout column (axis rect and title) at its margins. An explicit large
  // maximum (below QWIDGETSIZE_MAX, which means "use the hint") keeps the column free.
  legend->setMaximumSize(1 << 20, QWIDGETSIZE_MAX);
  // A tiny stretch factor keeps the legend row at its minimum height.
  plot->plotLayout()->setRowStretchFactor(plot->plotLayout()->rowCount() - 1, 0.001);
}

void place_legend(QCustomPlot* plot, bool beside) {
  QCPLegend* legend = plot->legend;
  QCPLayoutGrid* main = plot->plotLayout();
  auto* holder = qobject_cast<QCPLayoutGrid*>(legend->layout());
  if (holder == nullptr || (holder != main) == beside) return;
  holder->take(legend);
  if (holder != main) {  // the side column: gone with the legend
    main->take(holder);
    delete holder;
  }
  main->simplify();  // drops the emptied row or column
  if (!beside) {
    main->addElement(main->rowCount(), 0, legend);
    main->setRowStretchFactor(main->rowCount() - 1, 0.001);
    return;
  }
  int row = 0;  // the axis rect's row (under a title, if any)
  while (row < main->rowCount() && main->element(row, 0) != plot->axisRect()) ++row;
  auto* side = new QCPLayoutGrid;
  main->addElement(row, 1, side);
  side->addElement(0, 0, legend);
  side->addElement(1, 0, new QCPLayoutElement(plot));
  side->setRowSpacing(0);
  side->setRowStretchFactor(0, 0.001);
  main->setColumnStretchFactor(1, 0.001);
}

void put_legend_right(QCustomPlot* plot) {
  QCPLegend* legend = plot->legend;
  legend->setVisible(true);
  plot->axisRect()->insetLayout()->take(legend);
  // The legend keeps its own height at the top of a side column, an empty element under it
  // taking the rest: a legend stretched to the plot's height spreads its entries apart.
  auto* side = new QCPLayoutGrid;
  plot->plotLayout()->addElement(0, 1, side);
  side->addElement(0, 0, legend);
  side->addElement(1, 0, new QCPLayoutElement(plot));
  side->setRowSpacing(0);
  side->setRowStretchFactor(0, 0.001);
  legend->setMargins(QMargins(4, 2, 4, 2));
  // The axis rect takes the width the legend leaves; the legend keeps its own width.
  plot->plotLayout()->setColumnStretchFactor(1, 0.001);
}

void add_title(QCustomPlot* plot, const QString& title) {
  plot->plotLayout()->insertRow(0);
  QFont font = plot->font();
  font.setBold(true);
  plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, font));
}

QColor metric_color(const QString& metric) {
  if (metric == QLatin1String("loss")) return QColor(0x00, 0x72, 0xb2);
  if (metric == QLatin1String("test_loss")) return QColor(0x56, 0xb4, 0xe9);
  if (metric == QLatin1String("train_accuracy")) return QColor(0xe6, 0x9f, 0x00);
  if (metric == QLatin1String("test_accuracy")) return QColor(0xd5, 0x5e, 0x00);
  if (metric == QLatin1String("samples_per_s")) return QColor(0x00, 0x9e, 0x73);
  return QColor(0x88, 0x88, 0x88);
}

}  // namespace loom::ui::charts::detail
