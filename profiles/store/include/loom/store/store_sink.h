// The in-process RunSink: a rank's record written straight into the run store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "loom/store/run_store.h"
#include "loom/trace/run_sink.h"

namespace loom::store {

// The in-process sink: one run in a RunStore (used from one thread at a time).
class StoreSink final : public trace::RunSink {
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
