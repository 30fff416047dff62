// View > Critical path: the critical path across ranks of the step in the middle of the
// timeline (analysis::critical_path_of_step over the events the timeline holds, already
// on rank 0's clock), drawn over the lanes, with a line saying how long it is, what it is
// made of and where its time went (per rank, kind and layer). Follows the view: moving to
// another step redraws it; new events recompute it.
#pragma once

#include <QObject>
#include <QString>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/plan.h"
#include "loom/trace/event.h"

namespace loom::ui {

namespace timeline {
class TimelineView;
}

class PathOverlay : public QObject {
  Q_OBJECT

 public:
  PathOverlay(timeline::TimelineView* view, QObject* parent = nullptr);

  void setEnabled(bool on);
  bool isEnabled() const { return enabled_; }
  // The plan of the run on screen: which ranks reduce together, and the layers' names.
  void setPlan(const std::optional<loom::Plan>& plan);
  int step() const { return step_; }  // the step whose path is drawn; -1 for none
  QString summary() const { return summary_; }

 signals:
  void summaryChanged(const QString& text);

 private:
  void refresh();
  void compute(int step);

  timeline::TimelineView* view_;
  bool enabled_ = false;
  std::optional<loom::Plan> plan_;
  std::vector<std::string> layer_names_;
  std::vector<std::vector<loom::trace::Event>> events_by_rank_;  // rebuilt when the data changes
  std::uint64_t events_revision_ = ~std::uint64_t{0};
  int step_ = -1;
  QString summary_;
};

}  // namespace loom::ui
