// The report's pictures (report_pictures.h): the widgets are laid out offscreen
// (WA_DontShowOnScreen) so that they have their real geometry, then grabbed.
#include "report_pictures.h"

#include <QApplication>
#include <QWidget>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "loom/ui/charts/overlay_charts.h"
#include "loom/ui/charts/training_charts.h"
#include "loom/ui/colors.h"
#include "loom/ui/timeline/step_navigator.h"
#include "loom/ui/timeline/timeline_view.h"

namespace loom::ui::report::detail {

namespace {

constexpr int kLanePx = 17, kTimelineChromePx = 90, kStepsShown = 3;

QImage grab_offscreen(QWidget& widget, QSize size) {
  widget.setAttribute(Qt::WA_DontShowOnScreen);
  widget.resize(size);
  widget.show();
  QApplication::processEvents();
  return widget.grab().toImage();
}

}  // namespace

QImage curves_picture(const std::vector<RunCurves>& runs, int width_px) {
  charts::OverlayCharts charts;
  std::vector<charts::OverlayCharts::Run> list;
  for (std::size_t i = 0; i < runs.size(); ++i)
    list.push_back({runs[i].label, run_color(int(i)), runs[i].samples_per_step});
  charts.setRuns(list);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (const auto& [rank, t] : runs[i].origins) charts.setOrigin(int(i), rank, t);
    charts.appendMetrics(int(i), runs[i].metrics);
  }
  charts.replotNow();
  // A picture on paper has no controls: the "X axis" choice goes, the plots stay.
  for (QWidget* child : charts.findChildren<QWidget*>(Qt::FindDirectChildrenOnly))
    if (!qobject_cast<QCustomPlot*>(child)) child->hide();
  return grab_offscreen(charts, QSize(width_px, width_px * 5 / 8));
}

QImage breakdown_picture(const analysis::RunSummary& summary, int width_px) {
  charts::BreakdownChart chart;
  chart.setBreakdown(summary.ranks);
  if (summary.pipeline) chart.setPipeline(*summary.pipeline);
  const int rows = int(summary.ranks.size()) + (summary.pipeline ? int(summary.pipeline->stages_stats.size()) : 0);
  // At least as high as the legend's seven categories (at 220 px its first was cut off).
  return grab_offscreen(chart, QSize(width_px, std::clamp(140 + 34 * rows, 270, 700)));
}

std::vector<QImage> timeline_pictures(const std::vector<RunTimeline>& runs, int step, int width_px) {
  std::vector<std::unique_ptr<timeline::TimelineView>> views;
  double span = 0;
  for (const RunTimeline& run : runs) {
    auto view = std::make_unique<timeline::TimelineView>();
    view->setLayerNames(run.layer_names);
    view->setClocks(run.clocks);
    for (const auto& [rank, events] : run.events) view->appendEvents(rank, events);
    const auto range = view->data().step_range(step);
    if (span == 0 && range) span = kStepsShown * double(range->end_ns - range->begin_ns);
    views.push_back(std::move(view));
  }
  span = std::max(span, 1e6);
  std::vector<QImage> images;
  for (auto& view : views) {
    const auto range = view->data().step_range(step);
    const double anchor = range ? double(range->begin_ns) : 0.0;
    const int lanes = int(view->data().lanes().size());
    view->stepNavigator()->hide();  // its step box and zoom choice mean nothing on paper; the legend stays
    view->setAttribute(Qt::WA_DontShowOnScreen);
    view->resize(width_px, kTimelineChromePx + kLanePx * std::max(lanes, 2));
    view->show();
    QApplication::processEvents();
    view->setViewport({anchor - 0.05 * span, anchor + span, view->viewport().width_px});
    view->replotNow();
    images.push_back(view->grab().toImage());
  }
  return images;
}

}  // namespace loom::ui::report::detail
