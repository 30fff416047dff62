// RunFeed and its worker (see run_feed.h). The worker polls with load_events_after /
// load_metrics_after / load_updates_after, so each row crosses the thread boundary once;
// while a page comes back full (a saved run being opened) it polls again at once instead
// of waiting.
#include "loom/ui/workbench/run_feed.h"

#include <algorithm>

#include "feed_worker.h"

namespace loom::ui {

namespace {
// Rows per read: big enough that a 1M-event run opens in a few pages, small enough that
// the GUI thread can take one batch between two paints.
constexpr std::size_t kEventPage = 250'000;
constexpr std::size_t kMetricPage = 50'000;
constexpr std::size_t kUpdatePage = 50'000;  // about one per gradient pushed, like metrics
constexpr auto kBreakdownPeriod = std::chrono::seconds(1);

bool same_ranks(const std::vector<trace::RankRecord>& a, const std::vector<trace::RankRecord>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.rank == y.rank && x.host == y.host && x.device == y.device && x.offset_ns == y.offset_ns &&
           x.offset_end_ns == y.offset_end_ns && x.sync_start_ns == y.sync_start_ns &&
           x.sync_end_ns == y.sync_end_ns && x.uncertainty_ns == y.uncertainty_ns && x.device_info == y.device_info;
  });
}
}  // namespace

FeedWorker::FeedWorker() : timer_(this) {  // a child, so moveToThread takes the timer along
  timer_.setInterval(50);
  connect(&timer_, &QTimer::timeout, this, &FeedWorker::poll);
}

void FeedWorker::follow(const QString& dbPath, qint64 runId, quint64 generation) {
  halt();
  generation_ = generation;
  run_id_ = runId;
  auto store = store::RunStore::open(dbPath.toStdString());
  if (!store.ok()) return fail(store.error().describe());
  store_.emplace(std::move(*store));
  timer_.start();
  poll();
}

void FeedWorker::halt() {
  timer_.stop();
  store_.reset();
  first_ = true;
  event_seq_ = metric_seq_ = update_seq_ = total_events_ = 0;
  log_size_ = 0;
  ranks_.clear();
  events_by_rank_.clear();
  packed_.clear();
  plan_.reset();
  pipeline_metrics_.clear();
  events_since_breakdown_ = false;
}

void FeedWorker::setPollIntervalMs(int ms) { timer_.setInterval(std::max(1, ms)); }

void FeedWorker::fail(const std::string& what) {
  const quint64 generation = generation_;
  halt();
  emit failed(QString::fromStdString(what), generation);
}

void FeedWorker::poll() {
  if (!store_) return;
  auto batch = std::make_shared<FeedBatch>();
  batch->generation = generation_;
  batch->run_id = run_id_;
  batch->first = first_;
  bool events_full = false, metrics_full = false, updates_full = false;
  if (!readRun(*batch) || !readEvents(*batch, events_full) || !readMetrics(*batch, metrics_full) ||
      !readUpdates(*batch, updates_full) || !readRanks(*batch)) {
    return;
  }
  const bool more = events_full || metrics_full || updates_full;
  // The launcher marks the run ended only after the last frames were stored, so an ended
  // run with nothing new has been delivered whole.
  const bool ended = batch->status && *batch->status != loom::trace::RunStatus::Running;
  batch->finished = ended && !more;
  computeBreakdown(*batch, batch->finished);
  batch->total_events = total_events_;
  const bool news = !batch->events.empty() || !batch->metrics.empty() || !batch->updates.empty() ||
                    !batch->log.isEmpty() || batch->ranks_changed || batch->breakdown_changed || batch->first ||
                    batch->finished;
  first_ = false;
  if (batch->finished) halt();
  if (news) emit batchReady(batch);
  if (more) QMetaObject::invokeMethod(this, &FeedWorker::poll, Qt::QueuedConnection);
}

