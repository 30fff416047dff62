// Parameter-server training simulated event by event (see async_simulation.h).
#include "async_simulation.h"

#include <algorithm>
#include <cmath>
#include <deque>
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

// One piece of a server's serial work, decided when the server takes a message and done
// in order: answering a pull, taking a gradient, applying one.
enum class Work { Reply, Receive, Apply };
struct Task {
  Work kind = Work::Reply;
  Request request;
  double left_ms = 0;          // work left, in ms at full speed
  double started_ms = -1;      // -1: not begun
  trace::UpdateRecord update{};  // Apply: the update, but for when it ends
};
Task task(Work kind, const Request& r, double ms) {
  Task t;
  t.kind = kind, t.request = r, t.left_ms = ms;
  return t;
}

struct WorkerState {
  std::int64_t step = 0;
  double step_start = 0, push_start = 0;
  bool computing = false;
  double compute_start = 0, compute_left = 0;  // ms of work left at full speed
  double delay_until = kNever;  // a straggler's delay: it sleeps, no core needed
  int replies_missing = 0;
  std::vector<double> reply_at;  // per server, this step's pull
  std::vector<std::int64_t> version_read;
};

struct ServerState {
  std::deque<Task> tasks;
  std::vector<Request> inbox, deferred, held;
  std::int64_t applied = 0;
  std::vector<std::int64_t> clocks, pulled;  // per worker
  std::vector<bool> done;
};

// How fast each worker's compute and each server's current task go until the next event.
struct Rates {
  std::vector<double> worker, server;
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

  // Cores: a computing worker's threads come first (a waiting rank yields its core); what
  // they leave goes to the servers' tasks in server order, a transfer needing a core for
  // the server and one for its worker. A task that finds too few shares what is free with
  // every waiting rank of its host, in turns (see AsyncSetup::contended_share). Without
  // crowding (no cores given) everything goes at full speed.
  Rates rates() const {
    Rates out{std::vector<double>(std::size_t(workers_), 1.0), std::vector<double>(std::size_t(servers_), 1.0)};
    if (s_.host_cores.empty()) return out;
    std::vector<double> demand(s_.host_cores.size(), 0.0), waiting(s_.host_cores.size(), 0.0);
    for (std::size_t r = 0; r < s_.host_of.size(); ++r) {
      const bool computing = r < std::size_t(workers_) && worker_[r].computing;
      (computing ? demand : waiting)[std::size_t(s_.host_of[r])] += computing ? s_.worker_threads : 1.0;
    }
    std::vector<double> free(s_.host_cores.size());
    for (std::size_t h = 0; h < free.size(); ++h) free[h] = std::max(0.0, s_.host_cores[h] - demand[h]);
    for (int w = 0; w < workers_; ++w) {
      const std::size_t h = std::size_t(s_.host_of[std::size_t(w)]);
      if (demand[h] > s_.host_cores[h]) out.worker[std::size_t(w)] = s_.host_cores[h] / demand[h];
    }
    for (int i = 0; i < servers_; ++i)
      if (!server_[std::size_t(i)].tasks.empty()) out.server[std::size_t(i)] = server_rate(i, waiting, free);
    return out;
  }

  // Full speed, taking the cores it needs from `free` (the server's, and for a transfer
  // its worker's); where they lack, its turns on the server's host's free cores among the
  // ranks waiting there.
  double server_rate(int i, const std::vector<double>& waiting, std::vector<double>& free) const {
    const Task& front = server_[std::size_t(i)].tasks.front();
    const std::size_t host = std::size_t(s_.host_of[std::size_t(server_rank(i))]);
    const bool transfer = front.kind != Work::Apply;
    const std::size_t peer = transfer ? std::size_t(s_.host_of[std::size_t(front.request.worker)]) : host;
    const double on_host = transfer && peer == host ? 2.0 : 1.0;
    if (free[host] < on_host || (peer != host && free[peer] < 1.0))
      return s_.contended_share * free[host] / std::max(1.0, waiting[host]);
    free[host] -= on_host;
    if (peer != host) free[peer] -= 1.0;
    return 1.0;
  }

