// The example plans on real GPUs under real mpiexec (label gpu): every synchronous
// strategy's example, its devices turned into gpu devices, trains 20 steps with loom-rank
// and is judged against the float64 reference (float64_reference.h): the plan's single
// process in double, computed here. Its error must be within 4x the float32 CPU's own
// (floor 1e-6; GPU and CPU sum in different orders, so they are not compared with each
// other). The MLP plans train with tanh for ReLU: ReLU's kink makes float32 errors of
// this model a random 2e-3..5e-3 after 20 steps (a rounding-sized difference flips a
// unit, docs/tests.md), so a bound that admits them could not see a defect at a stage
// boundary; with tanh the CPU's error is ~5e-7 and the bound 4e-6. Two placements per plan:
//   - "nccl": rank r on GPU r, gradients all-reduced over NCCL from device memory; needs
//     as many GPUs as ranks;
//   - "mpi, one GPU": every rank on GPU 0 with host-staged MPI traffic, the way a
//     single-GPU machine teaches every strategy.
// A row skips where the GPUs it needs are not there; the whole test where there is none.
#include <cuda_runtime.h>

#include "loom/kernels/cpu_backend.h"
#include "rank_equivalence.h"

using namespace loom;
using namespace loom::testing;

namespace {

int gpu_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// The branches plan keeps its ReLU: its max-pools take discrete decisions anyway, and its
// measured spread (float64_reference.h) bounds it.
std::string variant_of(const QString& file) { return file.startsWith("branches") ? "" : "tanh"; }

Plan on_gpus(const QString& file, bool nccl) {
  PlanResult parsed = load_plan_file(std::string(LOOM_PLANS_DIR) + "/" + file.toStdString());
  if (!parsed.plan) qFatal("%s does not load", qPrintable(file));
  Plan plan = *parsed.plan;
  plan.training.steps = 20;
  plan.training.threads = 1;
  plan.training.optimizer.kind = OptimizerKind::Momentum;  // Adam magnifies round-off (test_backend_training)
  plan.training.optimizer.lr = 0.05;
  plan.training.optimizer.momentum = 0.9;
  testing::apply_variant(plan, variant_of(file));
  plan.parallel.backend = nccl ? CommBackend::Nccl : CommBackend::Mpi;
  plan.parallel.devices.resize(std::size_t(world_size(plan)));
  for (std::size_t r = 0; r < plan.parallel.devices.size(); ++r) {
    plan.parallel.devices[r].kind = DeviceKind::Gpu;
    plan.parallel.devices[r].gpu = nccl ? int(r) : 0;
  }
  return plan;
}

}  // namespace

class GpuEquivalence : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  int gpus_ = 0;

 private slots:
  void initTestCase() {
    gpus_ = gpu_count();
    if (gpus_ == 0) QSKIP("no GPU or no driver here");
  }

  void examplePlansMatchOneCpuProcess_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<bool>("nccl");
    for (const char* file : {"dp4_mlp_fashion.json", "gpipe_mlp.json", "onefoneb_mlp.json", "hybrid_mlp.json",
                             "layer_split_mlp.json", "branches_two_devices.json"}) {
      QTest::newRow(qPrintable(QString("%1, nccl").arg(file))) << QString(file) << true;
      QTest::newRow(qPrintable(QString("%1, mpi, one GPU").arg(file))) << QString(file) << false;
    }
  }
  void examplePlansMatchOneCpuProcess() {
    QFETCH(QString, file);
    QFETCH(bool, nccl);
    const Plan plan = on_gpus(file, nccl);
    const int needed = nccl ? world_size(plan) : 1;
    if (gpus_ < needed) QSKIP(qPrintable(QString("needs %1 GPUs, %2 here").arg(needed).arg(gpus_)));
    const auto errors = validate_plan(plan);
    QVERIFY2(errors.empty(), errors.empty() ? "" : errors[0].reason.c_str());
    const QString tag = QFileInfo(file).baseName() + (nccl ? "-nccl" : "-mpi");
    const auto f64 = cpu::make_cpu_f64_backend();
    const TrainedRun reference = train_single_process(plan, *f64);
    const TrainedRun cpu = train_single_process(plan, *cpu::make_cpu_backend());
    expect_within_float64_bound(dir_, plan, tag, reference, cpu, measured_spread(file.toStdString(), variant_of(file)));
  }
};

QTEST_GUILESS_MAIN(GpuEquivalence)
#include "test_gpu_equivalence.moc"
