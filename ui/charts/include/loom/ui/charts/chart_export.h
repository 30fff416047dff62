// Saving a chart as a picture: PNG (at twice the on-screen resolution, for slides), SVG
// (vector, where Qt Svg is built in) or PDF (vector), chosen by the file's extension, in
// the palette the chart is drawn in. Every chart of the workbench offers it on a right
// click ("Save chart as…"); reports use save_chart directly.
#pragma once

#include <QString>
#include <QStringList>

class QCustomPlot;

namespace loom::ui::charts {

// The extensions save_chart understands, lower case, without the dot: png, pdf (and svg).
QStringList chart_formats();

// Writes the plot to `path`; "" on success, else what went wrong (an unknown extension
// names the ones that work; a file that cannot be written says so).
QString save_chart(QCustomPlot* plot, const QString& path);

// Adds "Save chart as…" to the plot's right-click menu: a file dialog, then save_chart;
// a failure is shown in a message box.
void add_save_menu(QCustomPlot* plot);

}  // namespace loom::ui::charts
