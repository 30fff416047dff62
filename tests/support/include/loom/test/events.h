// Spans built by hand for tests of figures, exports and views: a kind on a stream over
// [start, end), with a step and a layer; every other field keeps Event's default (no
// peer, no message, microbatch -1). Times in nanoseconds, or in milliseconds converted
// as start_ms * 1e6 truncated, which is exact for whole milliseconds.
#pragma once

#include <cstdint>

#include "loom/trace/event.h"

namespace loom::testing {

inline loom::trace::Event span_ns(loom::trace::EventKind kind, loom::trace::Stream stream, std::int64_t start_ns,
                                  std::int64_t end_ns, int step = -1, int layer = -1) {
  loom::trace::Event e;
  e.kind = kind;
  e.stream = stream;
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  e.step = step;
  e.layer = layer;
  return e;
}

inline loom::trace::Event span_ms(loom::trace::EventKind kind, loom::trace::Stream stream, double start_ms,
                                  double end_ms, int step = -1, int layer = -1) {
  return span_ns(kind, stream, static_cast<std::int64_t>(start_ms * 1e6), static_cast<std::int64_t>(end_ms * 1e6),
                 step, layer);
}

}  // namespace loom::testing
