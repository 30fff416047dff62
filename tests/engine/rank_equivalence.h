// Shared by the equivalence tests that run loom-rank under real mpiexec: single-process
// reference parameters, one mpiexec run with --dump-params, and the per-tensor comparison
// (max |a-b| / max |a| <= 1e-5 by default: CPU ranks against one CPU process, which
// round their forward passes alike), or, for GPU ranks, the float64 reference's bound
// (float64_reference.h).
#pragma once

#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/checkpoint.h"
#include "loom/engine/data_parallel_trainer.h"
#include "float64_reference.h"

namespace loom::testing {

// Flatten, linear 64, relu, linear 10 on 2560 Fashion-MNIST samples, batch 64, 20 steps,
// one BLAS thread, learning rate 0.05: small enough for many mpiexec runs per test.
inline Plan small_mlp_plan(const std::string& name, OptimizerKind optimizer) {
  Plan plan = default_plan();
  plan.name = name;
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
  plan.training.optimizer.kind = optimizer;
  plan.training.optimizer.lr = 0.05;
  assign_default_layer_names(plan.model);  // as parsing does, so parameter names match
  return plan;
}

inline std::vector<engine::NamedTensor> single_process_params(Plan plan) {
  plan.parallel = ParallelSpec{};
  plan.parallel.devices.assign(1, DeviceSpec{});
  auto data = data::load_dataset(plan.data);
  if (!data.ok()) qFatal("%s", data.error().describe().c_str());
  std::vector<PlanError> errors;
  engine::Trainer trainer(plan, infer_model(plan, &errors), *data, nullptr);
  trainer.run({});
  return engine::named_copies(trainer.params());
}

struct RankRun {
  int exit_code = -1;
  QString err;
};

// `extra_env`: variables for every rank (LOOM_CHECKPOINT_DIR, LOOM_RESUME_FROM), passed
// on by mpiexec with -x.
inline RankRun mpirun(int ranks, const QString& plan_path, const QString& params_path,
                      const QList<QPair<QString, QString>>& extra_env = {}) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  QStringList args{"-n", QString::number(ranks), "--oversubscribe", "--bind-to", "none"};
  for (const auto& [name, value] : extra_env) {
    env.insert(name, value);
    args << "-x" << name;
  }
  env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
  env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  env.insert("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
  p.setProcessEnvironment(env);
  p.start(LOOM_MPIEXEC, args << LOOM_RANK << plan_path << "--dump-params" << params_path);
  if (!p.waitForFinished(240000)) p.kill();
  p.waitForFinished();
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardError())};
}

inline QString write_plan(const QTemporaryDir& dir, const Plan& plan, const QString& name) {
  QFile f(dir.filePath(name));
  f.open(QIODevice::WriteOnly);
  f.write(QByteArray::fromStdString(plan_to_json(plan)));
  return f.fileName();
}

// Rank 0's parameters after running `plan` on world_size(plan) real ranks, or what failed.
struct DumpedParams {
  std::vector<engine::NamedTensor> params;
  QString error;
};

inline DumpedParams params_under_mpirun(const QTemporaryDir& dir, const Plan& plan, const QString& tag,
                                        const QList<QPair<QString, QString>>& extra_env = {}) {
  const QString plan_path = write_plan(dir, plan, tag + ".json");
  const QString params_path = dir.filePath(tag + ".params");
  const RankRun run = mpirun(world_size(plan), plan_path, params_path, extra_env);
  if (run.exit_code != 0) return {{}, run.err};
  auto params = engine::load_params(params_path.toStdString());
  if (!params.ok()) return {{}, QString::fromStdString(params.error().describe())};
  return {*params, {}};
}

// Runs `plan` on world_size(plan) real ranks and compares rank 0's dumped parameters
// with `reference`; reports through QVERIFY in the calling test.
inline void expect_same_params_under_mpirun(const QTemporaryDir& dir, const Plan& plan, const QString& tag,
                                            const std::vector<engine::NamedTensor>& reference,
                                            const QList<QPair<QString, QString>>& extra_env = {},
                                            double tolerance = 1e-5) {
  const DumpedParams dumped = params_under_mpirun(dir, plan, tag, extra_env);
  QVERIFY2(dumped.error.isEmpty(), qPrintable(dumped.error));
  const auto& params = dumped.params;
  QCOMPARE(params.size(), reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i) {
    QCOMPARE(params[i].name, reference[i].name);
    const double diff = engine::relative_difference(reference[i].values, params[i].values);
    QVERIFY2(diff <= tolerance, qPrintable(QString("%1 differs by %2").arg(reference[i].name.c_str()).arg(diff)));
  }
}

// Runs `plan` on real ranks and judges rank 0's parameters against the float64
// reference: within kMultiple * max(the CPU's error, kFloor, spread), where `cpu` is the
// plan's float32 single process on the CPU (float64_reference.h).
inline void expect_within_float64_bound(const QTemporaryDir& dir, const Plan& plan, const QString& tag,
                                        const TrainedRun& reference, const TrainedRun& cpu, double spread) {
  QVERIFY2(reference.error.empty() && cpu.error.empty(), (reference.error + cpu.error).c_str());
  const DumpedParams dumped = params_under_mpirun(dir, plan, tag);
  QVERIFY2(dumped.error.isEmpty(), qPrintable(dumped.error));
  const Deviation of_cpu = deviation(reference, cpu.params), of_run = deviation(reference, dumped.params);
  qInfo("error against float64: cpu single process %s; these ranks %s; bound %.3g",
        describe(reference, of_cpu).c_str(), describe(reference, of_run).c_str(),
        bound_for(of_cpu.worst_param(), spread));
  const std::string outside = outside_bound(reference, of_run, of_cpu, spread);
  QVERIFY2(outside.empty(), outside.c_str());
}

}  // namespace loom::testing
