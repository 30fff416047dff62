// Synchronous data parallelism is proven by equivalence: the same plan on 1, 2 and 4 real
// MPI ranks (mpiexec, 4 oversubscribed on this 2-core machine) ends with the same
// parameters after 20 steps as one process with the same seed and global batch, within
// 1e-5 relative difference per tensor (max |a-b| / max |a|; the only difference is the
// order of float summation in the all-reduce). SGD with momentum is used because Adam
// divides by sqrt(v), which turns round-off in near-zero gradients into O(lr) steps.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/checkpoint.h"
#include "loom/engine/trainer.h"

using namespace loom;

namespace {

Plan base_plan() {
  Plan plan = default_plan();
  plan.name = "dp-equivalence";
  LayerSpec flatten, hidden, relu, output;
  flatten.kind = LayerKind::Flatten;
  hidden.kind = LayerKind::Linear;
  hidden.out = 64;
  relu.kind = LayerKind::Relu;
  output.kind = LayerKind::Linear;
  output.out = 10;
  plan.model.layers = {flatten, hidden, relu, output};
  plan.data.train_limit = 2560;
  plan.data.test_limit = 500;
  plan.training.batch = 64;
  plan.training.steps = 20;
  plan.training.threads = 1;
  plan.training.optimizer.kind = OptimizerKind::Momentum;
  plan.training.optimizer.lr = 0.05;
  plan.parallel.bucket_mb = 0.05;  // several buckets, so bucketing and overlap are exercised
  assign_default_layer_names(plan.model);  // as parsing does, so parameter names match
  return plan;
}

Plan with_ranks(Plan plan, int ranks, int accumulation) {
  plan.parallel.data_parallel = ranks;
  plan.parallel.grad_accumulation = accumulation;
  plan.parallel.devices.assign(std::size_t(ranks), DeviceSpec{});
  return plan;
}

std::vector<engine::NamedTensor> single_process_params(const Plan& plan) {
  auto data = data::load_dataset(plan.data);
  if (!data.ok()) qFatal("%s", data.error().describe().c_str());
  std::vector<PlanError> errors;
  engine::Trainer trainer(plan, infer_model(plan, &errors), *data, nullptr);
  trainer.run({});
  std::vector<engine::NamedTensor> out;
  for (const engine::Param* p : trainer.model().params()) out.push_back({p->name, p->value});
  return out;
}

struct RankRun {
  int exit_code = -1;
  QString err;
};

RankRun mpirun(int ranks, const QString& plan_path, const QString& params_path) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
  env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  env.insert("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
  p.setProcessEnvironment(env);
  p.start(LOOM_MPIEXEC, {"-n", QString::number(ranks), "--oversubscribe", "--bind-to", "none", LOOM_RANK, plan_path,
                         "--dump-params", params_path});
  if (!p.waitForFinished(240000)) p.kill();
  p.waitForFinished();
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace

class DataParallelEquivalence : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  std::vector<engine::NamedTensor> reference_;

  QString write_plan(const Plan& plan, const QString& name) {
    QFile f(dir_.filePath(name));
    f.open(QIODevice::WriteOnly);
    f.write(QByteArray::fromStdString(plan_to_json(plan)));
    return f.fileName();
  }

 private slots:
  void initTestCase() { reference_ = single_process_params(base_plan()); }

  void sameParametersAsOneProcess_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<int>("accumulation");
    QTest::newRow("1 rank") << 1 << 1;
    QTest::newRow("2 ranks") << 2 << 1;
    QTest::newRow("4 ranks") << 4 << 1;
    QTest::newRow("2 ranks x 2 accumulation steps") << 2 << 2;
  }

  void sameParametersAsOneProcess() {
    QFETCH(int, ranks);
    QFETCH(int, accumulation);
    const QString tag = QString("r%1a%2").arg(ranks).arg(accumulation);
    const QString plan = write_plan(with_ranks(base_plan(), ranks, accumulation), tag + ".json");
    const RankRun run = mpirun(ranks, plan, dir_.filePath(tag + ".params"));
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    auto params = engine::load_params(dir_.filePath(tag + ".params").toStdString());
    QVERIFY(params.ok());
    QCOMPARE(params->size(), reference_.size());
    for (std::size_t i = 0; i < reference_.size(); ++i) {
      QCOMPARE((*params)[i].name, reference_[i].name);
      const double diff = engine::relative_difference(reference_[i].values, (*params)[i].values);
      QVERIFY2(diff <= 1e-5, qPrintable(QString("%1 differs by %2").arg(reference_[i].name.c_str()).arg(diff)));
    }
  }

  // The comparison is not vacuous: a different global batch gives different parameters.
  void differentBatchDiffers() {
    Plan other = base_plan();
    other.training.batch = 32;
    const auto params = single_process_params(other);
    QVERIFY(engine::relative_difference(reference_[0].values, params[0].values) > 1e-3);
  }

  void worldSizeMismatchIsReported() {
    const QString plan = write_plan(with_ranks(base_plan(), 4, 1), "needs4.json");
    const RankRun run = mpirun(2, plan, dir_.filePath("never.params"));
    QVERIFY(run.exit_code != 0);
    QVERIFY2(run.err.contains("needs 4"), qPrintable(run.err));
  }
};

QTEST_GUILESS_MAIN(DataParallelEquivalence)
#include "test_dp_equivalence.moc"
