// The asynchronous modes reduce to synchronous training where theory says they must, under
// real mpiexec with loom-rank: SSP with bound 0 (each worker waits until every gradient of
// the previous clock is applied) and local SGD with period 1 (average after every step)
// end with the same parameters after 20 steps as one process with the same seed and global
// batch, within the data-parallel tolerance (1e-5 relative per tensor).
// SSP uses plain SGD: a server applies each worker's gradient as its own step, which adds
// up to the synchronous step only for an optimizer that is linear in the gradient without
// state (momentum would feed the first worker's gradient into the second's step).
// Local SGD averages parameters, not momentum buffers; the mean of the replicas' buffers
// evolves like the synchronous one, so momentum is used there.
#include "rank_equivalence.h"

using namespace loom;
using namespace loom::testing;

namespace {

Plan base_plan(OptimizerKind optimizer) { return small_mlp_plan("async-equivalence", optimizer); }

Plan with_mode(Plan plan, SyncMode mode, int workers, int servers) {
  plan.parallel.data_parallel = workers;
  plan.parallel.sync.mode = mode;
  plan.parallel.sync.servers = servers;
  plan.parallel.devices.assign(std::size_t(world_size(plan)), DeviceSpec{});
  return plan;
}

}  // namespace

class AsyncEquivalence : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;

 private slots:
  void sspBoundZeroIsSynchronous_data() {
    QTest::addColumn<int>("workers");
    QTest::addColumn<int>("servers");
    QTest::newRow("2 workers, 1 server") << 2 << 1;
    QTest::newRow("2 workers, 2 servers (sharded)") << 2 << 2;
  }
  void sspBoundZeroIsSynchronous() {
    QFETCH(int, workers);
    QFETCH(int, servers);
    const Plan base = base_plan(OptimizerKind::Sgd);
    Plan plan = with_mode(base, SyncMode::Ssp, workers, servers);
    plan.parallel.sync.bound = 0;
    expect_same_params_under_mpirun(dir_, plan, QString("ssp0-w%1-s%2").arg(workers).arg(servers),
                                    single_process_params(base));
  }

  void localSgdPeriodOneIsSynchronous() {
    const Plan base = base_plan(OptimizerKind::Momentum);
    Plan plan = with_mode(base, SyncMode::LocalSgd, 2, 1);
    plan.parallel.sync.period = 1;
    expect_same_params_under_mpirun(dir_, plan, "local-h1", single_process_params(base));
  }

  // Not vacuous: local SGD that averages only every 5 steps drifts from synchronous
  // training, as it should.
  void localSgdLongerPeriodDiffers() {
    const Plan base = base_plan(OptimizerKind::Momentum);
    Plan plan = with_mode(base, SyncMode::LocalSgd, 2, 1);
    plan.parallel.sync.period = 5;
    const QString plan_path = write_plan(dir_, plan, "local-h5.json");
    const QString params_path = dir_.filePath("local-h5.params");
    const RankRun run = mpirun(world_size(plan), plan_path, params_path);
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    auto params = engine::load_params(params_path.toStdString());
    QVERIFY(params.ok());
    const auto reference = single_process_params(base);
    QVERIFY(engine::relative_difference(reference[0].values, (*params)[0].values) > 1e-4);
  }
};

QTEST_GUILESS_MAIN(AsyncEquivalence)
#include "test_async_equivalence.moc"
