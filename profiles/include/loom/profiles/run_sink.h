// Where a rank's record goes while it trains. The in-process path writes straight into
// the run store; a rank under mpirun streams to the host, which writes the store. The
// RunWriter thread drains the recorder into whichever sink it is given, so training code
// never knows which.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/status.h"
#include "loom/profiles/event.h"
#include "loom/profiles/run_store.h"

namespace loom::store {

class RunSink {
 public:
  virtual ~RunSink() = default;
  virtual Status write_events(int rank, const trace::Event* events, std::size_t count) = 0;
  virtual Status write_metrics(const std::vector<MetricRecord>& metrics) = 0;
  virtual Status write_updates(const std::vector<UpdateRecord>& updates) = 0;  // server ranks only
};

// The in-process sink: one run in a RunStore (used from one thread at a time).
class StoreSink final : public RunSink {
 public:
  StoreSink(RunStore& store, std::int64_t run_id) : store_(store), run_id_(run_id) {}
  Status write_events(int rank, const trace::Event* events, std::size_t count) override {
    return store_.append_events(run_id_, rank, events, count);
  }
  Status write_metrics(const std::vector<MetricRecord>& metrics) override {
    return store_.append_metrics(run_id_, metrics);
  }
  Status write_updates(const std::vector<UpdateRecord>& updates) override {
    return store_.append_updates(run_id_, updates);
  }

 private:
  RunStore& store_;
  std::int64_t run_id_;
};

}  // namespace loom::store
