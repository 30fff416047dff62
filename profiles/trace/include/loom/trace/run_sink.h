// Where a rank's record goes while it trains. The in-process path writes straight into
// the run store (store/store_sink.h); a rank under mpirun streams to the host, which
// writes the store (launcher/stream StreamSink). The RunWriter thread drains the
// recorder into whichever sink it is given, so training code never knows which.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/status.h"
#include "loom/trace/event.h"
#include "loom/trace/records.h"

namespace loom::trace {

class RunSink {
 public:
  virtual ~RunSink() = default;
  virtual Status write_events(int rank, const Event* events, std::size_t count) = 0;
  virtual Status write_metrics(const std::vector<MetricRecord>& metrics) = 0;
  virtual Status write_updates(const std::vector<UpdateRecord>& updates) = 0;  // server ranks only
};

}  // namespace loom::trace
