// Device all-reduce bandwidth on GPUs: Loom's NCCL communicator (allreduce_sum of device
// memory: pointer check, enqueue on its stream, completion event polled by the watchdog)
// against raw ncclAllReduce + cudaStreamSynchronize on a communicator of its own, the
// peer nccl-tests measures. Rank r uses GPU r. Interleaved rounds (raw, loom, loom, raw,
// ...) over float buffers from 4 KiB to 256 MiB (x4 steps, plus the 25 MiB default
// bucket); the median per-call time of each, as the slowest rank saw it. Figures follow
// nccl-tests (doc/PERFORMANCE.md): algbw = bytes / time, busbw = algbw * 2(n-1)/n.
// Target: Loom's busbw >= 95% of raw NCCL's from 1 MiB up (below, the watchdog's polling
// and the pointer query are a visible share of a few-microsecond call).
// On an H200 (one rank, 2026-11-26) Loom reached only 0.56-0.65 of raw at every size, 4
// KiB to 256 MiB. Two more contenders, interleaved with the others, tell where that goes:
// raw NCCL on a non-blocking communicator (config.blocking = 0, as Loom's; the call
// settled by polling ncclCommGetAsyncError, then a stream synchronize), and raw NCCL on
// a blocking one whose completion is polled through an event as Loom's watchdog polls it.
// If the first is slow, the non-blocking mode costs it; if the second, the polling.
//   mpirun -n 2 bench_allreduce_nccl [--seconds S]
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/comm/mpi.h"
#include "loom/comm/nccl.h"

using namespace loom;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_allreduce_nccl: %s\n", what.c_str());
  comm::abort_mpi(1);
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}
void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) die(std::string(what) + ": " + ncclGetErrorString(r));
}

struct Raw {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
};

