// Gradient all-reduce bandwidth: Loom's MPI communicator (allreduce_sum and
// iallreduce_sum(...)->wait()) against raw MPI_Allreduce, interleaved in one run over
// float buffers from 4 KiB to 64 MiB (x4 steps, plus 25 MiB, the default bucket).
// Raw MPI_Iallreduce + MPI_Wait runs too, as a diagnostic: Open MPI implements the
// non-blocking collective in another component (libnbc) than the blocking one (tuned), so
// it separates what the MPI library costs from what Loom's wrapper costs.
// Figures follow nccl-tests (doc/PERFORMANCE.md):
//   algbw = bytes / time,  busbw = algbw * 2(n-1)/n   (GB/s = 1e9 bytes/s)
// Target: Loom's busbw >= 80% of raw MPI's at the same size. The limit for a
// shared-memory transport is this machine's single-process memcpy rate, measured in the
// same run by rank 0 alone. Raw MPI is the peer, so this file may call MPI directly.
// Prints a markdown table and a final JSON line on rank 0.
//   mpirun -n 2 bench_allreduce [--seconds S] [--min-kib K] [--max-mib M]
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/comm/mpi.h"

using namespace loom;

namespace {

constexpr double kTargetRatio = 0.8;
constexpr double kBatchSeconds = 1e-3;  // calls per timed batch: enough to dwarf timer and barrier noise
constexpr int kMinRounds = 5;
constexpr int kMaxRounds = 2000;

struct Options {
  double seconds_per_size = 0.6;  // timed seconds per size, all three methods together
  std::int64_t min_bytes = 4 << 10;
  std::int64_t max_bytes = std::int64_t(64) << 20;
};

enum Method { kRaw = 0, kLoom = 1, kRawNb = 2, kLoomNb = 3, kMethods = 4 };
const char* const kMethodNames[kMethods] = {"raw", "loom", "raw_nb", "loom_nb"};

struct Timing {
  double best_s = 0;
  double median_s = 0;
};

struct SizeResult {
  std::int64_t bytes = 0;
  std::array<Timing, kMethods> timing;
  int rounds = 0;
  int calls_per_batch = 0;
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    if (a == "--seconds") o.seconds_per_size = std::atof(argv[++i]);
    else if (a == "--min-kib") o.min_bytes = std::atoll(argv[++i]) << 10;
    else if (a == "--max-mib") o.max_bytes = std::atoll(argv[++i]) << 20;
    else return false;
  }
  return o.seconds_per_size > 0 && o.min_bytes >= 4 && o.max_bytes >= o.min_bytes;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_allreduce: %s\n", what.c_str());
  comm::abort_mpi(1);
}

void check(const Status& s, const char* what) {
  if (!s.ok()) die(std::string(what) + ": " + s.error().describe());
}

// 4 KiB, 16 KiB, ... x4 up to the maximum, plus the default 25 MiB bucket.
std::vector<std::int64_t> sizes(const Options& o) {
  std::vector<std::int64_t> out;
  for (std::int64_t b = o.min_bytes; b <= o.max_bytes; b *= 4) out.push_back(b);
  const std::int64_t bucket = std::int64_t(25) << 20;
  if (bucket >= o.min_bytes && bucket <= o.max_bytes) out.push_back(bucket);
  std::sort(out.begin(), out.end());
  return out;
}

void run_once(Method m, float* data, int count, comm::Communicator& comm) {
  if (m == kRaw) {
    if (MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) die("MPI_Allreduce failed");
  } else if (m == kRawNb) {
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Iallreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request) != MPI_SUCCESS ||
        MPI_Wait(&request, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      die("MPI_Iallreduce failed");
    }
  } else if (m == kLoom) {
    check(comm.allreduce_sum(data, count), "allreduce_sum");
  } else {
    check(comm.iallreduce_sum(data, count)->wait(), "iallreduce_sum");
  }
}

