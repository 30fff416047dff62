// Model, pipeline and hybrid parallelism proven by equivalence under real mpiexec: GPipe
// and 1F1B with 2 and 3 stages and 1, 2, 4 and 8 micro-batches, two parallel branches on
// two ranks, and 2 replicas x 2 stages each end 10 steps of Fashion-MNIST training with the
// same parameters as one process with the same seed and global batch (1e-5 relative
// difference per tensor). Ranks are oversubscribed on small machines; only speed suffers.
#include "loom/test/plans.h"
#include "rank_equivalence.h"

using namespace loom;
using namespace loom::testing;

namespace {

Plan base_plan() {
  Plan plan = default_plan();
  plan.name = "pipeline-equivalence";
  plan.data.train_limit = 1280;
  plan.data.test_limit = 500;
  plan.training.batch = 64;
  plan.training.steps = 10;
  plan.training.threads = 1;
  plan.training.optimizer.kind = OptimizerKind::Momentum;
  plan.training.optimizer.lr = 0.05;
  return plan;
}

Plan with_stages(Plan plan, int stages, int microbatches, Schedule schedule, int replicas = 1) {
  plan.parallel.stages = stages;
  plan.parallel.microbatches = microbatches;
  plan.parallel.schedule = schedule;
  plan.parallel.data_parallel = replicas;
  plan.parallel.bucket_mb = 0.01;  // several buckets in the hybrid plan
  plan.parallel.devices.assign(std::size_t(stages * replicas), DeviceSpec{});
  assign_default_layer_names(plan.model);
  return plan;
}

// flatten, linear 64 | relu, linear 32 | relu, linear 10 over up to three stages.
Plan mlp(int stages) {
  Plan plan = base_plan();
  const int mid = std::min(1, stages - 1), last = stages - 1;
  plan.model.layers = {layer(LayerKind::Flatten, 0, 0), layer(LayerKind::Linear, 64, 0),
                       layer(LayerKind::Relu, 0, mid),   layer(LayerKind::Linear, 32, mid),
                       layer(LayerKind::Relu, 0, last),  layer(LayerKind::Linear, 10, last)};
  return plan;
}

// An inception-like block whose two branches run side by side on two ranks.
Plan branches() {
  Plan plan = base_plan();
  LayerSpec block = layer(LayerKind::Parallel, 0, 0);
  block.branches.resize(2);
  block.branches[0].layers = {layer(LayerKind::Linear, 48, 0), layer(LayerKind::Tanh, 0, 0)};
  block.branches[1].stage = 1;
  block.branches[1].layers = {layer(LayerKind::Linear, 16, 1), layer(LayerKind::Relu, 0, 1)};
  plan.model.layers = {layer(LayerKind::Flatten, 0, 0), block, layer(LayerKind::Linear, 10, 1)};
  return plan;
}

}  // namespace

class PipelineEquivalence : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;

 private slots:
  void pipelineMatchesOneProcess_data() {
    QTest::addColumn<int>("stages");
    QTest::addColumn<int>("microbatches");
    QTest::addColumn<int>("schedule");
    for (int p : {2, 3}) {
      for (int m : {1, 2, 4, 8}) {
        QTest::addRow("gpipe p%d m%d", p, m) << p << m << int(Schedule::GPipe);
        QTest::addRow("1f1b p%d m%d", p, m) << p << m << int(Schedule::OneFOneB);
      }
    }
  }

  void pipelineMatchesOneProcess() {
    QFETCH(int, stages);
    QFETCH(int, microbatches);
    QFETCH(int, schedule);
    const Plan plan = with_stages(mlp(stages), stages, microbatches, Schedule(schedule));
    QVERIFY(validate_plan(plan).empty());
    const QString tag = QString("p%1m%2s%3").arg(stages).arg(microbatches).arg(schedule);
    expect_same_params_under_mpirun(dir_, plan, tag, single_process_params(plan));
  }

  void branchesOnTwoRanksMatchOneProcess() {
    const Plan plan = with_stages(branches(), 2, 2, Schedule::GPipe);
    QVERIFY(validate_plan(plan).empty());
    expect_same_params_under_mpirun(dir_, plan, "branches", single_process_params(plan));
  }

  void hybridTwoByTwoMatchesOneProcess() {
    const Plan plan = with_stages(mlp(2), 2, 2, Schedule::OneFOneB, 2);
    QVERIFY(validate_plan(plan).empty());
    expect_same_params_under_mpirun(dir_, plan, "hybrid", single_process_params(plan));
  }
};

QTEST_GUILESS_MAIN(PipelineEquivalence)
#include "test_pipeline_equivalence.moc"