// Polled every interval: status, error and the log's new bytes only; the plan (which a
// view needs once) is read with the first poll.
bool FeedWorker::readRun(FeedBatch& batch) {
  if (first_) {
    auto run = store_->load_run(run_id_);
    if (!run.ok()) {
      fail(run.error().describe());
      return false;
    }
    batch.plan_json = QString::fromStdString(run->plan_json);
    batch.resumed_from = run->resumed_from;
    batch.predicted = run->predicted();
    PlanResult plan = parse_plan(run->plan_json);
    if (plan.ok()) plan_ = std::move(plan.plan);
  }
  auto state = store_->load_run_state(run_id_, log_size_);
  if (!state.ok()) {
    fail(state.error().describe());
    return false;
  }
  batch.status = state->status;
  batch.error = QString::fromStdString(state->error);
  batch.log = QString::fromStdString(state->log_tail);
  log_size_ += state->log_tail.size();
  return true;
}

bool FeedWorker::readEvents(FeedBatch& batch, bool& page_full) {
  // A run that had ended when it was opened is read from its packed blocks (run_store.h
  // pack_events), a copy per rank instead of a decoded row per event. They hold all its
  // events, so once they are delivered the run has been read whole.
  const bool ended = batch.status && *batch.status != trace::RunStatus::Running;
  if (first_ && ended) {
    auto packed = store_->load_packed_run(run_id_);
    if (!packed.ok()) {
      fail(packed.error().describe());
      return false;
    }
    if (*packed)
      for (auto& [rank, events] : (*packed)->ranks) packed_.push_back(RankEvents{rank, std::move(events)});
  }
  if (!packed_.empty()) {
    takePacked(batch);
    page_full = !packed_.empty();
    return true;
  }
  auto page = store_->load_events_after(run_id_, event_seq_, kEventPage);
  if (!page.ok()) {
    fail(page.error().describe());
    return false;
  }
  event_seq_ = page->last_seq;
  page_full = page->events.size() == kEventPage;
  std::map<int, std::vector<trace::Event>> grouped;
  for (std::size_t i = 0; i < page->events.size(); ++i) grouped[page->ranks[i]].push_back(page->events[i]);
  for (auto& [rank, events] : grouped) deliver(batch, rank, std::move(events));
  return true;
}

// Up to a page of the packed events, so the GUI thread takes them in page-sized batches
// as it does rows.
void FeedWorker::takePacked(FeedBatch& batch) {
  std::size_t budget = kEventPage;
  while (budget > 0 && !packed_.empty()) {
    RankEvents& front = packed_.front();
    if (front.events.size() <= budget) {
      budget -= front.events.size();
      deliver(batch, front.rank, std::move(front.events));
      packed_.pop_front();
      continue;
    }
    const auto cut = front.events.begin() + std::ptrdiff_t(budget);
    deliver(batch, front.rank, std::vector<trace::Event>(front.events.begin(), cut));
    front.events.erase(front.events.begin(), cut);
    budget = 0;
  }
}

void FeedWorker::deliver(FeedBatch& batch, int rank, std::vector<trace::Event>&& events) {
  if (rank < 0 || events.empty()) return;  // not a rank: nothing can show it
  total_events_ += static_cast<std::int64_t>(events.size());
  if (breakdown_wanted_) {
    if (events_by_rank_.size() <= std::size_t(rank)) events_by_rank_.resize(std::size_t(rank) + 1);
    auto& all = events_by_rank_[std::size_t(rank)];
    all.insert(all.end(), events.begin(), events.end());
  }
  batch.events.push_back(RankEvents{rank, std::move(events)});
  events_since_breakdown_ = true;
}

bool FeedWorker::readMetrics(FeedBatch& batch, bool& page_full) {
  auto page = store_->load_metrics_after(run_id_, metric_seq_, kMetricPage);
  if (!page.ok()) {
    fail(page.error().describe());
    return false;
  }
  metric_seq_ = page->last_seq;
  page_full = page->metrics.size() == kMetricPage;
  batch.metrics = std::move(page->metrics);
  // Ranks record these once, at the end of training: they change the stages even when no
  // event arrives with them.
  for (const auto& m : batch.metrics) {
    if (m.name != "max_in_flight" && m.name != "peak_activation_bytes") continue;
    pipeline_metrics_.push_back(m);
    events_since_breakdown_ = true;
  }
  return true;
}