// Seconds per call of one batch, as the slowest rank saw it. The max-reduce makes the
// value identical on every rank, so ranks take the same decisions from it without talking.
double time_batch(Method m, float* data, int count, int calls, comm::Communicator& comm) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < calls; ++i) run_once(m, data, count, comm);
  double per_call = (MPI_Wtime() - t0) / calls;
  MPI_Allreduce(MPI_IN_PLACE, &per_call, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return per_call;
}

Timing summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return {v.front(), n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])};
}

// Rounds of one batch per method, in a rotating order so that no method always runs
// right after another's cache and page-table state; stops on the timed-seconds budget.
SizeResult measure_size(std::int64_t bytes, float* data, const Options& o, comm::Communicator& comm) {
  const int count = int(bytes / std::int64_t(sizeof(float)));
  for (int m = 0; m < kMethods; ++m) time_batch(Method(m), data, count, 3, comm);  // warmup
  const double probe = time_batch(kRaw, data, count, 3, comm);
  SizeResult r;
  r.bytes = bytes;
  r.calls_per_batch = std::clamp(int(std::ceil(kBatchSeconds / std::max(probe, 1e-9))), 1, 1000);
  std::array<std::vector<double>, kMethods> samples;
  double spent = 0;
  while (r.rounds < kMaxRounds && (r.rounds < kMinRounds || spent < o.seconds_per_size)) {
    for (int i = 0; i < kMethods; ++i) {
      const Method m = Method((r.rounds + i) % kMethods);
      const double t = time_batch(m, data, count, r.calls_per_batch, comm);
      samples[m].push_back(t);
      spent += t * r.calls_per_batch;
    }
    ++r.rounds;
  }
  for (int m = 0; m < kMethods; ++m) r.timing[m] = summarize(samples[m]);
  return r;
}

// Rank 0 alone copies a buffer larger than any cache: the rate one process can move
// memory, which bounds a transport that goes through shared memory.
double memcpy_gbps(int rank) {
  double best = 0;
  if (rank == 0) {
    const std::size_t bytes = std::size_t(64) << 20;
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    for (int i = 0; i < 8; ++i) {
      const double t0 = MPI_Wtime();
      std::memcpy(dst.data(), src.data(), bytes);
      best = std::max(best, double(bytes) / (MPI_Wtime() - t0) * 1e-9);
    }
    if (dst[bytes / 2] != 1) die("memcpy check failed");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return best;
}

// Every rank contributes rank + 1, so each element must come back as n(n+1)/2 from both
// of Loom's paths: a benchmark of a wrong result would be worthless.
void check_results(comm::Communicator& comm) {
  const int n = comm.size();
  const float expected = float(n * (n + 1) / 2);
  std::vector<float> v(1000);
  for (int m : {kLoom, kLoomNb}) {
    std::fill(v.begin(), v.end(), float(comm.rank() + 1));
    run_once(Method(m), v.data(), int(v.size()), comm);
    for (float x : v) {
      if (x != expected) die(std::string(kMethodNames[m]) + " returned a wrong sum");
    }
  }
}

double algbw(const SizeResult& r, Method m, bool median) {
  return double(r.bytes) / (median ? r.timing[m].median_s : r.timing[m].best_s) * 1e-9;
}

std::string size_name(std::int64_t bytes) {
  return bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes >> 10) + " KiB";
}

// Percent of `ref`'s bandwidth that `m` reached, from best-of or median times.
double percent(const SizeResult& r, Method m, Method ref, bool median) {
  return 100.0 * algbw(r, m, median) / algbw(r, ref, median);
}

