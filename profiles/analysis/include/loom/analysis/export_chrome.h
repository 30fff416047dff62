// Chrome Trace Event export: a stored run as the JSON object form that Perfetto and
// chrome://tracing open. One process per rank (pid = rank), one thread per stream
// (tid 0 compute, 1 comm, 2 host), every event a complete ("X") slice on rank 0's clock
// (see clock_align.h), in microseconds since the earliest aligned event of the run.
// Slices on one thread are strictly nested, as the viewers require: work that overlaps on
// one stream without nesting (several all-reduce buckets in flight at once) goes to extra
// lanes of that stream (tid = 16 * lane + stream, named "comm #2", ...), so every slice
// keeps its true length; otherData.extra_lanes counts the lanes opened. Each Send whose
// Recv is in the trace (sender = the Send's rank, receiver = its peer, same message id)
// gets a flow arrow: "s" at the send slice's start, "f" with "bp": "e" at the receive
// slice's end, sharing an "id", cat and name "message".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/core/status.h"
#include "loom/store/run_store.h"
#include "loom/trace/event.h"

namespace loom::chrome {

// One rank's input: its record (record.rank is the pid; its offsets align the clock; a
// default record with only `rank` set means offset 0) and its events on its own clock.
struct RankEvents {
  trace::RankRecord record;
  std::vector<trace::Event> events;  // any order
};

struct ExportStats {
  std::int64_t events = 0;          // "X" slices written
  int ranks = 0;                    // processes (ranks) in the trace
  std::int64_t extra_lanes = 0;     // lanes opened beyond one per stream, over all ranks
  std::int64_t flows = 0;           // send -> receive arrows ("s"/"f" pairs) written
};

// The whole trace as one JSON document: {"traceEvents", "displayTimeUnit",
// "distributedInfo": {backend, world_size, ranks}, "otherData": {run_id, name, status,
// loom_version, extra_lanes, time_origin_ns}}. Layer names come from the run's plan
// when it parses; `stats`, when given, receives the counts.
nlohmann::json chrome_trace(const trace::RunRecord& run, std::vector<RankEvents> ranks,
                            ExportStats* stats = nullptr);

// Loads run `run_id` (every rank with a record, with events, or below world_size),
// aligns each rank's clock and writes the trace to `path` (through path + ".tmp" and a
// rename, so a failed export never leaves a half-written file under the real name).
// Streams the events out rather than building one JSON document, so memory stays near
// the size of the events themselves. NotFound for an unknown run, Io naming the path.
Expected<ExportStats> export_chrome_trace(store::RunStore& store, std::int64_t run_id, const std::string& path);

}  // namespace loom::chrome
