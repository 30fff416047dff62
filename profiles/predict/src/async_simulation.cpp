// Parameter-server training simulated event by event (see async_simulation.h).
#include "async_simulation.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom::predict {

using trace::EventKind;
using trace::Stream;

namespace {

constexpr double kHeaderBytes = 24;  // the engine's request header
constexpr double kNever = std::numeric_limits<double>::infinity();

enum class Message { Pull, Push, Done };

struct Request {
  int worker = 0;
  Message type = Message::Pull;
  std::int64_t step = 0, version_read = 0;
  double arrives_ms = 0;
};

struct WorkerState {
  std::int64_t step = 0;
  double step_start = 0, push_start = 0;
  double compute_end = kNever;  // kNever: not computing
  int replies_missing = 0;
  std::vector<double> reply_at;  // per server, this step's pull
  std::vector<std::int64_t> version_read;
  bool done = false;
};

struct ServerState {
  double free_at = 0;
  std::vector<Request> inbox, deferred, held;
  std::int64_t applied = 0;
  std::vector<std::int64_t> clocks, pulled;  // per worker
  std::vector<bool> done;
};

class Simulation {
 public:
  explicit Simulation(const AsyncSetup& setup)
      : s_(setup), workers_(int(setup.workers.size())), servers_(int(setup.shard_bytes.size())) {
    worker_.resize(std::size_t(workers_));
    for (WorkerState& w : worker_) w.reply_at.assign(std::size_t(servers_), 0), w.version_read.assign(std::size_t(servers_), 0);
    server_.resize(std::size_t(servers_));
    for (ServerState& sv : server_) {
      sv.clocks.assign(std::size_t(workers_), 0);
      sv.pulled.assign(std::size_t(workers_), -1);
      sv.done.assign(std::size_t(workers_), false);
    }
  }

  AsyncTimeline run() {
    for (int w = 0; w < workers_; ++w) start_pull(w, 0);
    while (next_event()) {
    }
    return std::move(out_);
  }

 private:
  int server_rank(int i) const { return workers_ + i; }
  void span(int rank, EventKind kind, Stream stream, std::int64_t step, double start, double end, std::int64_t bytes = 0,
            int layer = -1) {
    out_.spans.push_back({rank, kind, stream, layer, -1, start, end, bytes, int(step)});
    out_.end_ms = std::max(out_.end_ms, end);
  }

  // The earliest thing that happens next: a worker's compute ending, or a server taking
  // its earliest message. False when nothing is left.
  bool next_event() {
    double best = kNever;
    int worker = -1, server = -1;
    for (int w = 0; w < workers_; ++w)
      if (worker_[std::size_t(w)].compute_end < best) best = worker_[std::size_t(w)].compute_end, worker = w;
    for (int i = 0; i < servers_; ++i) {
      const ServerState& sv = server_[std::size_t(i)];
      if (sv.inbox.empty()) continue;
      const double start = std::max(sv.free_at, sv.inbox[earliest(sv.inbox)].arrives_ms);
      if (start < best) best = start, server = i, worker = -1;
    }
    if (server >= 0) return handle(server), true;
    if (worker >= 0) return finish_compute(worker), true;
    return false;
  }

  // The message a server takes next: the first to arrive (ties: the lower worker, as the
  // server polls its workers in order).
  static std::size_t earliest(const std::vector<Request>& inbox) {
    return std::size_t(std::min_element(inbox.begin(), inbox.end(), [](const Request& a, const Request& b) {
                         return a.arrives_ms != b.arrives_ms ? a.arrives_ms < b.arrives_ms : a.worker < b.worker;
                       }) - inbox.begin());
  }

  void start_pull(int w, double t) {
    WorkerState& ws = worker_[std::size_t(w)];
    ws.step_start = t;
    ws.replies_missing = servers_;
    for (int i = 0; i < servers_; ++i)
      server_[std::size_t(i)].inbox.push_back({w, Message::Pull, ws.step, 0, t + s_.message_ms(w, server_rank(i), kHeaderBytes)});
  }

  // Every reply is in: the pull's spans (one per server, waited for in server order, as
  // the worker does), then the compute, a straggler's delay and the residual.
  void start_compute(int w) {
    WorkerState& ws = worker_[std::size_t(w)];
    double at = ws.step_start;
    for (int i = 0; i < servers_; ++i) {
      const double end = std::max(at, ws.reply_at[std::size_t(i)]);
      span(w, EventKind::Pull, Stream::Host, ws.step, at, end, s_.shard_bytes[std::size_t(i)]);
      at = end;
    }
    span(w, EventKind::Wait, Stream::Compute, ws.step, ws.step_start, at);
    const AsyncWorkerWork& work = s_.workers[std::size_t(w)];
    for (const PredictedSpan& c : work.compute) {
      span(w, c.kind, Stream::Compute, ws.step, at, at + (c.end_ms - c.start_ms), 0, c.layer);
      at += c.end_ms - c.start_ms;
    }
    if (work.injected_ms > 0) span(w, EventKind::InjectedDelay, Stream::Compute, ws.step, at, at + work.injected_ms);
    ws.compute_end = at + work.injected_ms + work.residual_ms;
  }

  void finish_compute(int w) {
    WorkerState& ws = worker_[std::size_t(w)];
    const double t = ws.compute_end;
    ws.compute_end = kNever;
    start_push(w, 0, t);
  }

  void start_push(int w, int i, double t) {
    WorkerState& ws = worker_[std::size_t(w)];
    ws.push_start = t;
    server_[std::size_t(i)].inbox.push_back(
        {w, Message::Push, ws.step, ws.version_read[std::size_t(i)], t + s_.message_ms(w, server_rank(i), kHeaderBytes)});
  }

