// Stream frames into the run store (see store_feeder.h).
#include "loom/host/store_feeder.h"

#include <algorithm>

#include "loom/trace/recorder.h"

namespace loom::host {

StoreFeeder::StoreFeeder(store::RunStore store, std::int64_t run_id, int world_size, std::string this_host)
    : store_(std::move(store)),
      run_id_(run_id),
      this_host_(std::move(this_host)),
      ranks_(std::size_t(world_size)),
      records_(std::size_t(world_size)),
      activity_(std::size_t(world_size)) {
  for (int r = 0; r < world_size; ++r) {
    records_[std::size_t(r)].rank = r;
    records_[std::size_t(r)].events_recorded = -1;  // unknown until the rank's Done says
    activity_[std::size_t(r)].rank = r;
  }
}

namespace {
constexpr std::size_t kRecentSteps = 256;

// Setup is over for a rank once it has built its model (the last setup phase of every
// role) or recorded anything but setup. A rank that never records a step (a parameter
// server, an inference server) is then held to the plan's limit like the others, not to
// the setup allowance for the rest of the run.
bool ends_setup(const trace::Event& e) {
  return e.kind != trace::EventKind::Setup || e.message == std::int32_t(trace::SetupPhase::BuildModel);
}

// What a batch of a rank's events says about its progress (called under the lock).
void note_progress(RankActivity& a, const std::vector<trace::Event>& events, std::deque<double>& recent_steps_s) {
  if (events.empty()) return;
  a.last_progress_ns = trace::now_ns();
  for (const trace::Event& e : events) {
    if (!a.has_last_span || e.end_ns >= a.last_span.end_ns) a.last_span = e;
    a.has_last_span = true;
    if (ends_setup(e)) a.training = true;
    if (e.kind != trace::EventKind::Step) continue;
    recent_steps_s.push_back(double(e.end_ns - e.start_ns) * 1e-9);
    if (recent_steps_s.size() > kRecentSteps) recent_steps_s.pop_front();
  }
}
}  // namespace

void StoreFeeder::note_store_error(const Status& s) {
  if (s.ok()) return;
  std::lock_guard lock(mutex_);
  if (store_error_.empty()) store_error_ = s.error().describe();
}

void StoreFeeder::log(const std::string& text) { note_store_error(store_.append_log(run_id_, text + "\n")); }

void StoreFeeder::on_hello(const stream::Hello& hello) {
  trace::RankRecord record;
  {
    std::lock_guard lock(mutex_);
    RankOutcome& r = ranks_[std::size_t(hello.rank)];
    r.connected = true;
    r.same_host = hello.host == this_host_;
    r.pid = hello.pid;
    activity_[std::size_t(hello.rank)].connected = true;
    activity_[std::size_t(hello.rank)].last_progress_ns = trace::now_ns();
    ++progress_.ranks_connected;
    record = records_[std::size_t(hello.rank)];
    record.host = hello.host;
    record.device = hello.device;
    record.pid = hello.pid;
    records_[std::size_t(hello.rank)] = record;
  }
  note_store_error(store_.upsert_rank(run_id_, record));
  log("rank " + std::to_string(hello.rank) + " connected from " + hello.host + " (pid " + std::to_string(hello.pid) +
      ")");
}

void StoreFeeder::on_events(int rank, std::vector<trace::Event>&& events) {
  std::int64_t newest = 0;
  for (const auto& e : events) newest = std::max(newest, e.end_ns);
  const Status s = store_.append_events(run_id_, rank, events.data(), events.size());
  note_store_error(s);
  // Recorded (the event's end on the rank's clock) to stored (now, after the commit).
  const double latency_ms = double(trace::now_ns() - newest) * 1e-6;
  std::lock_guard lock(mutex_);
  note_progress(activity_[std::size_t(rank)], events, recent_steps_s_);
  RankOutcome& r = ranks_[std::size_t(rank)];
  if (s.ok()) r.events_stored += std::int64_t(events.size());
  if (r.same_host && !events.empty()) {
    r.latency_max_ms = std::max(r.latency_max_ms, latency_ms);
    r.latency_sum_ms += latency_ms;
    ++r.batches;
  }
}

void StoreFeeder::on_metrics(int rank, std::vector<trace::MetricRecord>&& metrics) {
  for (auto& m : metrics) m.rank = rank;  // a connection speaks for its own rank only
  note_store_error(store_.append_metrics(run_id_, metrics));
  if (rank != 0) return;
  std::lock_guard lock(mutex_);
  for (const auto& m : metrics) {
    if (m.name == "loss") {
      progress_.step = std::max(progress_.step, m.step + 1);
      progress_.loss = m.value;
    } else if (m.name == "samples_per_s") {
      progress_.samples_per_s = m.value;
    } else if (m.name == "total_steps") {
      progress_.total_steps = std::int64_t(m.value);
    }
  }
}

// Stored as sent: a server rank reports updates on behalf of the workers that pushed them,
// so unlike metrics their ranks are not the connection's.
void StoreFeeder::on_updates(int /*rank*/, std::vector<trace::UpdateRecord>&& updates) {
  note_store_error(store_.append_updates(run_id_, updates));
}

void StoreFeeder::on_log(int rank, const std::string& text) { log("[rank " + std::to_string(rank) + "] " + text); }

void StoreFeeder::on_clock(int rank, const stream::ClockInfo& clock) {
  trace::RankRecord record;
  {
    std::lock_guard lock(mutex_);
    trace::RankRecord& r = records_[std::size_t(rank)];
    r.offset_ns = clock.offset_start_ns;
    r.offset_end_ns = clock.offset_end_ns;
    r.sync_start_ns = clock.sync_start_ns;
    r.sync_end_ns = clock.sync_end_ns;
    r.uncertainty_ns = clock.uncertainty_ns;
    r.t0_ns = clock.t0_ns;
    record = r;
  }
  note_store_error(store_.upsert_rank(run_id_, record));
}

// Kept with the rank's record, so that the clock and Done updates that follow keep it.
void StoreFeeder::on_device(int rank, const trace::DeviceInfo& device) {
  trace::RankRecord record;
  {
    std::lock_guard lock(mutex_);
    records_[std::size_t(rank)].device_info = device;
    record = records_[std::size_t(rank)];
  }
  note_store_error(store_.upsert_rank(run_id_, record));
  log("rank " + std::to_string(rank) + " runs on " + trace::describe_device(device));
}

void StoreFeeder::on_done(int rank, const stream::Done& done) {
  trace::RankRecord record;
  {
    std::lock_guard lock(mutex_);
    RankOutcome& r = ranks_[std::size_t(rank)];
    r.done = true;
    activity_[std::size_t(rank)].finished = true;
    r.status = done.status;
    r.error = done.error;
    r.events_recorded = done.events_recorded;
    ++progress_.ranks_finished;
    if (done.status == trace::RunStatus::Failed && first_failure_.empty()) {
      first_failure_ = "rank " + std::to_string(rank) + ": " + done.error;
      first_failure_rank_ = rank;
    }
    records_[std::size_t(rank)].events_recorded = done.events_recorded;
    record = records_[std::size_t(rank)];
  }
  note_store_error(store_.upsert_rank(run_id_, record));
  log("rank " + std::to_string(rank) + " finished: " + std::string(trace::to_text(done.status)) + (done.error.empty() ? "" : ": " + done.error));
}

void StoreFeeder::on_lost(int rank, const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    RankOutcome& r = ranks_[std::size_t(rank)];
    r.lost = true;
    activity_[std::size_t(rank)].finished = true;
    r.error = reason;
    if (first_failure_.empty()) {
      first_failure_ = "rank " + std::to_string(rank) + " died: " + reason;
      first_failure_rank_ = rank;
    }
  }
  log("rank " + std::to_string(rank) + " lost: " + reason + " (the process died or was killed; see the lines above)");
}

