// The NCCL communicator across real processes on real GPUs, run by CTest under mpiexec
// with label gpu: rank r on GPU r, so it needs as many GPUs as ranks. Where there are
// fewer, or no driver, it checks only that joining NCCL ends on every rank with an error
// and a hint (rank 0's real ncclGetUniqueId crosses MPI first; a rank whose peer cannot
// join gives up at the watchdog's deadline), then exits 77 (skipped). With the GPUs:
//   - the whole Communicator contract (comm_checks.h) on host memory, which the NCCL
//     communicator hands to the MPI one it wraps;
//   - all-reduce (blocking and non-blocking, small and 8M floats) and broadcast of device
//     memory over NCCL, exact for integer-valued floats;
//   - the same on a split sub-communicator, which joins its own NCCL communicator;
//   - device point-to-point messages: crossing sends on two tags, received out of send
//     order across tags, each exact.
// Usage: test_comm_nccl EXPECTED_SIZE
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "comm_checks.h"
#include "loom/comm/mpi.h"
#include "loom/comm/nccl.h"

using namespace loom;
using namespace loom::comm;

namespace {

constexpr int kSkip = 77;

// A device buffer holding checks::filled(rank, count).
struct DeviceFloats {
  float* ptr = nullptr;
  std::int64_t count = 0;
  DeviceFloats(int rank, std::int64_t n) : count(n) {
    const auto host = checks::filled(rank, n);
    if (cudaMalloc(&ptr, std::size_t(n) * sizeof(float)) != cudaSuccess) ptr = nullptr;
    if (ptr) cudaMemcpy(ptr, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();  // written before NCCL's own stream reads it (communicator.h)
  }
  ~DeviceFloats() { cudaFree(ptr); }
  std::vector<float> to_host() const {
    std::vector<float> host(static_cast<std::size_t>(count));
    cudaMemcpy(host.data(), ptr, host.size() * sizeof(float), cudaMemcpyDeviceToHost);
    return host;
  }
};

void device_allreduce(Communicator& c, checks::Failures& f) {
  for (std::int64_t count : {std::int64_t(1), std::int64_t(1000), std::int64_t(8) << 20}) {
    DeviceFloats blocking(c.rank(), count), nonblocking(c.rank(), count);
    if (!f.expect_ok(c.allreduce_sum(blocking.ptr, count), "allreduce_sum")) return;
    checks::expect_sums(blocking.to_host(), c.size(), "device allreduce of " + std::to_string(count), f);
    auto request = c.iallreduce_sum(nonblocking.ptr, count);
    while (!request->test()) {
    }
    if (!f.expect_ok(request->wait(), "iallreduce_sum")) return;
    checks::expect_sums(nonblocking.to_host(), c.size(), "device iallreduce of " + std::to_string(count), f);
  }
}

void device_broadcast(Communicator& c, checks::Failures& f) {
  const int root = c.size() - 1;
  DeviceFloats data(c.rank(), 4096);
  if (!f.expect_ok(c.broadcast(data.ptr, data.count * std::int64_t(sizeof(float)), root), "broadcast")) return;
  f.expect(data.to_host() == checks::filled(root, data.count), "device broadcast: not the root's data on rank " +
                                                                  std::to_string(c.rank()));
}

void device_split(Communicator& c, checks::Failures& f) {
  auto group = c.split(c.rank() % 2, c.rank());
  if (!group) return f.expect(false, "split returned no communicator");
  f.expect(group->backend_name() == "nccl" && group->accepts_device_memory(), "a split of NCCL is NCCL");
  device_allreduce(*group, f);
}

// Every rank sends three device messages on two tags to the next rank before receiving
// from the previous one, the tag-8 message first: crossing sends, as 1F1B's activations
// and gradients cross, which one NCCL communicator would deadlock on, and receives in
// another order than the sends across tags, which MPI's (source, tag) matching allows.
void device_p2p(Communicator& c, checks::Failures& f) {
  const int next = (c.rank() + 1) % c.size(), prev = (c.rank() + c.size() - 1) % c.size();
  const auto count = [](int m) { return std::int64_t(1000 + 997 * m); };
  const auto tag = [](int m) { return 7 + m % 2; };
  std::vector<std::unique_ptr<DeviceFloats>> out, in;
  std::vector<std::unique_ptr<Request>> sends;
  for (int m = 0; m < 3; ++m) {
    out.push_back(std::make_unique<DeviceFloats>(10 * c.rank() + m, count(m)));
    sends.push_back(c.isend(out.back()->ptr, count(m) * std::int64_t(sizeof(float)), next, tag(m)));
  }
  for (int m : {1, 0, 2}) {
    auto received = std::make_unique<DeviceFloats>(-1, count(m));
    if (!f.expect_ok(c.recv(received->ptr, count(m) * std::int64_t(sizeof(float)), prev, tag(m)), "recv")) return;
    f.expect(received->to_host() == checks::filled(10 * prev + m, count(m)),
             "device message " + std::to_string(m) + " from rank " + std::to_string(prev) + " differs");
    in.push_back(std::move(received));
  }
  for (auto& s : sends) f.expect_ok(s->wait(), "isend");
}

// Where the GPUs are missing, joining must still end on every rank with an error that
// names what failed and gives a hint, not hang or crash; then the GPU checks are skipped.
bool fails_cleanly_without_gpus(Communicator& world, int gpus) {
  NcclOptions options;
  options.device = world.rank();
  options.timeout = std::chrono::seconds(20);
  auto nccl = make_nccl_communicator(world, options);
  const bool clean = !nccl.ok() && nccl.error().code == ErrorCode::Unavailable && !nccl.error().hint.empty();
  std::printf("[rank %d] without enough GPUs: %s\n", world.rank(),
              nccl.ok() ? "joined?" : nccl.error().describe().c_str());
  if (world.rank() == 0) std::printf("SKIP: %d GPU(s) here, %d ranks need one each\n", gpus, world.size());
  float unclean = clean ? 0.0f : 1.0f;  // one verdict on every rank, so mpiexec's exit code is it
  return world.allreduce_sum(&unclean, 1).ok() && unclean == 0.0f;
}

int run(Communicator& nccl) {
  std::vector<checks::Check> all = checks::all_checks();
  all.push_back({"device_allreduce", device_allreduce});
  all.push_back({"device_broadcast", device_broadcast});
  all.push_back({"device_split", device_split});
  all.push_back({"device_p2p", device_p2p});
  int failed = 0;
  for (const checks::Check& check : all) {
    checks::Failures f;
    check.fn(nccl, f);
    for (const auto& m : f.messages) std::fprintf(stderr, "[rank %d] %s: %s\n", nccl.rank(), check.name, m.c_str());
    float failing = f.messages.empty() ? 0.0f : 1.0f;
    if (!nccl.allreduce_sum(&failing, 1).ok()) return 1;
    if (failing > 0) ++failed;
    if (nccl.rank() == 0) std::printf("%s %s\n", failing > 0 ? "FAIL" : "PASS", check.name);
  }
  if (nccl.rank() == 0) std::printf("%d passed, %d failed\n", int(all.size()) - failed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto world = init_mpi(&argc, &argv, {});
  if (!world.ok() || argc < 2) {
    std::fprintf(stderr, "usage: mpiexec -n N test_comm_nccl N\n");
    return 2;
  }
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
  int rc = 0;
  if ((*world)->size() != std::atoi(argv[1])) {
    std::fprintf(stderr, "world size %d, expected %s\n", (*world)->size(), argv[1]);
    rc = 1;
  } else if (gpus < (*world)->size()) {
    rc = fails_cleanly_without_gpus(**world, gpus) ? kSkip : 1;
  } else {
    NcclOptions options;
    options.device = (*world)->rank();
    auto nccl = make_nccl_communicator(**world, options);
    if (!nccl.ok()) {
      std::fprintf(stderr, "[rank %d] %s\n", (*world)->rank(), nccl.error().describe().c_str());
      rc = 1;
    } else {
      rc = run(**nccl);
    }
  }
  world.value().reset();
  finalize_mpi();
  return rc;
}
