// Moves a rank's events, metrics and (server ranks) applied updates into a run sink (the store, or the stream to the host)
// while it trains: a background thread drains the recorder every `period` and writes one
// batch per tick, so the training thread never waits on SQLite or a socket and the sink
// is at most one period behind.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "loom/core/status.h"
#include "loom/trace/recorder.h"
#include "loom/trace/run_sink.h"

namespace loom::trace {

class RunWriter {
 public:
  // `on_first_error` runs once, on the writer's thread, when the sink first refuses a
  // write: a rank whose host is gone (its stream closed) stops instead of training on
  // unobserved.
  RunWriter(RunSink& sink, int rank, Recorder& recorder,
            std::chrono::milliseconds period = std::chrono::milliseconds(100),
            std::function<void(const Status&)> on_first_error = {});
  ~RunWriter();
  RunWriter(const RunWriter&) = delete;
  RunWriter& operator=(const RunWriter&) = delete;

  void add_metrics(std::vector<MetricRecord>&& metrics);  // from the training thread
  void add_updates(std::vector<UpdateRecord>&& updates);  // likewise
  // Stops the thread after a final drain; returns the first write error, if any.
  Status finish();
  std::int64_t events_written() const { return events_written_.load(); }

 private:
  void loop();
  void flush();
  void note(const Status& s);

  RunSink& sink_;
  int rank_;
  Recorder& recorder_;
  std::chrono::milliseconds period_;
  std::function<void(const Status&)> on_first_error_;
  std::mutex mutex_;  // guards the pending_ vectors and the wake-up condition; not the hot path
  std::condition_variable wake_;
  std::vector<MetricRecord> pending_metrics_;
  std::vector<UpdateRecord> pending_updates_;
  bool stopping_ = false;
  Status first_error_;
  std::vector<Event> drained_;
  std::atomic<std::int64_t> events_written_{0};
  std::thread thread_;
};

}  // namespace loom::trace