Raw open_raw(int rank, int size, bool blocking) {
  ncclUniqueId id{};
  if (rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  Raw raw;
  check_cuda(cudaStreamCreateWithFlags(&raw.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cuda(cudaEventCreateWithFlags(&raw.done, cudaEventDisableTiming), "cudaEventCreate");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  ncclResult_t r = ncclCommInitRankConfig(&raw.comm, size, id, rank, &config);
  while (r == ncclInProgress) check_nccl(ncclCommGetAsyncError(raw.comm, &r), "ncclCommGetAsyncError");
  check_nccl(r, "ncclCommInitRankConfig");
  return raw;
}

enum class Contender { Raw, Loom, RawNonBlocking, RawEventPolled };
constexpr const char* kContenderNames[] = {"raw", "loom", "raw_nonblocking", "raw_event_polled"};

void raw_call(const Raw& raw, float* data, std::int64_t count, Contender how) {
  ncclResult_t r = ncclAllReduce(data, data, std::size_t(count), ncclFloat, ncclSum, raw.comm, raw.stream);
  while (r == ncclInProgress) check_nccl(ncclCommGetAsyncError(raw.comm, &r), "ncclCommGetAsyncError");
  check_nccl(r, "ncclAllReduce");
  if (how != Contender::RawEventPolled) return check_cuda(cudaStreamSynchronize(raw.stream), "cudaStreamSynchronize");
  check_cuda(cudaEventRecord(raw.done, raw.stream), "cudaEventRecord");
  for (;;) {
    const cudaError_t e = cudaEventQuery(raw.done);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check_cuda(e, "cudaEventQuery");
    std::this_thread::yield();
  }
}

// Seconds per call over `calls` calls, the slowest rank's.
double time_batch(Contender how, float* data, std::int64_t count, int calls, comm::Communicator& nccl,
                  const Raw& raw, const Raw& nonblocking) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < calls; ++i) {
    if (how == Contender::Loom) {
      const Status s = nccl.allreduce_sum(data, count);
      if (!s.ok()) die("allreduce_sum: " + s.error().describe());
    } else {
      raw_call(how == Contender::RawNonBlocking ? nonblocking : raw, data, count, how);
    }
  }
  double per_call = (MPI_Wtime() - t0) / calls;
  MPI_Allreduce(MPI_IN_PLACE, &per_call, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return per_call;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  auto world = comm::init_mpi(&argc, &argv, {});
  if (!world.ok()) die(world.error().describe());
  double seconds = 0.5;
  if (argc == 3 && std::string(argv[1]) == "--seconds") seconds = std::atof(argv[2]);
  const int rank = (*world)->rank(), size = (*world)->size();
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < size) {
    if (rank == 0) std::fprintf(stderr, "bench_allreduce_nccl: needs one GPU per rank (%d ranks, %d GPUs)\n", size, gpus);
    world->reset();
    comm::finalize_mpi();
    return 2;
  }
  check_cuda(cudaSetDevice(rank), "cudaSetDevice");
  comm::NcclOptions options;
  options.device = rank;
  auto nccl = comm::make_nccl_communicator(**world, options);
  if (!nccl.ok()) die(nccl.error().describe());
  const Raw raw = open_raw(rank, size, true);
  const Raw nonblocking = open_raw(rank, size, false);

  std::vector<std::int64_t> sizes;
  for (std::int64_t b = 4 << 10; b <= (std::int64_t(256) << 20); b *= 4) sizes.push_back(b);
  sizes.push_back(std::int64_t(25) << 20);
  std::sort(sizes.begin(), sizes.end());
  float* data = nullptr;
  check_cuda(cudaMalloc(&data, std::size_t(sizes.back())), "cudaMalloc");
  check_cuda(cudaMemset(data, 0, std::size_t(sizes.back())), "cudaMemset");

  nlohmann::json rows = nlohmann::json::array();
  if (rank == 0)
    std::printf("| bytes | raw NCCL busbw GB/s | Loom busbw GB/s | Loom / raw | raw non-blocking / raw | "
                "raw event-polled / raw |\n|---|---|---|---|---|---|\n");
  constexpr int kContenders = 4;
  for (std::int64_t bytes : sizes) {
    const std::int64_t count = bytes / std::int64_t(sizeof(float));
    for (int c = 0; c < kContenders; ++c) time_batch(Contender(c), data, count, 3, **nccl, raw, nonblocking);  // warm-up
    const double probe = time_batch(Contender::Raw, data, count, 3, **nccl, raw, nonblocking);
    const int calls = std::clamp(int(1e-3 / std::max(probe, 1e-9)) + 1, 1, 1000);
    std::vector<double> seconds_of[kContenders];
    double spent = 0;
    for (int round = 0; round < 200 && (round < 5 || spent < seconds); ++round) {
      for (int i = 0; i < kContenders; ++i) {  // rotated each round: none always runs first
        const int c = (i + round) % kContenders;
        const double t = time_batch(Contender(c), data, count, calls, **nccl, raw, nonblocking);
        seconds_of[c].push_back(t);
        spent += t * calls;
      }
    }
    const double factor = size > 1 ? 2.0 * (size - 1) / size : 1.0;
    double bus[kContenders];
    for (int c = 0; c < kContenders; ++c) bus[c] = double(bytes) / median(seconds_of[c]) / 1e9 * factor;
    if (rank == 0)
      std::printf("| %lld | %.2f | %.2f | %.3f | %.3f | %.3f |\n", (long long)bytes, bus[0], bus[1], bus[1] / bus[0],
                  bus[2] / bus[0], bus[3] / bus[0]);
    nlohmann::json row{{"bytes", bytes}, {"ratio", bus[1] / bus[0]}, {"rounds", seconds_of[0].size()}};
    for (int c = 0; c < kContenders; ++c) row[std::string(kContenderNames[c]) + "_busbw_gbs"] = bus[c];
    rows.push_back(row);
  }
  if (rank == 0) std::printf("%s\n", nlohmann::json{{"ranks", size}, {"sizes", rows}}.dump().c_str());
  cudaFree(data);
  for (const Raw* r : {&raw, &nonblocking}) {
    ncclCommDestroy(r->comm);
    cudaEventDestroy(r->done);
    cudaStreamDestroy(r->stream);
  }
  nccl->reset();
  world->reset();
  comm::finalize_mpi();
  return 0;
}
