// Device all-reduce bandwidth on GPUs: Loom's NCCL communicator (allreduce_sum of device
// memory: pointer check, enqueue on its stream, completion event polled by the watchdog)
// against raw ncclAllReduce + cudaStreamSynchronize on a communicator of its own, the
// peer nccl-tests measures. Rank r uses GPU r. Interleaved rounds (raw, loom, loom, raw,
// ...) over float buffers from 4 KiB to 256 MiB (x4 steps, plus the 25 MiB default
// bucket); the median per-call time of each, as the slowest rank saw it. Figures follow
// nccl-tests (doc/PERFORMANCE.md): algbw = bytes / time, busbw = algbw * 2(n-1)/n.
// Target: Loom's busbw >= 90% of raw NCCL's from 1 MiB up (below, the watchdog's polling
// and the pointer query are a visible share of a few-microsecond call). Ready to run on a
// machine with one GPU per rank; it has not run on one.
//   mpirun -n 2 bench_allreduce_nccl [--seconds S]
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
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
};

Raw open_raw(int rank, int size) {
  ncclUniqueId id{};
  if (rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  Raw raw;
  check_cuda(cudaStreamCreateWithFlags(&raw.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check_nccl(ncclCommInitRank(&raw.comm, size, id, rank), "ncclCommInitRank");
  return raw;
}

// Seconds per call over `calls` calls, the slowest rank's.
double time_batch(bool loom, float* data, std::int64_t count, int calls, comm::Communicator& nccl, const Raw& raw) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < calls; ++i) {
    if (loom) {
      const Status s = nccl.allreduce_sum(data, count);
      if (!s.ok()) die("allreduce_sum: " + s.error().describe());
    } else {
      check_nccl(ncclAllReduce(data, data, std::size_t(count), ncclFloat, ncclSum, raw.comm, raw.stream), "ncclAllReduce");
      check_cuda(cudaStreamSynchronize(raw.stream), "cudaStreamSynchronize");
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
  const Raw raw = open_raw(rank, size);

  std::vector<std::int64_t> sizes;
  for (std::int64_t b = 4 << 10; b <= (std::int64_t(256) << 20); b *= 4) sizes.push_back(b);
  sizes.push_back(std::int64_t(25) << 20);
  std::sort(sizes.begin(), sizes.end());
  float* data = nullptr;
  check_cuda(cudaMalloc(&data, std::size_t(sizes.back())), "cudaMalloc");
  check_cuda(cudaMemset(data, 0, std::size_t(sizes.back())), "cudaMemset");

  nlohmann::json rows = nlohmann::json::array();
  if (rank == 0) std::printf("| bytes | raw NCCL busbw GB/s | Loom busbw GB/s | Loom / raw |\n|---|---|---|---|\n");
  for (std::int64_t bytes : sizes) {
    const std::int64_t count = bytes / std::int64_t(sizeof(float));
    time_batch(true, data, count, 3, **nccl, raw);  // warm-up
    const double probe = time_batch(false, data, count, 3, **nccl, raw);
    const int calls = std::clamp(int(1e-3 / std::max(probe, 1e-9)) + 1, 1, 1000);
    std::vector<double> raw_s, loom_s;
    double spent = 0;
    for (int round = 0; round < 200 && (round < 5 || spent < seconds); ++round) {
      const bool loom_first = round % 2 == 1;  // A B B A ...: neither always runs second
      for (int i = 0; i < 2; ++i) {
        const bool loom = (i == 0) == loom_first;
        const double t = time_batch(loom, data, count, calls, **nccl, raw);
        (loom ? loom_s : raw_s).push_back(t);
        spent += t * calls;
      }
    }
    const double factor = size > 1 ? 2.0 * (size - 1) / size : 1.0;
    const double raw_bus = double(bytes) / median(raw_s) / 1e9 * factor;
    const double loom_bus = double(bytes) / median(loom_s) / 1e9 * factor;
    if (rank == 0) std::printf("| %lld | %.2f | %.2f | %.3f |\n", (long long)bytes, raw_bus, loom_bus, loom_bus / raw_bus);
    rows.push_back({{"bytes", bytes}, {"raw_busbw_gbs", raw_bus}, {"loom_busbw_gbs", loom_bus},
                    {"ratio", loom_bus / raw_bus}, {"rounds", raw_s.size()}});
  }
  if (rank == 0) std::printf("%s\n", nlohmann::json{{"ranks", size}, {"sizes", rows}}.dump().c_str());
  cudaFree(data);
  ncclCommDestroy(raw.comm);
  cudaStreamDestroy(raw.stream);
  nccl->reset();
  world->reset();
  comm::finalize_mpi();
  return 0;
}
