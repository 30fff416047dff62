// Synchronous data parallelism is proven by equivalence: the same plan on 1, 2 and 4 real
// MPI ranks (mpiexec, 4 oversubscribed on this 2-core machine) ends with the same
// parameters after 20 steps as one process with the same seed and global batch, within
// 1e-5 relative difference per tensor (max |a-b| / max |a|; the only difference is the
// order of float summation in the all-reduce). SGD with momentum is used because Adam
// divides by sqrt(v), which turns round-off in near-zero gradients into O(lr) steps.
#include "rank_equivalence.h"

using namespace loom;
using namespace loom::testing;

namespace {

Plan base_plan() {
  Plan plan = small_mlp_plan("dp-equivalence", OptimizerKind::Momentum);
  plan.parallel.bucket_mb = 0.05;  // several buckets, so bucketing and overlap are exercised
  return plan;
}

Plan with_ranks(Plan plan, int ranks, int accumulation) {
  plan.parallel.data_parallel = ranks;
  plan.parallel.grad_accumulation = accumulation;
  plan.parallel.devices.assign(std::size_t(ranks), DeviceSpec{});
  return plan;
}

}  // namespace

class DataParallelEquivalence : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  std::vector<engine::NamedTensor> reference_;

 private slots:
  void initTestCase() { reference_ = single_process_params(base_plan()); }

  void sameParametersAsOneProcess_data() {
    QTest::addColumn<int>("ranks");
    QTest::addColumn<int>("accumulation");
    QTest::addColumn<double>("bucket_mb");
    QTest::newRow("1 rank") << 1 << 1 << 0.05;
    QTest::newRow("2 ranks") << 2 << 1 << 0.05;
    QTest::newRow("4 ranks") << 4 << 1 << 0.05;
    QTest::newRow("2 ranks x 2 accumulation steps") << 2 << 2 << 0.05;
    // One 50,890-float bucket: above 64 KiB the MPI communicator's own ring (2 ranks) and
    // recursive doubling (4 ranks) reduce it, not Open MPI's collective.
    QTest::newRow("2 ranks, one large bucket") << 2 << 1 << 25.0;
    QTest::newRow("4 ranks, one large bucket") << 4 << 1 << 25.0;
  }

  void sameParametersAsOneProcess() {
    QFETCH(int, ranks);
    QFETCH(int, accumulation);
    QFETCH(double, bucket_mb);
    const QString tag = QString("r%1a%2b%3").arg(ranks).arg(accumulation).arg(bucket_mb);
    Plan plan = with_ranks(base_plan(), ranks, accumulation);
    plan.parallel.bucket_mb = bucket_mb;
    expect_same_params_under_mpirun(dir_, plan, tag, reference_);
  }

  // The comparison is not vacuous: a different global batch gives different parameters.
  void differentBatchDiffers() {
    Plan other = base_plan();
    other.training.batch = 32;
    const auto params = single_process_params(other);
    QVERIFY(engine::relative_difference(reference_[0].values, params[0].values) > 1e-3);
  }

  void worldSizeMismatchIsReported() {
    const QString plan = write_plan(dir_, with_ranks(base_plan(), 4, 1), "needs4.json");
    const RankRun run = mpirun(2, plan, dir_.filePath("never.params"));
    QVERIFY(run.exit_code != 0);
    QVERIFY2(run.err.contains("needs 4"), qPrintable(run.err));
  }
};

QTEST_GUILESS_MAIN(DataParallelEquivalence)
#include "test_dp_equivalence.moc"