void print_table(const std::vector<SizeResult>& results, int n, double memcpy_rate) {
  const double bus = n > 1 ? 2.0 * (n - 1) / n : 0.0;
  std::printf("all-reduce over %d ranks, float sum in place; busbw = algbw * 2(n-1)/n = algbw * %.2f\n", n, bus);
  std::printf("limit (shared-memory transport): single-process memcpy %.1f GB/s (rank 0 alone)\n\n", memcpy_rate);
  std::printf("| size | raw us | raw busbw GB/s | Loom busbw | Loom/raw best (median) | raw Iallreduce busbw | "
              "Loom iallreduce busbw | Loom i/raw best (median) | Loom i/raw I | raw busbw / memcpy |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n");
  for (const SizeResult& r : results) {
    std::printf("| %s | %.1f | %.2f | %.2f | %.0f%% (%.0f%%) | %.2f | %.2f | %.0f%% (%.0f%%) | %.0f%% | %.0f%% |\n",
                size_name(r.bytes).c_str(), r.timing[kRaw].best_s * 1e6, algbw(r, kRaw, false) * bus,
                algbw(r, kLoom, false) * bus, percent(r, kLoom, kRaw, false), percent(r, kLoom, kRaw, true),
                algbw(r, kRawNb, false) * bus, algbw(r, kLoomNb, false) * bus, percent(r, kLoomNb, kRaw, false),
                percent(r, kLoomNb, kRaw, true), percent(r, kLoomNb, kRawNb, false),
                100.0 * algbw(r, kRaw, false) * bus / memcpy_rate);
  }
  std::printf("\nbest of (median) over interleaved batches; target: Loom busbw >= %.0f%% of raw MPI_Allreduce's.\n"
              "raw I = raw MPI_Iallreduce + MPI_Wait, the library's own non-blocking path (diagnostic).\n",
              100 * kTargetRatio);
}

nlohmann::json to_json(const std::vector<SizeResult>& results, int n, double memcpy_rate) {
  const double bus = n > 1 ? 2.0 * (n - 1) / n : 0.0;
  nlohmann::json rows = nlohmann::json::array();
  double worst = 1e9;
  for (const SizeResult& r : results) {
    nlohmann::json row = {{"bytes", r.bytes}, {"rounds", r.rounds}, {"calls_per_batch", r.calls_per_batch}};
    for (int m = 0; m < kMethods; ++m) {
      const double bw = algbw(r, Method(m), false);
      row[kMethodNames[m]] = {{"best_us", r.timing[m].best_s * 1e6}, {"median_us", r.timing[m].median_s * 1e6},
                              {"algbw_gbps", bw}, {"busbw_gbps", bw * bus}};
    }
    worst = std::min({worst, percent(r, kLoom, kRaw, false), percent(r, kLoomNb, kRaw, false)});
    rows.push_back(row);
  }
  return {{"bench", "allreduce"}, {"ranks", n}, {"memcpy_gbps", memcpy_rate}, {"target_percent", 100 * kTargetRatio},
          {"min_loom_percent_of_raw", worst}, {"sizes", rows}};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: mpirun -n 2 bench_allreduce [--seconds S] [--min-kib K] [--max-mib M]\n");
    return 2;
  }
  auto comm = comm::init_mpi(&argc, &argv);
  if (!comm.ok()) {
    std::fprintf(stderr, "bench_allreduce: %s\n", comm.error().describe().c_str());
    comm::finalize_mpi();
    return 1;
  }
  comm::Communicator& c = **comm;
  check_results(c);
  const double memcpy_rate = memcpy_gbps(c.rank());
  // Zeros keep the repeated in-place sums finite (no overflow to inf); the rate of a float
  // add does not depend on its values short of denormals.
  std::vector<float> buffer(std::size_t(o.max_bytes / std::int64_t(sizeof(float))), 0.0f);
  std::vector<SizeResult> results;
  for (std::int64_t bytes : sizes(o)) results.push_back(measure_size(bytes, buffer.data(), o, c));
  if (c.rank() == 0) {
    print_table(results, c.size(), memcpy_rate);
    std::printf("%s\n", to_json(results, c.size(), memcpy_rate).dump().c_str());
  }
  comm->reset();
  comm::finalize_mpi();
  return 0;
}
