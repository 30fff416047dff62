// The run feed's worker: lives on the feed's thread, owns its own store connection and
// polls it (see run_feed.h). Private to loom_ui_live.
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "loom/core/plan.h"
#include "loom/store/run_store.h"
#include "loom/ui/workbench/run_feed.h"

namespace loom::ui {

class FeedWorker : public QObject {
  Q_OBJECT

 public:
  FeedWorker();

 public slots:
  void follow(const QString& dbPath, qint64 runId, quint64 generation);
  void halt();
  void setPollIntervalMs(int ms);
  void setBreakdownWanted(bool wanted) { breakdown_wanted_ = wanted; }

 signals:
  void batchReady(std::shared_ptr<const loom::ui::FeedBatch> batch);
  void failed(const QString& message, quint64 generation);

 private:
  void poll();
  bool readRun(FeedBatch& batch);
  bool readEvents(FeedBatch& batch, bool& page_full);
  void takePacked(FeedBatch& batch);
  void deliver(FeedBatch& batch, int rank, std::vector<loom::trace::Event>&& events);
  bool readMetrics(FeedBatch& batch, bool& page_full);
  bool readUpdates(FeedBatch& batch, bool& page_full);
  bool readRanks(FeedBatch& batch);
  void computeBreakdown(FeedBatch& batch, bool force);
  void fail(const std::string& what);

  QTimer timer_;
  std::optional<loom::store::RunStore> store_;
  std::int64_t run_id_ = 0;
  quint64 generation_ = 0;
  bool first_ = true;
  std::int64_t event_seq_ = 0, metric_seq_ = 0, update_seq_ = 0, total_events_ = 0;
  std::size_t log_size_ = 0;  // bytes of the run's log already delivered
  std::vector<loom::trace::RankRecord> ranks_;
  // For the breakdown and pipeline_stats, indexed by rank (ranks are dense from 0).
  std::vector<std::vector<loom::trace::Event>> events_by_rank_;
  std::deque<RankEvents> packed_;  // a finished run's packed events not yet delivered
  std::optional<loom::Plan> plan_;  // parsed once, with the first poll
  std::vector<loom::trace::MetricRecord> pipeline_metrics_;  // max_in_flight, peak_activation_bytes
  bool events_since_breakdown_ = false;  // or pipeline metrics
  bool breakdown_wanted_ = true;  // else events_by_rank_ stays empty
  std::chrono::steady_clock::time_point last_breakdown_{};
};

}  // namespace loom::ui