void StoreFeeder::on_rejected(const std::string& peer, const std::string& reason) {
  log("stream: rejected a connection from " + peer + ": " + reason);
}

JobProgress StoreFeeder::progress() const {
  std::lock_guard lock(mutex_);
  return progress_;
}

std::vector<RankOutcome> StoreFeeder::outcomes() const {
  std::lock_guard lock(mutex_);
  return ranks_;
}

std::string StoreFeeder::first_failure() const {
  std::lock_guard lock(mutex_);
  return first_failure_;
}

int StoreFeeder::first_failure_rank() const {
  std::lock_guard lock(mutex_);
  return first_failure_rank_;
}

std::vector<RankActivity> StoreFeeder::activity() const {
  std::lock_guard lock(mutex_);
  return activity_;
}

double StoreFeeder::median_step_s() const {
  std::vector<double> steps;
  {
    std::lock_guard lock(mutex_);
    steps.assign(recent_steps_s_.begin(), recent_steps_s_.end());
  }
  if (steps.empty()) return std::numeric_limits<double>::quiet_NaN();
  auto middle = steps.begin() + std::ptrdiff_t(steps.size() / 2);
  std::nth_element(steps.begin(), middle, steps.end());
  return *middle;
}

bool StoreFeeder::all_accounted() const {
  std::lock_guard lock(mutex_);
  return std::all_of(ranks_.begin(), ranks_.end(), [](const RankOutcome& r) { return r.done || r.lost; });
}

std::string StoreFeeder::store_error() const {
  std::lock_guard lock(mutex_);
  return store_error_;
}

void StoreFeeder::write_latency_metrics() {
  std::vector<trace::MetricRecord> metrics;
  const auto ranks = outcomes();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].batches == 0) continue;
    const double mean = ranks[r].latency_sum_ms / double(ranks[r].batches);
    metrics.push_back({int(r), -1, trace::now_ns(), "stream_latency_max_ms", ranks[r].latency_max_ms});
    metrics.push_back({int(r), -1, trace::now_ns(), "stream_latency_mean_ms", mean});
  }
  if (!metrics.empty()) note_store_error(store_.append_metrics(run_id_, metrics));
}

}  // namespace loom::host
