// Run store ingest benchmark: writes 1M trace events (4 ranks, batches of 10k, one
// transaction per batch, as the launcher does) into a fresh SQLite file, then loads them
// back and summarises the run. Figures are compared with the targets in GUIDE section 5:
//   ingest rate = events / wall seconds of all append_events calls  (target >= 500k/s)
//   load time   = wall seconds of load_events for the whole run     (budget: a 1M-event run
//                 opens in the GUI in <= 2 s, so loading must take well under that)
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "loom/analysis/analysis.h"
#include "loom/store/run_store.h"

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Realistic shapes: steps of per-layer forward/backward spans, time increasing per rank.
std::vector<loom::trace::Event> make_batch(int rank, std::size_t first, std::size_t n) {
  std::vector<loom::trace::Event> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto k = static_cast<std::int64_t>(first + i);
    auto& e = v[i];
    e.start_ns = k * 2'000 + rank;
    e.end_ns = e.start_ns + 1'500;
    e.step = static_cast<std::int32_t>(k / 64);
    e.layer = static_cast<std::int32_t>(k % 16);
    e.kind = static_cast<loom::trace::EventKind>(k % 6);
    e.stream = k % 6 == 5 ? loom::trace::Stream::Comm : loom::trace::Stream::Compute;
    e.bytes = k % 6 == 5 ? 1 << 20 : 0;
  }
  return v;
}

int fail(const loom::Error& e) {
  std::fprintf(stderr, "bench_store_ingest: %s\n", e.describe().c_str());
  return 1;
}
}  // namespace

int main() {
  constexpr std::size_t kEvents = 1'000'000, kBatch = 10'000;
  constexpr int kRanks = 4;
  constexpr double kTargetRate = 500'000.0;
  const auto path = std::filesystem::temp_directory_path() /
                    ("loom_bench_store_" + std::to_string(Clock::now().time_since_epoch().count()) + ".db");
  double ingest_s = 0, load_s = 0, summary_s = 0;
  std::size_t loaded = 0;
  {
    auto store = loom::store::RunStore::open(path.string());
    if (!store.ok()) return fail(store.error());
    loom::trace::RunRecord run;
    run.name = "bench";
    run.world_size = kRanks;
    auto id = store->create_run(run);
    if (!id.ok()) return fail(id.error());
    const std::size_t per_rank = kEvents / kRanks;
    for (std::size_t first = 0; first < per_rank; first += kBatch) {
      for (int r = 0; r < kRanks; ++r) {
        auto batch = make_batch(r, first, kBatch);  // generated outside the timed region
        auto t0 = Clock::now();
        auto st = store->append_events(*id, r, batch.data(), batch.size());
        ingest_s += seconds_since(t0);
        if (!st.ok()) return fail(st.error());
      }
    }
    if (auto st = store->finish_run(*id, loom::trace::RunStatus::Completed, ingest_s, 0, ""); !st.ok()) return fail(st.error());

    auto t0 = Clock::now();
    auto events = store->load_events(*id);
    load_s = seconds_since(t0);
    if (!events.ok()) return fail(events.error());
    loaded = events->size();
    t0 = Clock::now();
    auto summary = loom::analysis::summarize_run(*store, *id);
    summary_s = seconds_since(t0);
    if (!summary.ok()) return fail(summary.error());
  }
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  const double rate = static_cast<double>(kEvents) / ingest_s;
  std::printf("run store ingest: %zu events, %d ranks, batches of %zu, file %s\n", kEvents, kRanks, kBatch,
              path.string().c_str());
  std::printf("  ingest:    %.3f s  -> %.0f events/s  (target >= %.0f/s: %.2fx) %s\n", ingest_s, rate, kTargetRate,
              rate / kTargetRate, rate >= kTargetRate ? "OK" : "BELOW TARGET");
  std::printf("  load back: %.3f s for %zu events -> %.0f events/s (GUI open budget 2 s: %.0f%% of it)\n", load_s,
              loaded, static_cast<double>(loaded) / load_s, load_s / 2.0 * 100.0);
  std::printf("  summarize: %.3f s (per-rank load + interval union)\n", summary_s);
  if (!ec) std::printf("  file size: %.1f MiB (%.1f bytes/event)\n", bytes / 1048576.0, double(bytes) / kEvents);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix, ec);
  return loaded == kEvents ? 0 : 1;
}
