// The trace event: a fixed-size plain struct so recording it is a few stores into a
// preallocated per-thread buffer. No strings: what happened is `kind`, where is `layer`
// (a LayerId from model inference) and `stream`; names are looked up when displaying.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace loom::trace {

enum class EventKind : std::uint8_t {
  Forward = 0,
  Backward = 1,
  Optimizer = 2,
  DataLoad = 3,
  Evaluate = 4,
  AllReduce = 5,   // one bucket: start = issued, end = completed
  Send = 6,
  Recv = 7,
  Push = 8,        // parameter server: worker -> server gradient
  Pull = 9,        // parameter server: server -> worker parameters
  Wait = 10,       // blocked on communication or a peer
  Idle = 11,       // pipeline bubble
  InjectedDelay = 12,  // straggler injection
  Step = 13,       // a whole optimizer step (outer span)
  Loss = 14,       // loss forward + backward
  Broadcast = 15,
  Barrier = 16,
  Setup = 17,      // before training: dataset, clock alignment, bandwidth probe, model build
  Copy = 18,       // a copy between host and device memory (a gpu rank's batch upload), copy lane
};
inline constexpr int kEventKindCount = 19;

// Which part of setting up a rank a Setup span covers (stored in Event::message), so the
// timeline and `show` can say where start-up time went without a string per event.
enum class SetupPhase : std::int32_t {
  LoadData = 0,
  ClockAlignment = 1,
  BandwidthProbe = 2,
  BuildModel = 3,
};
inline constexpr int kSetupPhaseCount = 4;

// An Optimizer span's message when it is local SGD's outer step: after the replicas'
// parameters are summed (an AllReduce span), taking their mean and each replica's distance
// from it. The local steps' optimizer spans keep message -1.
inline constexpr std::int32_t kOuterOptimizerStep = 1;

// Streams separate work that may overlap in time (compute vs communication) so that
// spans on one stream always nest properly.
// Copy: a gpu rank's copies between host and device memory (Copy spans: the batch upload),
// shown on a lane of their own; their time also lies inside the DataLoad span that counts it.
enum class Stream : std::uint8_t { Compute = 0, Comm = 1, Host = 2, Copy = 3 };
inline constexpr int kStreamCount = 4;

struct Event {
  std::int64_t start_ns = 0;  // steady clock, this rank's clock
  std::int64_t end_ns = 0;
  std::int64_t bytes = 0;     // payload for communication / data, 0 otherwise
  std::int32_t step = -1;     // optimizer step
  std::int32_t layer = -1;    // LayerId, -1 when not about one layer
  std::int32_t peer = -1;     // other rank for point-to-point, -1 otherwise
  std::int32_t message = -1;  // message id / version (matches sends to receives)
  std::int16_t microbatch = -1;
  EventKind kind = EventKind::Forward;
  Stream stream = Stream::Compute;
  // Microseconds this thread spent runnable but not running (waiting for a core: ranks
  // outnumber cores) while the span was open; measured for communication and waiting spans
  // only (measures_descheduling), 0 elsewhere or where the kernel does not say.
  std::int32_t descheduled_us = 0;
};
static_assert(std::is_trivially_copyable_v<Event>);
static_assert(sizeof(Event) == 48);

// Moving data between ranks (the breakdown's communication category).
constexpr bool is_communication(EventKind kind) {
  switch (kind) {
    case EventKind::AllReduce:
    case EventKind::Send:
    case EventKind::Recv:
    case EventKind::Push:
    case EventKind::Pull:
    case EventKind::Broadcast:
    case EventKind::Barrier:
      return true;
    default:
      return false;
  }
}

// Communication and waiting: the spans whose time may be a rank waiting for a core rather
// than for a message, so the recorder measures how long their thread was descheduled.
constexpr bool measures_descheduling(EventKind kind) {
  return is_communication(kind) || kind == EventKind::Wait || kind == EventKind::Idle;
}

std::string_view event_kind_name(EventKind kind);  // "forward", "allreduce", ...
std::string_view stream_name(Stream stream);        // "compute", "comm", "host"
std::string_view setup_phase_name(std::int32_t phase);  // "load data", "clock alignment", ...

}  // namespace loom::trace
