// The recorder's own cost, per event, on one thread (tracy reports ~2 ns per zone for its
// queue; Loom's Span also reads the clock twice): record() of a prepared event, a compute
// Span (two clock reads + record), a communication Span (the same plus two reads of the
// thread's run delay from /proc/thread-self/schedstat), back-to-back layer spans of a
// SpanChain (one clock read each), one schedstat read alone, and the drain that ships
// events. Prints a table and one JSON line; bench/tracing_cost.py turns the parts (clock
// read, schedstat read, record) into step dilation.
//   bench_recorder [--events N] [--repeats R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/trace/recorder.h"

using namespace loom::trace;

namespace {

using Clock = std::chrono::steady_clock;

// Best of `repeats` runs of `n` iterations of `body`, in ns per iteration; the recorder is
// drained between runs so every run writes into warm, preallocated chunks.
template <typename Body>
double best_ns_per_op(Recorder& rec, std::int64_t n, int repeats, Body body) {
  std::vector<Event> sink;
  sink.reserve(static_cast<std::size_t>(n));
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    for (std::int64_t i = 0; i < n; ++i) body(i);
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    best = std::min(best, ns / static_cast<double>(n));
    sink.clear();
    rec.drain(sink);
  }
  return best;
}

double drain_ns_per_event(Recorder& rec, std::int64_t n) {
  Event e;
  for (std::int64_t i = 0; i < n; ++i) rec.record(e);
  std::vector<Event> sink;
  sink.reserve(static_cast<std::size_t>(n));
  const auto start = Clock::now();
  rec.drain(sink);
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t n = 1'000'000;
  int repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--events") n = std::atoll(argv[i + 1]);
    if (a == "--repeats") repeats = std::atoi(argv[i + 1]);
  }
  Recorder rec;
  Event prepared;
  prepared.kind = EventKind::Forward;
  const double record = best_ns_per_op(rec, n, repeats, [&](std::int64_t i) {
    prepared.start_ns = i;
    rec.record(prepared);
  });
  const double compute_span = best_ns_per_op(rec, n, repeats, [&](std::int64_t i) {
    Span s(&rec, EventKind::Forward, Stream::Compute, std::int32_t(i));
  });
  const std::int64_t comm_n = std::max<std::int64_t>(1, n / 20);  // each does two preads
  const double comm_span = best_ns_per_op(rec, comm_n, repeats, [&](std::int64_t i) {
    Span s(&rec, EventKind::AllReduce, Stream::Comm, std::int32_t(i));
  });
  SpanChain chain(&rec);  // a long layer loop: every call ends one span and opens the next
  const double chained_span = best_ns_per_op(rec, n, repeats, [&](std::int64_t i) {
    chain.next(EventKind::Forward, Stream::Compute, std::int32_t(i));
  });
  const double schedstat = best_ns_per_op(rec, comm_n, repeats, [&](std::int64_t) {
    volatile std::int64_t d = thread_run_delay_ns();
    (void)d;
  });
  const double clock = best_ns_per_op(rec, n, repeats, [&](std::int64_t) {
    volatile std::int64_t t = now_ns();
    (void)t;
  });
  const double drain = drain_ns_per_event(rec, n);
  std::printf("recorder cost per event, one thread, best of %d x %lld:\n", repeats, static_cast<long long>(n));
  std::printf("  %-44s %8.1f ns\n", "record() of a prepared event", record);
  std::printf("  %-44s %8.1f ns\n", "steady_clock read (now_ns)", clock);
  std::printf("  %-44s %8.1f ns\n", "compute Span (2 clock reads + record)", compute_span);
  std::printf("  %-44s %8.1f ns\n", "chained compute span (1 clock read + record)", chained_span);
  std::printf("  %-44s %8.1f ns\n", "communication Span (+ 2 schedstat reads)", comm_span);
  std::printf("  %-44s %8.1f ns\n", "schedstat read (thread_run_delay_ns)", schedstat);
  std::printf("  %-44s %8.1f ns\n", "drain (copy out, per event)", drain);
  nlohmann::json j = {{"record_ns", record},          {"clock_ns", clock}, {"compute_span_ns", compute_span},
                      {"comm_span_ns", comm_span}, {"chained_span_ns", chained_span},
                      {"schedstat_ns", schedstat},  {"drain_ns", drain}, {"events", n}, {"repeats", repeats}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
