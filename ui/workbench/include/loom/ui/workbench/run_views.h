// The live views of one run, fed by RunFeed batches: the per-device timeline, the
// training charts, the per-device breakdown and the staleness chart. Keeps the main
// window free of the bookkeeping (clock records, layer names, how fresh the last drawn
// event is).
#pragma once

#include <QObject>
#include <QString>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/ui/workbench/run_feed.h"

namespace loom::ui {

namespace timeline {
class TimelineView;
class ReplayBar;
}
namespace charts {
class TrainingCharts;
class BreakdownChart;
class StalenessChart;
class ServingChart;
}  // namespace charts

// The layer names of a stored run's plan (what the timeline's tooltips call its layers);
// empty when the plan does not parse.
std::vector<std::string> plan_layer_names(const QString& plan_json);

class RunViews : public QObject {
  Q_OBJECT

 public:
  explicit RunViews(QObject* parent = nullptr);

  timeline::TimelineView* timeline() const { return timeline_; }
  charts::TrainingCharts* training() const { return training_; }
  charts::BreakdownChart* breakdown() const { return breakdown_; }
  charts::StalenessChart* staleness() const { return staleness_; }
  charts::ServingChart* serving() const { return serving_; }
  timeline::ReplayBar* replay() const { return replay_; }

  // Empties every view for a new run; layer names label the timeline's tooltips.
  void clear(std::vector<std::string> layer_names);
  void apply(const FeedBatch& batch);

  std::int64_t eventsShown() const { return events_shown_; }
  // The ranks' clock records changed after events were drawn (a live run's end-of-run
  // clock estimate): those events were aligned with the older offsets.
  bool clocksChangedAfterEvents() const { return clocks_changed_after_events_; }
  // End time (steady clock, ns) of the newest event handed to the timeline; 0 before any.
  std::int64_t newestEventEndNs() const { return newest_end_ns_; }

 signals:
  void eventsShownChanged(qint64 count);

 private:
  timeline::TimelineView* timeline_;
  charts::TrainingCharts* training_;
  charts::BreakdownChart* breakdown_;
  charts::StalenessChart* staleness_;
  charts::ServingChart* serving_;
  timeline::ReplayBar* replay_;
  std::int64_t events_shown_ = 0;
  std::int64_t newest_end_ns_ = 0;
  bool clocks_changed_after_events_ = false;
};

}  // namespace loom::ui
