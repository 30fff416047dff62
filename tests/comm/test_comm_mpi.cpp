// The MPI communicator across real processes, run by CTest under mpiexec. Usage:
//   test_comm_mpi EXPECTED_SIZE [--max-count N]
// EXPECTED_SIZE guards against a misconfigured launcher that starts N singletons (each
// would see size 1 and pass alone). --max-count lowers the per-call MPI count so the
// splitting of large operations into int-sized calls is exercised.
// Every rank runs every check; the failure counts are summed so that all ranks agree on
// the verdict and return the same exit code. Rank 0 prints the summary; a rank prints
// its own failure details.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "comm_checks.h"
#include "loom/comm/mpi.h"

using namespace loom;
using namespace loom::comm;

namespace {

// Runs the shared contract; returns the number of checks that failed on any rank, or -1
// when the ranks could not even agree on that.
int run_checks(Communicator& world) {
  int failed = 0;
  const auto all = checks::all_checks();
  for (const checks::Check& check : all) {
    checks::Failures f;
    const auto start = std::chrono::steady_clock::now();
    check.fn(world, f);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    for (const auto& m : f.messages) std::fprintf(stderr, "[rank %d] %s: %s\n", world.rank(), check.name, m.c_str());
    float ranks_failing = f.messages.empty() ? 0.0f : 1.0f;
    if (!world.allreduce_sum(&ranks_failing, 1).ok()) return -1;
    if (ranks_failing > 0) ++failed;
    if (world.rank() == 0) {
      std::printf("%s %s (%.0f ms)", ranks_failing > 0 ? "FAIL" : "PASS", check.name, ms);
      if (ranks_failing > 0) std::printf(" (on %d ranks)", int(ranks_failing));
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (world.rank() == 0) std::printf("%d passed, %d failed\n", int(all.size()) - failed, failed);
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  auto world = init_mpi(&argc, &argv, {});
  if (!world.ok()) {
    std::fprintf(stderr, "test_comm_mpi: %s\n", world.error().describe().c_str());
    return 2;
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: test_comm_mpi EXPECTED_SIZE [--max-count N]\n");
    return 2;
  }
  const int expected_size = std::atoi(argv[1]);
  if (argc >= 4 && std::strcmp(argv[2], "--max-count") == 0) {
    MpiOptions options;
    options.max_count_per_call = std::atoll(argv[3]);
    world.value().reset();
    world = init_mpi(&argc, &argv, options);  // MPI is up: this only re-wraps the world
    if (!world.ok()) return 2;
  }
  Communicator& comm = **world;
  int rc = 0;
  if (comm.size() != expected_size || comm.backend_name() != "mpi") {
    std::fprintf(stderr, "[rank %d] world size %d (backend %s), expected %d: is mpiexec the one MPI was built with?\n",
                 comm.rank(), comm.size(), comm.backend_name().c_str(), expected_size);
    rc = 1;
  } else {
    if (comm.rank() == 0) std::printf("test_comm_mpi: %d ranks\n", comm.size());
    rc = run_checks(comm) == 0 ? 0 : 1;
  }
  world.value().reset();
  finalize_mpi();
  return rc;
}
