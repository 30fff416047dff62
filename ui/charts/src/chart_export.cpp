// save_chart and the chart's "Save chart as…" menu (chart_export.h).
#include "loom/ui/charts/chart_export.h"

#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>
#include <QMessageBox>

#include <qcustomplot.h>

#ifdef LOOM_HAVE_SVG
#include <QSvgGenerator>
#endif

namespace loom::ui::charts {

namespace {

#ifdef LOOM_HAVE_SVG
bool save_svg(QCustomPlot* plot, const QString& path) {
  QSvgGenerator svg;
  svg.setFileName(path);
  svg.setSize(plot->size());
  svg.setViewBox(QRect(QPoint(0, 0), plot->size()));
  svg.setTitle(plot->objectName());
  QCPPainter painter;
  if (!painter.begin(&svg)) return false;
  plot->toPainter(&painter, plot->width(), plot->height());
  return painter.end();
}
#endif

}  // namespace

QStringList chart_formats() {
#ifdef LOOM_HAVE_SVG
  return {"png", "svg", "pdf"};
#else
  return {"png", "pdf"};
#endif
}

QString save_chart(QCustomPlot* plot, const QString& path) {
  const QString format = QFileInfo(path).suffix().toLower();
  bool ok = false;
  if (format == "png") {
    ok = plot->savePng(path, plot->width(), plot->height(), 2.0);
  } else if (format == "pdf") {
    ok = plot->savePdf(path, plot->width(), plot->height(), QCP::epNoCosmetic, QStringLiteral("Loom"),
                       plot->objectName());
#ifdef LOOM_HAVE_SVG
  } else if (format == "svg") {
    ok = save_svg(plot, path);
#endif
  } else {
    return QObject::tr("%1: unknown picture format \"%2\"; use .%3")
        .arg(path, format, chart_formats().join(QStringLiteral(", .")));
  }
  return ok ? QString() : QObject::tr("%1 could not be written").arg(path);
}

void add_save_menu(QCustomPlot* plot) {
  plot->setContextMenuPolicy(Qt::CustomContextMenu);
  QObject::connect(plot, &QWidget::customContextMenuRequested, plot, [plot](const QPoint& pos) {
    QMenu menu(plot);
    menu.addAction(QObject::tr("Save chart as…"), plot, [plot] {
      QStringList filters;
      for (const QString& f : chart_formats()) filters << QObject::tr("%1 (*.%2)").arg(f.toUpper(), f);
      const QString path = QFileDialog::getSaveFileName(plot, QObject::tr("Save chart"), QStringLiteral("chart.png"),
                                                        filters.join(QStringLiteral(";;")));
      if (path.isEmpty()) return;
      const QString error = save_chart(plot, path);
      if (!error.isEmpty()) QMessageBox::warning(plot, QObject::tr("Chart not saved"), error);
    });
    menu.exec(plot->mapToGlobal(pos));
  });
}

}  // namespace loom::ui::charts