// Parameter-server updates (one per applied gradient); empty for synchronous runs.
bool FeedWorker::readUpdates(FeedBatch& batch, bool& page_full) {
  auto page = store_->load_updates_after(run_id_, update_seq_, kUpdatePage);
  if (!page.ok()) {
    fail(page.error().describe());
    return false;
  }
  update_seq_ = page->last_seq;
  page_full = page->updates.size() == kUpdatePage;
  batch.updates = std::move(page->updates);
  return true;
}

bool FeedWorker::readRanks(FeedBatch& batch) {
  auto ranks = store_->load_ranks(run_id_);
  if (!ranks.ok()) {
    fail(ranks.error().describe());
    return false;
  }
  if (!same_ranks(*ranks, ranks_)) {
    ranks_ = std::move(*ranks);
    batch.ranks_changed = true;
    batch.ranks = ranks_;
  }
  return true;
}

// Recomputed from every event seen so far, at most once a second while the run is live
// (it sorts each rank's intervals), and once more when the run has been read whole. The
// pipeline stages come from the same events, with the plan the run was started with.
void FeedWorker::computeBreakdown(FeedBatch& batch, bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!breakdown_wanted_ || !events_since_breakdown_ || (!force && now - last_breakdown_ < kBreakdownPeriod)) return;
  for (std::size_t rank = 0; rank < events_by_rank_.size(); ++rank)
    if (!events_by_rank_[rank].empty())
      batch.breakdown.push_back(analysis::breakdown_rank(static_cast<int>(rank), events_by_rank_[rank]));
  if (plan_) batch.pipeline = analysis::pipeline_stats(*plan_, events_by_rank_, pipeline_metrics_);
  batch.breakdown_changed = true;
  events_since_breakdown_ = false;
  last_breakdown_ = now;
}

RunFeed::RunFeed(QObject* parent) : QObject(parent) {
  qRegisterMetaType<std::shared_ptr<const loom::ui::FeedBatch>>();
  worker_ = new FeedWorker;
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  connect(worker_, &FeedWorker::batchReady, this, &RunFeed::onWorkerBatch, Qt::QueuedConnection);
  connect(
      worker_, &FeedWorker::failed, this,
      [this](const QString& message, quint64 generation) {
        if (generation == generation_) emit failed(message);
      },
      Qt::QueuedConnection);
  thread_.setObjectName("loom-run-feed");
  thread_.start();
}

RunFeed::~RunFeed() {
  QMetaObject::invokeMethod(worker_, &FeedWorker::halt, Qt::BlockingQueuedConnection);
  thread_.quit();
  thread_.wait();
}

void RunFeed::follow(const QString& dbPath, qint64 runId) {
  const quint64 generation = ++generation_;
  QMetaObject::invokeMethod(worker_, [w = worker_, dbPath, runId, generation] { w->follow(dbPath, runId, generation); });
}

void RunFeed::stop() {
  ++generation_;
  QMetaObject::invokeMethod(worker_, &FeedWorker::halt);
}

void RunFeed::setPollIntervalMs(int ms) {
  QMetaObject::invokeMethod(worker_, [w = worker_, ms] { w->setPollIntervalMs(ms); });
}

void RunFeed::setBreakdownWanted(bool wanted) {
  QMetaObject::invokeMethod(worker_, [w = worker_, wanted] { w->setBreakdownWanted(wanted); });
}

void RunFeed::onWorkerBatch(std::shared_ptr<const loom::ui::FeedBatch> batch) {
  if (batch->generation == generation_) emit batchReady(std::move(batch));
}

}  // namespace loom::ui