  // The earliest thing that happens next: a worker's compute or delay ending, a server's
  // task ending, or an idle server taking its earliest message. False when nothing is left.
  bool next_event() {
    for (ServerState& sv : server_)
      if (!sv.tasks.empty() && sv.tasks.front().started_ms < 0) sv.tasks.front().started_ms = now_;
    const Rates rate = rates();
    enum class What { Nothing, ComputeEnds, DelayEnds, TaskEnds, Take } what = What::Nothing;
    double best = kNever;
    int who = -1;
    auto consider = [&](double t, What w, int index) {
      if (t < best) best = t, what = w, who = index;
    };
    for (int w = 0; w < workers_; ++w) {
      const WorkerState& ws = worker_[std::size_t(w)];
      if (ws.computing && rate.worker[std::size_t(w)] > 0)
        consider(now_ + ws.compute_left / rate.worker[std::size_t(w)], What::ComputeEnds, w);
      consider(ws.delay_until, What::DelayEnds, w);
    }
    for (int i = 0; i < servers_; ++i) {
      const ServerState& sv = server_[std::size_t(i)];
      if (!sv.tasks.empty()) {
        if (rate.server[std::size_t(i)] > 0) consider(now_ + sv.tasks.front().left_ms / rate.server[std::size_t(i)], What::TaskEnds, i);
      } else if (!sv.inbox.empty()) {
        consider(std::max(now_, sv.inbox[earliest(sv.inbox)].arrives_ms), What::Take, i);
      }
    }
    if (what == What::Nothing) return false;
    advance(best, rate);
    if (what == What::ComputeEnds) finish_compute(who);
    if (what == What::DelayEnds) worker_[std::size_t(who)].delay_until = kNever, start_push(who, 0, now_);
    if (what == What::TaskEnds) finish_task(who);
    if (what == What::Take) handle(who);
    return true;
  }

