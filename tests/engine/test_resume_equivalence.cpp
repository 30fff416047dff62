// Checkpoint and resume under real mpiexec: a 2-rank data-parallel run saves checkpoints
// at steps 8 and 16 (LOOM_CHECKPOINT_DIR); resumed from step 8 (LOOM_RESUME_FROM) on 2,
// 1 and 4 ranks with the same global batch, it ends after 20 steps with the parameters
// one uninterrupted process reaches, within 1e-5 per tensor (rank_equivalence.h). The
// same check for a 2-stage pipeline resumed on 2 ranks, and for SSP with bound 0 (its
// servers save their shards); a parameter-server run with Adam resumes and finishes. A checkpoint of another run is
// continued from (the result differs), a damaged one refused. Ranks as threads:
// test_checkpoint.
#include <QDir>

#include "rank_equivalence.h"

using namespace loom;
using namespace loom::testing;

namespace {

Plan data_parallel(Plan plan, int ranks) {
  plan.parallel.data_parallel = ranks;
  plan.parallel.devices.assign(std::size_t(ranks), DeviceSpec{});
  return plan;
}

Plan two_stages(Plan plan) {
  plan.parallel.stages = 2;
  plan.parallel.microbatches = 2;
  plan.parallel.devices.assign(2, DeviceSpec{});
  plan.model.layers[2].stage = 1;  // relu and the output layer on stage 1
  plan.model.layers[3].stage = 1;
  return plan;
}

Plan asynchronous(Plan plan, SyncMode mode, int servers) {
  plan.parallel.data_parallel = 2;
  plan.parallel.sync.mode = mode;
  plan.parallel.sync.servers = servers;
  plan.parallel.devices.assign(std::size_t(world_size(plan)), DeviceSpec{});
  return plan;
}

using Env = QList<QPair<QString, QString>>;

}  // namespace

