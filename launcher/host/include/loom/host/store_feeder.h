// The host's end of the live stream: every frame the ranks send is written into the run
// store as it arrives (on the stream server's thread, through its own store connection),
// and what the job's supervisor needs to know (progress, which ranks finished, which were
// lost and why) is kept for it behind a mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "loom/host/hang_watch.h"
#include "loom/store/run_store.h"
#include "loom/stream/server.h"

namespace loom::host {

struct JobProgress {
  std::int64_t step = 0;         // steps completed (rank 0)
  std::int64_t total_steps = 0;  // 0 until rank 0 says
  double loss = std::numeric_limits<double>::quiet_NaN();
  double samples_per_s = 0;
  int ranks_connected = 0;
  int ranks_finished = 0;
};

// What the feeder saw of each rank, for the supervisor's final verdict.
struct RankOutcome {
  bool connected = false, done = false, lost = false;
  trace::RunStatus status = trace::RunStatus::Running;  // from Done
  std::string error;                                     // from Done, or the reason it was lost
  std::int64_t events_recorded = 0, events_stored = 0;
  double latency_max_ms = 0, latency_sum_ms = 0;
  std::int64_t batches = 0;
  bool same_host = false;  // latency is only measured where clocks are comparable
  int pid = 0;             // its process id on its host (from its hello)
};

class StoreFeeder final : public stream::StreamHandler {
 public:
  StoreFeeder(store::RunStore store, std::int64_t run_id, int world_size, std::string this_host);

  void on_hello(const stream::Hello& hello) override;
  void on_events(int rank, std::vector<trace::Event>&& events) override;
  void on_metrics(int rank, std::vector<trace::MetricRecord>&& metrics) override;
  void on_updates(int rank, std::vector<trace::UpdateRecord>&& updates) override;
  void on_log(int rank, const std::string& text) override;
  void on_clock(int rank, const stream::ClockInfo& clock) override;
  void on_device(int rank, const trace::DeviceInfo& device) override;
  void on_done(int rank, const stream::Done& done) override;
  void on_lost(int rank, const std::string& reason) override;
  void on_rejected(const std::string& peer, const std::string& reason) override;

  JobProgress progress() const;
  std::vector<RankOutcome> outcomes() const;
  // The first rank lost or failed, as "rank R: reason"; empty while all is well.
  std::string first_failure() const;
  int first_failure_rank() const;  // its rank, -1 while all is well
  // Every rank has reported Done or been lost.
  bool all_accounted() const;
  // The first store write error (the run goes on; the supervisor reports it).
  std::string store_error() const;
  // What each rank last sent and when (host steady clock), for the hang watchdog, and
  // the median of the recent Step spans of all ranks (NaN before the first).
  std::vector<RankActivity> activity() const;
  double median_step_s() const;
  // Writes the per-rank stream latency figures as metrics. Call after the server stopped.
  void write_latency_metrics();

 private:
  void note_store_error(const Status& s);
  void log(const std::string& text);

  store::RunStore store_;  // used on the server thread only (and after it stopped)
  std::int64_t run_id_;
  std::string this_host_;
  mutable std::mutex mutex_;  // guards everything below
  std::vector<RankOutcome> ranks_;
  std::vector<trace::RankRecord> records_;
  std::vector<RankActivity> activity_;
  std::deque<double> recent_steps_s_;  // the last kRecentSteps Step spans, any rank
  JobProgress progress_;
  std::string first_failure_, store_error_;
  int first_failure_rank_ = -1;
};

}  // namespace loom::host
