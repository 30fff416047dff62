// Follows one run in the run store and hands what is new to the GUI: trace events grouped
// by rank, metrics, parameter-server updates (asynchronous runs), the ranks' clock
// records, the run's status, and every second a per-rank time breakdown with the pipeline
// bubbles per stage. All SQLite work happens on the feed's own thread; the GUI
// thread only receives finished batches by a queued signal, so it never waits on the
// database. The same feed opens a saved run (it reads everything in pages, then stops)
// and follows a live one, whoever writes it (this window's job or a loom-cli elsewhere).
#pragma once

#include <QObject>
#include <QString>
#include <QThread>

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "loom/analysis/breakdown.h"
#include "loom/analysis/stage_stats.h"
#include "loom/trace/records.h"
#include "loom/trace/event.h"

namespace loom::ui {

struct RankEvents {
  int rank = 0;
  std::vector<loom::trace::Event> events;  // each rank's own clock, as stored
};

struct FeedBatch {
  std::uint64_t generation = 0;  // which follow() this belongs to; older ones are stale
  std::int64_t run_id = 0;
  std::vector<RankEvents> events;
  std::vector<loom::trace::MetricRecord> metrics;
  // One per gradient a parameter server applied since the last batch; none for
  // synchronous runs.
  std::vector<loom::trace::UpdateRecord> updates;
  bool ranks_changed = false;
  std::vector<loom::trace::RankRecord> ranks;  // all ranks, when ranks_changed
  bool breakdown_changed = false;
  std::vector<loom::analysis::RankBreakdown> breakdown;  // every rank seen so far
  // With the breakdown, when the run's plan parses (one stage without pipelining).
  std::optional<loom::analysis::PipelineStats> pipeline;
  std::optional<loom::trace::RunStatus> status;  // once read
  QString error;       // the run's error text, when it failed
  QString log;         // what was appended to the run's log (launch line, mpirun output)
  QString plan_json;   // in the first batch
  std::int64_t resumed_from = 0;  // in the first batch: the run this one continues
  bool predicted = false;         // in the first batch: a stored prediction (RunRecord::kind)
  bool first = false;  // the first batch of this follow()
  bool finished = false;  // the run ended and everything stored has been delivered
  std::int64_t total_events = 0;
};

class FeedWorker;

class RunFeed : public QObject {
  Q_OBJECT

 public:
  explicit RunFeed(QObject* parent = nullptr);
  ~RunFeed() override;

  // Starts following `runId`; anything still arriving from an earlier follow() is dropped.
  void follow(const QString& dbPath, qint64 runId);
  void stop();
  std::uint64_t generation() const { return generation_; }
  // How often the store is polled while a run is live (default 50 ms).
  void setPollIntervalMs(int ms);
  // Whether batches carry the per-rank breakdown and pipeline figures (default true).
  // Without them the feed keeps no copy of the events: a view that shows only the
  // timeline and curves (the comparison) loads a large run sooner. Set before follow().
  void setBreakdownWanted(bool wanted);

 signals:
  void batchReady(std::shared_ptr<const loom::ui::FeedBatch> batch);
  void failed(const QString& message);

 private:
  void onWorkerBatch(std::shared_ptr<const loom::ui::FeedBatch> batch);

  QThread thread_;
  FeedWorker* worker_ = nullptr;  // lives on thread_
  std::uint64_t generation_ = 0;
};

}  // namespace loom::ui
