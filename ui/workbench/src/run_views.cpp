// RunViews (see run_views.h). The widgets are created parentless here and adopted by the
// main window's docks; the window owns them from then on.
#include "loom/ui/workbench/run_views.h"

#include <algorithm>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/ui/charts/training_charts.h"
#include "loom/ui/timeline/replay_bar.h"
#include "loom/ui/timeline/timeline_view.h"

namespace loom::ui {

namespace {
constexpr double kFollowWindowNs = 2e9;
}  // namespace

std::vector<std::string> plan_layer_names(const QString& plan_json) {
  std::vector<std::string> names;
  auto parsed = loom::parse_plan(plan_json.toStdString());
  if (!parsed.ok()) return names;
  for (const auto& layer : loom::infer_model(*parsed.plan, nullptr).layers) names.push_back(layer.name);
  return names;
}

RunViews::RunViews(QObject* parent)
    : QObject(parent),
      timeline_(new timeline::TimelineView),
      training_(new charts::TrainingCharts),
      breakdown_(new charts::BreakdownChart),
      staleness_(new charts::StalenessChart),
      serving_(new charts::ServingChart),
      replay_(new timeline::ReplayBar(timeline_)) {
  // The training charts follow a replay: only the steps completed by its cursor.
  connect(replay_, &timeline::ReplayBar::cursorChanged, this, [this](std::optional<double> t, int completed) {
    training_->setStepLimit(t ? std::optional<std::int64_t>(completed - 1) : std::nullopt);
  });
}

void RunViews::clear(std::vector<std::string> layer_names) {
  replay_->setReplaying(false);
  timeline_->clear();
  timeline_->setLayerNames(std::move(layer_names));
  // Follow-latest keeps the window's width: start with the last two seconds, wide
  // enough to show a few steps of every rank, narrow enough to see the spans.
  timeline_->setViewport({-kFollowWindowNs, 0, timeline_->viewport().width_px});
  timeline_->setFollowLatest(true);
  training_->clear();
  breakdown_->clear();
  staleness_->clear();
  serving_->clear();
  events_shown_ = 0;
  newest_end_ns_ = 0;
  clocks_changed_after_events_ = false;
  emit eventsShownChanged(0);
}

void RunViews::apply(const FeedBatch& batch) {
  if (batch.first && !batch.plan_json.isEmpty()) {
    // A saved run carries its own plan: label its layers by that plan's names.
    auto names = plan_layer_names(batch.plan_json);
    if (!names.empty()) timeline_->setLayerNames(std::move(names));
  }
  if (batch.ranks_changed) {
    timeline_->setClocks(batch.ranks);
    clocks_changed_after_events_ = clocks_changed_after_events_ || events_shown_ > 0;
  }
  for (const RankEvents& r : batch.events) {
    timeline_->appendEvents(r.rank, r.events);
    events_shown_ += static_cast<std::int64_t>(r.events.size());
    for (const auto& e : r.events) newest_end_ns_ = std::max(newest_end_ns_, e.end_ns);
  }
  if (!batch.metrics.empty()) {
    training_->appendMetrics(batch.metrics);
    serving_->appendMetrics(batch.metrics);
  }
  // A saved run comes through the same feed in pages, so this fills the chart for it too.
  if (!batch.updates.empty()) {
    staleness_->appendUpdates(batch.updates);
    timeline_->appendUpdates(batch.updates);
  }
  if (batch.breakdown_changed) {
    breakdown_->setBreakdown(batch.breakdown);
    if (batch.pipeline) breakdown_->setPipeline(*batch.pipeline);
  }
  if (!batch.events.empty()) emit eventsShownChanged(events_shown_);
}

}  // namespace loom::ui
