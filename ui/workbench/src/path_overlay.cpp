// PathOverlay (path_overlay.h).
#include "loom/ui/workbench/path_overlay.h"

#include <algorithm>

#include "loom/analysis/critical_path.h"
#include "loom/core/model_info.h"
#include "loom/ui/span_kinds.h"
#include "loom/ui/timeline/timeline_view.h"

namespace loom::ui {

namespace {

constexpr int kLongestShown = 3;  // entries of the path's profile named in the summary

QString ms(std::int64_t ns) { return QString::number(double(ns) / 1e6, 'f', 2); }

}  // namespace

PathOverlay::PathOverlay(timeline::TimelineView* view, QObject* parent) : QObject(parent), view_(view) {
  connect(view_, &timeline::TimelineView::viewportChanged, this, &PathOverlay::refresh);
  connect(view_, &timeline::TimelineView::dataChanged, this, &PathOverlay::refresh);
}

void PathOverlay::setEnabled(bool on) {
  enabled_ = on;
  step_ = -1;
  if (!on) {
    view_->setPathOverlay({});
    summary_.clear();
    emit summaryChanged(summary_);
    return;
  }
  refresh();
}

void PathOverlay::setPlan(const std::optional<loom::Plan>& plan) {
  plan_ = plan;
  layer_names_.clear();
  if (plan_)
    for (const auto& layer : loom::infer_model(*plan_, nullptr).layers) layer_names_.push_back(layer.name);
  events_revision_ = ~std::uint64_t{0};
  step_ = -1;
  if (enabled_) refresh();
}

// Recomputes when the step in the middle of the view or the events changed.
void PathOverlay::refresh() {
  if (!enabled_) return;
  const auto& data = view_->data();
  const timeline::Viewport v = view_->viewport();
  const int step = data.step_at(0.5 * (v.t0_ns + v.t1_ns));
  if (step == step_ && data.revision() == events_revision_) return;
  if (data.revision() != events_revision_) {
    events_by_rank_.clear();
    for (std::uint32_t i = 0; i < data.event_count(); ++i) {
      const auto rank = std::size_t(data.event_rank(i));
      if (events_by_rank_.size() <= rank) events_by_rank_.resize(rank + 1);
      events_by_rank_[rank].push_back(data.event(i));
    }
    events_revision_ = data.revision();
  }
  compute(step);
}

void PathOverlay::compute(int step) {
  step_ = step;
  std::vector<timeline::PathMark> marks;
  if (step < 0 || !plan_) {
    summary_ = plan_ ? tr("Critical path: no step in view") : tr("Critical path: no run on screen");
  } else {
    const int world = std::max(loom::world_size(*plan_), int(events_by_rank_.size()));
    events_by_rank_.resize(std::size_t(world));
    const auto groups = loom::analysis::sync_groups(*plan_, world);
    const auto path = loom::analysis::critical_path_of_step(events_by_rank_, groups, step);
    for (const auto& s : path.segments) marks.push_back({s.rank, s.start_ns, s.end_ns});
    QStringList parts;
    for (int k = 0; k < loom::analysis::kPathParts; ++k)
      parts << QStringLiteral("%1 %2").arg(QString::fromUtf8(loom::analysis::path_part_name(loom::analysis::PathPart(k)).data()),
                                          ms(path.part_ns[k]));
    QStringList longest;
    for (std::size_t i = 0; i < path.profile.size() && i < std::size_t(kLongestShown); ++i) {
      const auto& e = path.profile[i];
      const QString layer = e.layer >= 0 && std::size_t(e.layer) < layer_names_.size()
                                ? QStringLiteral(" ") + QString::fromStdString(layer_names_[std::size_t(e.layer)])
                                : QString();
      const QString kind = e.kind == loom::trace::EventKind::Step && e.layer < 0 ? tr("untraced")
                                                                                 : event_kind_display_name(e.kind);
      longest << tr("rank %1 %2%3 %4 ms").arg(e.rank).arg(kind, layer, ms(e.ns));
    }
    const QString jumps = path.jumps == 1 ? tr("1 jump between ranks") : tr("%1 jumps between ranks").arg(path.jumps);
    summary_ = tr("Critical path of step %1 (gold): %2 ms = %3; %4.")
                   .arg(step)
                   .arg(ms(path.length_ns), parts.join(QStringLiteral(", ")), jumps);
    if (!longest.isEmpty()) summary_ += tr(" Longest on it: %1.").arg(longest.join(QStringLiteral("; ")));
  }
  view_->setPathOverlay(std::move(marks));
  emit summaryChanged(summary_);
}

}  // namespace loom::ui