  // Moves time on to `to`, every compute and current task progressing at its rate.
  void advance(double to, const Rates& rate) {
    const double dt = to - now_;
    for (int w = 0; w < workers_; ++w)
      if (worker_[std::size_t(w)].computing) worker_[std::size_t(w)].compute_left -= dt * rate.worker[std::size_t(w)];
    for (int i = 0; i < servers_; ++i)
      if (!server_[std::size_t(i)].tasks.empty()) server_[std::size_t(i)].tasks.front().left_ms -= dt * rate.server[std::size_t(i)];
    now_ = to;
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
  // the worker does), then the compute and the residual, which holds a core as the
  // compute does (see async_simulation.h).
  void start_compute(int w) {
    WorkerState& ws = worker_[std::size_t(w)];
    double at = ws.step_start;
    for (int i = 0; i < servers_; ++i) {
      const double end = std::max(at, ws.reply_at[std::size_t(i)]);
      span(w, EventKind::Pull, Stream::Host, ws.step, at, end, s_.shard_bytes[std::size_t(i)]);
      at = end;
    }
    span(w, EventKind::Wait, Stream::Compute, ws.step, ws.step_start, at);
    ws.computing = true;
    ws.compute_start = at;
    ws.compute_left = own_work_ms(s_.workers[std::size_t(w)]);
  }

  static double own_work_ms(const AsyncWorkerWork& work) {
    double ms = work.residual_ms;
    for (const PredictedSpan& c : work.compute) ms += c.end_ms - c.start_ms;
    return ms;
  }

  // The compute's spans, stretched alike over the time it took where it shared its cores
  // (the residual after them, no span); then a straggler's delay, which sleeps.
  void finish_compute(int w) {
    WorkerState& ws = worker_[std::size_t(w)];
    const AsyncWorkerWork& work = s_.workers[std::size_t(w)];
    const double total = own_work_ms(work);
    const double stretch = total > 0 ? (now_ - ws.compute_start) / total : 1.0;
    double at = ws.compute_start;
    for (const PredictedSpan& c : work.compute) {
      const double end = at + (c.end_ms - c.start_ms) * stretch;
      span(w, c.kind, Stream::Compute, ws.step, at, end, 0, c.layer);
      at = end;
    }
    ws.computing = false;
    if (work.injected_ms > 0) span(w, EventKind::InjectedDelay, Stream::Compute, ws.step, now_, now_ + work.injected_ms);
    ws.delay_until = now_ + work.injected_ms;
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
    for (int i = 0; i < servers_; ++i)
      server_[std::size_t(i)].inbox.push_back({w, Message::Done, 0, 0, t + s_.message_ms(w, server_rank(i), kHeaderBytes)});
  }

  void handle(int i) {
    ServerState& sv = server_[std::size_t(i)];
    const std::size_t next = earliest(sv.inbox);
    const Request r = sv.inbox[next];
    sv.inbox.erase(sv.inbox.begin() + std::ptrdiff_t(next));
    if (r.type == Message::Pull) sv.deferred.push_back(r);
    if (r.type == Message::Done) sv.done[std::size_t(r.worker)] = true;
    if (r.type == Message::Push) {
      const std::int64_t bytes = s_.shard_bytes[std::size_t(i)];
      sv.tasks.push_back(task(Work::Receive, r, s_.push_ms(r.worker, server_rank(i), double(bytes))));
      sv.held.push_back(r);
    }
    settle(i);
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
  // answered, until neither moves. Versions move as each is decided: the server does its
  // tasks in order, so a reply reads what every task before it left.
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
    ++sv.applied;
    sv.clocks[std::size_t(r.worker)] = std::max(sv.clocks[std::size_t(r.worker)], r.step + 1);
    Task t = task(Work::Apply, r, s_.apply_ms[std::size_t(i)]);
    t.update = {r.worker, i, r.step, r.version_read, before, staleness, 0};
    sv.tasks.push_back(t);
  }

  void reply(int i, const Request& r) {
    ServerState& sv = server_[std::size_t(i)];
    sv.pulled[std::size_t(r.worker)] = std::max(sv.pulled[std::size_t(r.worker)], r.step);
    worker_[std::size_t(r.worker)].version_read[std::size_t(i)] = version(sv);
    const double bytes = double(s_.shard_bytes[std::size_t(i)]);
    sv.tasks.push_back(task(Work::Reply, r, s_.message_ms(server_rank(i), r.worker, bytes)));
  }

  // The server's current task is done: its span, and what it lets its worker do next.
  void finish_task(int i) {
    ServerState& sv = server_[std::size_t(i)];
    const Task done = sv.tasks.front();
    sv.tasks.pop_front();
    const Request& r = done.request;
    const std::int64_t bytes = s_.shard_bytes[std::size_t(i)];
    WorkerState& ws = worker_[std::size_t(r.worker)];
    if (done.kind == Work::Apply) {
      span(server_rank(i), EventKind::Optimizer, Stream::Compute, r.step, done.started_ms, now_);
      out_.updates.push_back(done.update);
      out_.updates.back().t_ns = std::llround(now_ * 1e6);
    } else if (done.kind == Work::Reply) {
      span(server_rank(i), EventKind::Send, Stream::Host, r.step, done.started_ms, now_, bytes);
      ws.reply_at[std::size_t(i)] = now_;
      if (--ws.replies_missing == 0) start_compute(r.worker);
    } else {  // the worker's push, blocked until now, ends as the server takes the gradient
      span(server_rank(i), EventKind::Recv, Stream::Host, r.step, done.started_ms, now_, bytes);
      span(r.worker, EventKind::Push, Stream::Host, r.step, ws.push_start, now_, bytes);
      if (i + 1 < servers_) return start_push(r.worker, i + 1, now_);
      finish_step(r.worker, now_);
    }
  }

  const AsyncSetup& s_;
  int workers_, servers_;
  double now_ = 0;
  std::vector<WorkerState> worker_;
  std::vector<ServerState> server_;
  AsyncTimeline out_;
};

}  // namespace

AsyncTimeline simulate_parameter_servers(const AsyncSetup& setup) { return Simulation(setup).run(); }

}  // namespace loom::predict
