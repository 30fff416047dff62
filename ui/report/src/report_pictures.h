// The report's pictures, drawn by the workbench's widgets offscreen (internal to
// loom_ui_report).
#pragma once

#include <QColor>
#include <QImage>
#include <QString>

#include <cstdint>
#include <vector>

#include "loom/analysis/summary.h"
#include "loom/trace/records.h"
#include "loom/trace/event.h"

namespace loom::ui::report::detail {

struct RunCurves {
  QString label;
  double samples_per_step = 1;
  std::vector<trace::MetricRecord> metrics;
  std::vector<std::pair<int, std::int64_t>> origins;  // rank, its first step's start (own clock)
};

// Loss and test accuracy of every run overlaid (OverlayCharts), against step.
QImage curves_picture(const std::vector<RunCurves>& runs, int width_px);

// One run's per-rank breakdown (BreakdownChart), with its pipeline stages when present.
QImage breakdown_picture(const analysis::RunSummary& summary, int width_px);

struct RunTimeline {
  std::vector<trace::RankRecord> clocks;
  std::vector<std::pair<int, std::vector<trace::Event>>> events;  // per rank
  std::vector<std::string> layer_names;
};

// Each run's timeline from the start of `step` (a little before), all over the same time
// span: three times the first run's step. Runs without that step show their first 3 steps'
// worth from their start.
std::vector<QImage> timeline_pictures(const std::vector<RunTimeline>& runs, int step, int width_px);

}  // namespace loom::ui::report::detail
