// Importing PyTorch profiler traces (Kineto's Chrome-trace JSON, plain or gzip, one file
// per rank) as a stored Loom run, so a PyTorch DDP run can be compared with a Loom run of
// the same model (`loom-cli import --kineto`, then `loom-cli compare`).
//
// Pure: files are read and validated wholly in memory; nothing here touches a store
// except store_imported_run, which writes the finished run in one transaction, so a
// refused file leaves nothing behind. What a PyTorch event becomes (kind and stream) is
// decided by one table, kKinetoMapping in import_kineto.cpp, documented in docs/manual.md
// ("Importing PyTorch traces").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/status.h"
#include "loom/store/run_store.h"
#include "loom/trace/event.h"

namespace loom::kineto {

// Largest rank an importer accepts: ranks size vectors in analysis.
inline constexpr int kMaxImportRank = 4095;

// One rank's trace, converted. Times are nanoseconds on the file's clock: since the
// profiler started (legacy exports) or since the Unix epoch (Kineto, baseTimeNanoseconds).
struct RankTrace {
  std::string file;
  int rank = 0;
  int world_size = 0;      // distributedInfo.world_size, 0 when the file does not say
  std::string backend;     // distributedInfo.backend, "" when the file does not say
  bool absolute_clock = false;  // times since the Unix epoch, comparable across ranks of one host
  bool has_gpu = false;         // kernels, memcpys or GPU annotations were present
  // The GPU its kernels ran on, from the trace's deviceProperties (newer Kineto files:
  // name, totalGlobalMem, computeMajor/Minor; cuda_runtime_version and cuda_driver_version
  // where present). Not recorded for older files and traces without GPU work.
  trace::DeviceInfo device;
  // Layers the trace names ("forward NAME" / "backward NAME" ranges): events' layer ids
  // index this list; spans outside such ranges keep layer -1 (the whole pass).
  std::vector<std::string> layer_names;
  std::vector<trace::Event> events;
  std::int64_t steps = 0, collectives = 0, collective_bytes = 0;
  std::int64_t trace_events = 0, ignored = 0;  // every traceEvents entry; those not imported
};

// Reads a file as text, inflating it when it is gzip (by its magic bytes, not its name).
// NotFound / Io when it cannot be read, Corrupt when the gzip stream is damaged.
Expected<std::string> read_trace_text(const std::string& path);

// The rank a file name implies: "rank3", "rank_3", "rank-3" anywhere, or a final "_3.json"
// / "-3.json" (also .json.gz, .pt.trace.json); nullopt when it implies none.
std::optional<int> rank_from_file_name(const std::string& path);

// Parses one trace. `file` names it in every error; `rank_hint` is used when the trace has
// no distributedInfo. InvalidArgument for a document that is not a trace, Corrupt for
// JSON that does not parse (truncated, damaged).
Expected<RankTrace> parse_kineto_trace(const std::string& text, const std::string& file,
                                       std::optional<int> rank_hint);

struct ImportOptions {
  std::string name;          // run name; "" = "pytorch " + the first file's name
  std::optional<int> rank;   // the rank of a single file without distributedInfo
};

// A whole run, ready to store.
struct ImportedRun {
  trace::RunRecord run;
  std::vector<trace::RankRecord> ranks;
  std::vector<std::pair<int, std::vector<trace::Event>>> events;  // by rank
  std::vector<trace::MetricRecord> metrics;
  std::vector<RankTrace> traces;  // per rank, events moved out (counts for the summary)
};

// Reads, parses and checks every file (distinct ranks, one clock kind), then builds the
// run: status completed, plan_json {"imported": "kineto", ...} (not a Loom plan), ranks'
// clocks put on rank 0's. Fails on the first file that is wrong, naming it.
Expected<ImportedRun> import_kineto_files(const std::vector<std::string>& paths, const ImportOptions& options);

// Stores the run in one transaction (RunStore::import_run); returns its id.
Expected<std::int64_t> store_imported_run(store::RunStore& store, const ImportedRun& run);

// The layer names an imported run's plan_json lists, by layer id; empty when it names none
// or is not an imported plan.
std::vector<std::string> imported_layer_names(const std::string& plan_json);

// True when a stored run's plan_json says it was imported (it is then not a Loom plan).
bool is_imported_plan(const std::string& plan_json);

}  // namespace loom::kineto
