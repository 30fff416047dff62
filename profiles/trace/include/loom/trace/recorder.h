// The per-process event recorder (one per rank), built like tracy's queues: every thread
// writes into its own chunked buffer with no lock and no allocation (except, rarely, when a
// chunk fills), and one consumer drains all buffers through acquire/release publish
// counters, so a streaming thread can drain while training threads record.
// With LOOM_TRACING=0 record() and Span are empty inline bodies: a trace-off build
// measures exactly what tracing costs.
#pragma once

#include <algorithm>
#include <atomic>
#include <climits>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "loom/trace/event.h"

#ifndef LOOM_TRACING
#define LOOM_TRACING 1
#endif

namespace loom::trace {

// Steady-clock nanoseconds: the time base of every Event on this rank.
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Nanoseconds the calling thread has spent runnable but waiting for a core since it
// started (Linux /proc/thread-self/schedstat, second field); -1 where unavailable. About a
// microsecond: a pread on a file kept open per thread.
std::int64_t thread_run_delay_ns();

// Microseconds between two thread_run_delay_ns() readings, 0 when either is unknown.
inline std::int32_t descheduled_us(std::int64_t before_ns, std::int64_t after_ns) {
  if (before_ns < 0 || after_ns < before_ns) return 0;
  return static_cast<std::int32_t>(std::min<std::int64_t>((after_ns - before_ns) / 1000, INT32_MAX));
}

namespace detail {
struct ThreadBuffer;
}

class Recorder {
 public:
  explicit Recorder(std::size_t events_per_chunk = 1 << 16);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Hot path: no lock, no allocation unless the calling thread's chunk is full.
#if LOOM_TRACING
  void record(const Event& e);
#else
  void record(const Event&) {}
#endif

  // Appends everything recorded since the last drain, from all threads, and returns how
  // many events it appended. Safe to call concurrently with record() from any thread;
  // concurrent drains are serialised among themselves.
  std::size_t drain(std::vector<Event>& out);

  // Total events ever recorded, all threads (a snapshot; it may lag a concurrent record).
  std::uint64_t recorded() const;

  std::size_t events_per_chunk() const { return chunk_capacity_; }

 private:
  detail::ThreadBuffer* register_thread();

  std::size_t chunk_capacity_;
  std::uint64_t generation_;  // unique per instance: thread_local caches key on it
  mutable std::mutex registry_mutex_;  // guards buffers_ (registration, drain, recorded)
  std::vector<std::unique_ptr<detail::ThreadBuffer>> buffers_;
  std::mutex drain_mutex_;  // one consumer at a time
};

// The fields every span starts with; times and descheduled time are set as it runs.
inline Event span_event(EventKind kind, Stream stream, std::int32_t step, std::int32_t layer, std::int16_t microbatch,
                        std::int64_t bytes = 0) {
  Event e;
  e.kind = kind;
  e.stream = stream;
  e.step = step;
  e.layer = layer;
  e.microbatch = microbatch;
  e.bytes = bytes;
  return e;
}

// Records [start_ns, end_ns) as a Setup span of `phase` on the host stream: time spent
// getting ready to train (or tidying up after it), kept out of every training figure.
inline void record_setup(Recorder& recorder, SetupPhase phase, std::int64_t start_ns, std::int64_t end_ns = now_ns()) {
  Event e;
  e.kind = EventKind::Setup;
  e.stream = Stream::Host;
  e.message = static_cast<std::int32_t>(phase);
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  recorder.record(e);
}

// Whether a communication or waiting span reads the thread's run delay (two schedstat
// reads, a microsecond or more each). Posting a non-blocking send returns in microseconds:
// the chance that a preemption falls inside it is its duration over a time slice, so its
// expected descheduled time is negligible next to the reads' cost. Spans that wait measure.
enum class Descheduling : std::uint8_t { Measured, NotMeasured };

// RAII span: starts at construction, records at destruction. A null recorder makes it a
// no-op, so call sites need no `if (recorder)`.
class Span {
 public:
#if LOOM_TRACING
  Span(Recorder* r, EventKind kind, Stream stream, std::int32_t step, std::int32_t layer = -1,
       std::int16_t microbatch = -1, std::int64_t bytes = 0, Descheduling descheduling = Descheduling::Measured)
      : recorder_(r) {
    if (!recorder_) return;
    event_ = span_event(kind, stream, step, layer, microbatch, bytes);
    measure_ = measures_descheduling(kind) && descheduling == Descheduling::Measured;
    if (measure_) run_delay_ns_ = thread_run_delay_ns();
    event_.start_ns = now_ns();
  }
  ~Span() {
    if (!recorder_) return;
    event_.end_ns = now_ns();
    if (measure_) event_.descheduled_us = descheduled_us(run_delay_ns_, thread_run_delay_ns());
    recorder_->record(event_);
    if (twin_kind_ != EventKind::Setup) record_twin();
  }
  // Also records a second event of `kind` on `stream` over exactly this span (same times,
  // step, microbatch, peer and descheduled time; no message or bytes): a receive that is
  // also the pipeline's idle time costs one pair of clock and schedstat reads, not two.
  void also_record_as(EventKind kind, Stream stream) {
    twin_kind_ = kind;
    twin_stream_ = stream;
  }
#else
  Span(Recorder*, EventKind, Stream, std::int32_t, std::int32_t = -1, std::int16_t = -1,
       std::int64_t = 0, Descheduling = Descheduling::Measured) {}
  ~Span() {}
  void also_record_as(EventKind, Stream) {}
#endif
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  // To set peer/message/bytes before the span ends.
  Event& event() { return event_; }

 private:
#if LOOM_TRACING
  void record_twin() {
    Event twin = event_;
    twin.kind = twin_kind_;
    twin.stream = twin_stream_;
    twin.message = -1;
    twin.bytes = 0;
    recorder_->record(twin);
  }

  Recorder* recorder_ = nullptr;
  std::int64_t run_delay_ns_ = -1;
  bool measure_ = false;
  EventKind twin_kind_ = EventKind::Setup;  // Setup: no twin (a Span is never a setup span)
  Stream twin_stream_ = Stream::Compute;
#endif
  Event event_;
};

// Back-to-back compute spans, one clock read per boundary: next() ends the open span and
// starts the following one at the same instant, so a loop over layers pays one clock read
// per layer instead of two. The few instructions between two layers count to the later
// one. For compute kinds only (no descheduling measured); close() ends the open span
// before work that belongs to neither.
class SpanChain {
 public:
#if LOOM_TRACING
  explicit SpanChain(Recorder* r) : recorder_(r) {}
  ~SpanChain() { close(); }
  void next(EventKind kind, Stream stream, std::int32_t step, std::int32_t layer = -1,
            std::int16_t microbatch = -1) {
    if (!recorder_) return;
    const std::int64_t now = now_ns();
    end_open(now);
    event_ = span_event(kind, stream, step, layer, microbatch);
    event_.start_ns = now;
    open_ = true;
  }
  void close() {
    if (recorder_ && open_) end_open(now_ns());
  }

 private:
  void end_open(std::int64_t now) {
    if (!open_) return;
    event_.end_ns = now;
    recorder_->record(event_);
    open_ = false;
  }

  Recorder* recorder_ = nullptr;
  bool open_ = false;
  Event event_;
#else
  explicit SpanChain(Recorder*) {}
  void next(EventKind, Stream, std::int32_t, std::int32_t = -1, std::int16_t = -1) {}
  void close() {}
#endif
  SpanChain(const SpanChain&) = delete;
  SpanChain& operator=(const SpanChain&) = delete;
};

}  // namespace loom::trace