class ResumeEquivalence : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;

  // The interrupted run: `plan` on its ranks, checkpoints every 8 of its 20 steps.
  QString saveCheckpoints(Plan plan, const QString& tag) {
    plan.training.checkpoint_every = 8;
    const QString checkpoints = dir_.filePath(tag + "-checkpoints");
    const RankRun run = mpirun(world_size(plan), write_plan(dir_, plan, tag + ".json"),
                               dir_.filePath(tag + "-full.params"), Env{{"LOOM_CHECKPOINT_DIR", checkpoints}});
    if (run.exit_code != 0) qWarning("%s", qPrintable(run.err));
    return checkpoints;
  }

 private slots:
  void dataParallelResumesOnAnyRankCount_data() {
    QTest::addColumn<int>("ranks");
    QTest::newRow("2 ranks, as saved") << 2;
    QTest::newRow("1 rank") << 1;
    QTest::newRow("4 ranks") << 4;
  }
  void dataParallelResumesOnAnyRankCount() {
    QFETCH(int, ranks);
    const Plan plan = small_mlp_plan("resume-dp", OptimizerKind::Momentum);
    const QString checkpoints = saveCheckpoints(data_parallel(plan, 2), QString("dp-saved-for-%1").arg(ranks));
    const QString step8 = QString::fromStdString(engine::checkpoint_step_dir(checkpoints.toStdString(), 8));
    QVERIFY2(QFileInfo::exists(step8 + "/rank-1.ckpt"), qPrintable(QDir(checkpoints).entryList().join(", ")));
    expect_same_params_under_mpirun(dir_, data_parallel(plan, ranks), QString("dp-resumed-on-%1").arg(ranks),
                                    single_process_params(plan), Env{{"LOOM_RESUME_FROM", step8}});
  }

  void pipelineResumes() {
    const Plan plan = two_stages(small_mlp_plan("resume-pipeline", OptimizerKind::Momentum));
    const QString checkpoints = saveCheckpoints(plan, "pipeline-saved");
    const QString step16 = QString::fromStdString(engine::checkpoint_step_dir(checkpoints.toStdString(), 16));
    expect_same_params_under_mpirun(dir_, plan, "pipeline-resumed", single_process_params(plan),
                                    Env{{"LOOM_RESUME_FROM", step16}});
  }

  // SSP with bound 0 is synchronous SGD (test_async_equivalence): the servers save their
  // shards when the slowest worker's clock reaches 8, the workers their step; resumed
  // from there it ends where one uninterrupted process does.
  void sspBoundZeroResumes_data() {
    QTest::addColumn<int>("servers");
    QTest::newRow("1 server") << 1;
    QTest::newRow("2 servers (sharded)") << 2;
  }
  void sspBoundZeroResumes() {
    QFETCH(int, servers);
    const Plan sgd = small_mlp_plan("resume-ssp", OptimizerKind::Sgd);
    const Plan plan = asynchronous(sgd, SyncMode::Ssp, servers);
    const QString checkpoints = saveCheckpoints(plan, QString("ssp-s%1").arg(servers));
    const QString step8 = QString::fromStdString(engine::checkpoint_step_dir(checkpoints.toStdString(), 8));
    QVERIFY2(QDir(step8).entryList({"rank-*.ckpt"}).size() == 2 + servers, qPrintable(QDir(step8).entryList().join(", ")));
    expect_same_params_under_mpirun(dir_, plan, QString("ssp-resumed-s%1").arg(servers), single_process_params(sgd),
                                    Env{{"LOOM_RESUME_FROM", step8}});
  }

  // A parameter-server run with Adam (the servers' moment estimates saved with the
  // shards) resumes from its newest complete checkpoint and finishes; a server whose
  // file is damaged refuses to start.
  void parameterServerResumes() {
    const Plan plan = asynchronous(small_mlp_plan("resume-ps", OptimizerKind::Adam), SyncMode::ParameterServer, 1);
    const QString checkpoints = saveCheckpoints(plan, "ps");
    auto newest = engine::latest_checkpoint(checkpoints.toStdString());
    QVERIFY2(newest.ok(), qPrintable(QDir(checkpoints).entryList().join(", ")));
    const QString step_dir = QString::fromStdString(*newest);
    const RankRun resumed = mpirun(3, write_plan(dir_, plan, "ps-resume.json"), dir_.filePath("ps-resumed.params"),
                                   Env{{"LOOM_RESUME_FROM", step_dir}});
    QVERIFY2(resumed.exit_code == 0, qPrintable(resumed.err));
    auto server = engine::load_checkpoint(engine::checkpoint_file(newest->c_str(), 2));
    QVERIFY(server.ok());
    QVERIFY(std::any_of(server->tensors.begin(), server->tensors.end(),
                        [](const engine::NamedTensor& t) { return t.name.find("#v") != std::string::npos; }));
    QFile f(step_dir + "/rank-2.ckpt");
    QVERIFY(f.open(QIODevice::ReadWrite) && f.resize(f.size() / 2));
    f.close();
    const RankRun damaged = mpirun(3, write_plan(dir_, plan, "ps-damaged.json"), dir_.filePath("ps-damaged.params"),
                                   Env{{"LOOM_RESUME_FROM", step_dir}});
    QVERIFY(damaged.exit_code != 0);
    QVERIFY2(damaged.err.contains("cannot resume"), qPrintable(damaged.err));
  }

  // What the checkpoint holds is what training continues from: resumed from one saved by
  // a run with 4x the learning rate, the ranks end far from the uninterrupted run (a rank
  // that ignored LOOM_RESUME_FROM would train from scratch and match it).
  void checkpointContentsAreUsed() {
    const Plan plan = data_parallel(small_mlp_plan("resume-contents", OptimizerKind::Momentum), 2);
    Plan faster = plan;
    faster.training.optimizer.lr = 0.2;
    const QString checkpoints = saveCheckpoints(faster, "contents");
    const QString step8 = QString::fromStdString(engine::checkpoint_step_dir(checkpoints.toStdString(), 8));
    const RankRun run = mpirun(2, write_plan(dir_, plan, "contents-resume.json"), dir_.filePath("contents.params"),
                               Env{{"LOOM_RESUME_FROM", step8}});
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    auto params = engine::load_params(dir_.filePath("contents.params").toStdString());
    QVERIFY(params.ok());
    const auto reference = single_process_params(plan);
    double largest = 0;
    for (std::size_t i = 0; i < reference.size(); ++i)
      largest = std::max(largest, engine::relative_difference(reference[i].values, (*params)[i].values));
    QVERIFY2(largest > 1e-3, qPrintable(QString("largest difference %1").arg(largest)));
  }

  // The checkpoint matters: resumed from it with its files damaged, the ranks refuse.
  void damagedCheckpointIsRefused() {
    const Plan plan = data_parallel(small_mlp_plan("resume-damaged", OptimizerKind::Momentum), 2);
    const QString checkpoints = saveCheckpoints(plan, "damaged");
    const QString step8 = QString::fromStdString(engine::checkpoint_step_dir(checkpoints.toStdString(), 8));
    for (const QString& file : QDir(step8).entryList({"*.ckpt"})) {
      QFile f(step8 + "/" + file);
      QVERIFY(f.open(QIODevice::ReadWrite));
      QVERIFY(f.resize(f.size() / 2));
    }
    const RankRun run = mpirun(2, write_plan(dir_, plan, "damaged-resume.json"), dir_.filePath("damaged.params"),
                               Env{{"LOOM_RESUME_FROM", step8}});
    QVERIFY(run.exit_code != 0);
    QVERIFY2(run.err.contains("cannot resume"), qPrintable(run.err));
  }
};

QTEST_GUILESS_MAIN(ResumeEquivalence)
#include "test_resume_equivalence.moc"
