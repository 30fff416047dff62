// loom-rank: one rank of a multi-process run, started by mpirun (or srun). It checks that
// the MPI world matches the plan, trains its replica with gradients summed over MPI, and
// (rank 0) prints a JSON summary line and optionally writes the final parameters.
//   mpirun -n N loom-rank PLAN [--dump-params FILE]
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "loom/comm/mpi.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/checkpoint.h"
#include "loom/engine/local_run.h"
#include "loom/engine/trainer.h"

using namespace loom;

namespace {

struct Options {
  std::string plan_path;
  std::string dump_params;
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dump-params" && i + 1 < argc) o.dump_params = argv[++i];
    else if (!a.empty() && a[0] != '-' && o.plan_path.empty()) o.plan_path = a;
    else return false;
  }
  return !o.plan_path.empty();
}

int fail(int rank, const std::string& message, int code) {
  std::fprintf(stderr, "loom-rank %d: %s\n", rank, message.c_str());
  return code;
}

// Ranks sharing this host, as the MPI launcher reports it; BLAS threads are divided among them.
int ranks_on_this_host(int world) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  }
  return world;
}

int train(comm::Communicator& comm, const Plan& plan, const Options& o) {
  const int rank = comm.rank();
  if (comm.size() != world_size(plan)) {
    return fail(rank,
                "the MPI world has " + std::to_string(comm.size()) + " rank(s) but plan '" + plan.name + "' needs " +
                    std::to_string(world_size(plan)) +
                    " (hint: start it with mpirun -n " + std::to_string(world_size(plan)) +
                    "; a launcher without MPI support starts N separate worlds of 1)",
                2);
  }
  auto data = data::load_dataset(plan.data);
  if (!data.ok()) return fail(rank, data.error().describe(), 1);
  engine::apply_thread_count(plan, ranks_on_this_host(comm.size()));
  std::vector<PlanError> errors;
  const ModelInfo info = infer_model(plan, &errors);
  engine::Trainer trainer(plan, info, *data, nullptr, &comm);
  const engine::TrainResult result = trainer.run({});
  if (!result.error.empty()) return fail(rank, result.error, 1);
  if (rank != 0) return 0;
  if (!o.dump_params.empty()) {
    Status saved = engine::save_params(o.dump_params, trainer.model().params());
    if (!saved.ok()) return fail(rank, saved.error().describe(), 1);
  }
  nlohmann::json summary = {{"world_size", comm.size()}, {"steps", result.steps},
                            {"wall_s", result.wall_s},   {"samples_per_s", double(result.samples) / result.wall_s},
                            {"final_loss", result.final_loss}, {"test_accuracy", result.test.accuracy}};
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: mpirun -n N loom-rank PLAN [--dump-params FILE]\n");
    return 2;
  }
  PlanResult loaded = load_plan_file(o.plan_path);
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s: %s: %s\n", o.plan_path.c_str(), e.path.c_str(), e.reason.c_str());
    return 2;
  }
  auto comm = comm::init_mpi(&argc, &argv);
  if (!comm.ok()) return fail(-1, comm.error().describe(), 1);
  const int code = train(**comm, *loaded.plan, o);
  if (code != 0 && (*comm)->size() > 1) comm::abort_mpi(code);
  comm->reset();
  comm::finalize_mpi();
  return code;
}