  void finish_step(int w, double t) {
    WorkerState& ws = worker_[std::size_t(w)];
    out_.steps.push_back({w, ws.step, ws.step_start, t});
    if (++ws.step < s_.steps) return start_pull(w, t);
    ws.done = true;
    for (int i = 0; i < servers_; ++i)
      server_[std::size_t(i)].inbox.push_back({w, Message::Done, 0, 0, t + s_.message_ms(w, server_rank(i), kHeaderBytes)});
  }

  void handle(int i) {
    ServerState& sv = server_[std::size_t(i)];
    const std::size_t next = earliest(sv.inbox);
    const Request r = sv.inbox[next];
    sv.inbox.erase(sv.inbox.begin() + std::ptrdiff_t(next));
    sv.free_at = std::max(sv.free_at, r.arrives_ms);
    if (r.type == Message::Pull) sv.deferred.push_back(r);
    if (r.type == Message::Done) sv.done[std::size_t(r.worker)] = true;
    if (r.type == Message::Push) receive_push(i, r);
    settle(i);
  }

  // The server takes the gradient; the worker's push (blocked until now) ends with it.
  void receive_push(int i, const Request& r) {
    ServerState& sv = server_[std::size_t(i)];
    const std::int64_t bytes = s_.shard_bytes[std::size_t(i)];
    const double end = sv.free_at + s_.push_ms(r.worker, server_rank(i), double(bytes));
    span(server_rank(i), EventKind::Recv, Stream::Host, r.step, sv.free_at, end, bytes);
    span(r.worker, EventKind::Push, Stream::Host, r.step, worker_[std::size_t(r.worker)].push_start, end, bytes);
    sv.free_at = end;
    sv.held.push_back(r);
    if (i + 1 < servers_) return start_push(r.worker, i + 1, end);
    finish_step(r.worker, end);
  }

  std::int64_t version(const ServerState& sv) const {
    if (!s_.ssp) return sv.applied;
    std::int64_t slowest = -1;
    for (int w = 0; w < workers_; ++w)
      if (!sv.done[std::size_t(w)] && (slowest < 0 || sv.clocks[std::size_t(w)] < slowest)) slowest = sv.clocks[std::size_t(w)];
    return slowest < 0 ? *std::max_element(sv.clocks.begin(), sv.clocks.end()) : slowest;
  }
  bool may_serve(const ServerState& sv, const Request& r) const { return !s_.ssp || version(sv) >= r.step - s_.bound; }
  bool may_apply(const ServerState& sv, std::int64_t step) const {
    if (!s_.ssp) return true;
    for (int w = 0; w < workers_; ++w)
      if (!sv.done[std::size_t(w)] && sv.pulled[std::size_t(w)] < step) return false;
    return true;
  }

  // As the engine's server: applies what may be applied and answers what may be
  // answered, until neither moves.
  void settle(int i) {
    ServerState& sv = server_[std::size_t(i)];
    for (bool moved = true; moved;) {
      moved = false;
      for (std::size_t k = 0; k < sv.held.size();) {
        if (!may_apply(sv, sv.held[k].step)) {
          ++k;
          continue;
        }
        apply(i, sv.held[k]);
        sv.held.erase(sv.held.begin() + std::ptrdiff_t(k));
        moved = true;
      }
      for (std::size_t k = 0; k < sv.deferred.size();) {
        if (!may_serve(sv, sv.deferred[k])) {
          ++k;
          continue;
        }
        reply(i, sv.deferred[k]);
        sv.deferred.erase(sv.deferred.begin() + std::ptrdiff_t(k));
        moved = true;
      }
    }
  }

  void apply(int i, const Request& r) {
    ServerState& sv = server_[std::size_t(i)];
    const std::int64_t before = version(sv);
    const std::int64_t staleness = std::max<std::int64_t>(0, before - r.version_read);
    const double end = sv.free_at + s_.apply_ms[std::size_t(i)];
    span(server_rank(i), EventKind::Optimizer, Stream::Compute, r.step, sv.free_at, end);
    sv.free_at = end;
    ++sv.applied;
    sv.clocks[std::size_t(r.worker)] = std::max(sv.clocks[std::size_t(r.worker)], r.step + 1);
    out_.updates.push_back({r.worker, i, r.step, r.version_read, before, staleness, std::llround(end * 1e6)});
  }

  void reply(int i, const Request& r) {
    ServerState& sv = server_[std::size_t(i)];
    sv.pulled[std::size_t(r.worker)] = std::max(sv.pulled[std::size_t(r.worker)], r.step);
    const std::int64_t bytes = s_.shard_bytes[std::size_t(i)];
    const double end = sv.free_at + s_.message_ms(server_rank(i), r.worker, double(bytes));
    span(server_rank(i), EventKind::Send, Stream::Host, r.step, sv.free_at, end, bytes);
    sv.free_at = end;
    WorkerState& ws = worker_[std::size_t(r.worker)];
    ws.reply_at[std::size_t(i)] = end;
    ws.version_read[std::size_t(i)] = version(sv);
    if (--ws.replies_missing == 0) start_compute(r.worker);
  }

  const AsyncSetup& s_;
  int workers_, servers_;
  std::vector<WorkerState> worker_;
  std::vector<ServerState> server_;
  AsyncTimeline out_;
};

}  // namespace

AsyncTimeline simulate_parameter_servers(const AsyncSetup& setup) { return Simulation(setup).run(); }

}  // namespace loom::predict
