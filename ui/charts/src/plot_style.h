// Shared look of the chart plots: colours for text, axes, grid and legend taken from the
// widget's palette so a plot reads on light and dark Fusion palettes alike, reapplied on
// every QEvent::PaletteChange. Internal to loom_ui_charts.
#pragma once

#include <QColor>
#include <QPalette>
#include <QString>

class QCustomPlot;
class QCPLegend;

namespace loom::ui::charts::detail {

// Text, axes, grids, legends, titles and text items of every axis rect in the plot.
void apply_palette(QCustomPlot* plot, const QPalette& palette);

// Moves the plot's legend out of the axis rect into a row below it, items side by side,
// wrapping after `columns`, so it never hides data.
void put_legend_below(QCustomPlot* plot, int columns);

// Moves the plot's legend into a column right of the axis rect, one item per row: for a
// wide, short panel (a bottom dock at 1280x720), where rows below would leave the bars
// no height.
void put_legend_right(QCustomPlot* plot);

// Moves a legend that put_legend_below placed to beside the axis rect (beside: true; one
// entry a row, top-aligned, as put_legend_right places it) or back under it; nothing when
// it is there already. For a plot whose panel may be low or tall.
void place_legend(QCustomPlot* plot, bool beside);

// Adds a small bold title row above the plot's first axis rect.
void add_title(QCustomPlot* plot, const QString& title);

// Line colours for the metrics: fixed hues that stay readable on white and near-black
// (not device colours, which mean ranks elsewhere in the workbench).
QColor metric_color(const QString& metric);

}  // namespace loom::ui::charts::detail
