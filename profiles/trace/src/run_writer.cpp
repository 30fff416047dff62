// Background writer from a rank's recorder into a run sink.
#include "loom/trace/run_writer.h"

namespace loom::trace {

RunWriter::RunWriter(RunSink& sink, int rank, Recorder& recorder, std::chrono::milliseconds period,
                     std::function<void(const Status&)> on_first_error)
    : sink_(sink), rank_(rank), recorder_(recorder), period_(period), on_first_error_(std::move(on_first_error)) {
  thread_ = std::thread([this] { loop(); });
}

RunWriter::~RunWriter() { (void)finish(); }

void RunWriter::add_metrics(std::vector<MetricRecord>&& metrics) {
  std::lock_guard lock(mutex_);
  for (auto& m : metrics) pending_metrics_.push_back(std::move(m));
}

void RunWriter::add_updates(std::vector<UpdateRecord>&& updates) {
  std::lock_guard lock(mutex_);
  if (pending_updates_.empty()) pending_updates_ = std::move(updates);  // the common case: no copy
  else pending_updates_.insert(pending_updates_.end(), updates.begin(), updates.end());
}

Status RunWriter::finish() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return first_error_;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  return first_error_;
}

void RunWriter::loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, period_, [this] { return stopping_; });
    lock.unlock();
    flush();
    lock.lock();
  }
  lock.unlock();
  flush();  // whatever was recorded between the last tick and the stop
}

void RunWriter::note(const Status& s) {
  if (s.ok() || !first_error_.ok()) return;
  first_error_ = s;
  if (on_first_error_) on_first_error_(s);
}

void RunWriter::flush() {
  std::vector<MetricRecord> metrics;
  std::vector<UpdateRecord> updates;
  {
    std::lock_guard lock(mutex_);
    metrics.swap(pending_metrics_);
    updates.swap(pending_updates_);
  }
  drained_.clear();
  recorder_.drain(drained_);
  if (!drained_.empty()) {
    Status s = sink_.write_events(rank_, drained_.data(), drained_.size());
    if (s.ok()) events_written_ += std::int64_t(drained_.size());
    note(s);
  }
  if (!metrics.empty()) note(sink_.write_metrics(metrics));
  if (!updates.empty()) note(sink_.write_updates(updates));
}

}  // namespace loom::trace
