// loom-rank: one rank of a multi-process run, started by mpirun (or srun), normally by
// `loom-cli run` / the workbench, which also receive its live record. It checks that the
// MPI world matches the plan, trains its replica with gradients summed over MPI, and
// (rank 0) prints a JSON summary line and optionally writes the final parameters.
//   mpirun -n N loom-rank PLAN [--dump-params FILE]
#include <cstdio>
#include <string>

#include "loom/comm/mpi.h"
#include "loom/core/plan.h"
#include "rank_session.h"
#include "rank_signals.h"

using namespace loom;

namespace {

bool parse(int argc, char** argv, rank::RankOptions& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dump-params" && i + 1 < argc) o.dump_params = argv[++i];
    else if (!a.empty() && a[0] != '-' && o.plan_path.empty()) o.plan_path = a;
    else return false;
  }
  return !o.plan_path.empty();
}

}  // namespace

int main(int argc, char** argv) {
  rank::RankOptions options;
  if (!parse(argc, argv, options)) {
    std::fprintf(stderr, "usage: mpirun -n N loom-rank PLAN [--dump-params FILE]\n");
    return 2;
  }
  PlanResult loaded = load_plan_file(options.plan_path);
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors)
      std::fprintf(stderr, "%s: %s: %s\n", options.plan_path.c_str(), e.path.c_str(), e.reason.c_str());
    return 2;
  }
  comm::MpiOptions mpi_options;
  // A pipeline keeps its sends moving from a second thread (and hybrid runs all-reduce
  // on a communication thread while the pipeline sends).
  mpi_options.thread_multiple = loaded.plan->parallel.stages > 1;
  auto comm = comm::init_mpi(&argc, &argv, mpi_options);
  if (!comm.ok()) {
    std::fprintf(stderr, "loom-rank: %s\n", comm.error().describe().c_str());
    return 1;
  }
  rank::install_signal_handlers((*comm)->rank());
  const int code = rank::run_rank(**comm, *loaded.plan, options);
  // A rank that cannot go on must not leave its peers blocked in a collective.
  if (code != 0 && (*comm)->size() > 1) comm::abort_mpi(code);
  comm->reset();
  comm::finalize_mpi();
  return code;
}
