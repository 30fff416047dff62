// Loom's Slurm path for real: a one-node Slurm cluster on this machine
// (scripts/cluster/slurm-single-node.sh: munged, slurmctld, slurmd from Debian's
// packages), loom-cli run inside `salloc -n 2`, which makes Loom launch the ranks with
// `srun --mpi=pmix` instead of mpirun. Skipped where Slurm is not installed, not root, or
// the cluster does not come up. What differs from a real cluster: one node (the ranks share
// it and Loom can still see their processes), no cgroups (proctrack/linuxproc,
// task/none), SlurmUser root, and no accounting.
#include <unistd.h>

#include <QElapsedTimer>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>

#include "loom/store/run_store.h"

namespace {

const QString kScript = QStringLiteral(LOOM_SOURCE_DIR "/scripts/cluster/slurm-single-node.sh");

QByteArray plan(int steps) {
  return QString(R"({
    "format": "loom-plan/1", "name": "slurm-two-ranks",
    "model": {"input": [1, 28, 28], "layers": [{"type": "flatten"}, {"type": "linear", "out": 64},
              {"type": "relu"}, {"type": "linear", "out": 10}]},
    "data": {"source": "fashion-mnist", "path": "/usr/share/datasets/fashion-mnist", "train_limit": 6400, "test_limit": 500},
    "training": {"batch": 64, "steps": %1, "threads": 1, "optimizer": {"type": "sgd", "lr": 0.05}},
    "parallel": {"devices": [{"kind": "cpu"}, {"kind": "cpu"}], "data_parallel": 2}
  })").arg(steps).toUtf8();
}

// A loom-rank process (not a pid reused since) that has not ended.
bool rank_alive(qint64 pid) {
  QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
  QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
  if (!cmdline.open(QIODevice::ReadOnly) || !stat.open(QIODevice::ReadOnly)) return false;
  if (!cmdline.readAll().contains("loom-rank")) return false;
  const QByteArray text = stat.readAll();
  const int close = text.lastIndexOf(')');
  return close > 0 && text.size() > close + 2 && text[close + 2] != 'Z';
}

// Until Slurm has let go of the job (it lists a finished job as completing, CG, for a few
// seconds while slurmstepd cleans up); false if it still lists it after 30 s.
bool job_gone(const QString& name) {
  QElapsedTimer waited;
  waited.start();
  while (waited.elapsed() < 30000) {
    QProcess squeue;
    squeue.start("squeue", {"-h", "-n", name});
    if (squeue.waitForFinished(10000) && squeue.exitCode() == 0 && squeue.readAllStandardOutput().trimmed().isEmpty())
      return true;
    QTest::qWait(250);
  }
  return false;
}

}  // namespace

class TestClusterSlurm : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  bool started_here_ = false;

  QString write_plan(const QString& name, const QByteArray& text) {
    QFile f(dir_.filePath(name));
    f.open(QIODevice::WriteOnly);
    f.write(text);
    return f.fileName();
  }

  // loom-cli as a user runs it: inside an allocation of two tasks, named so that the test
  // can find (and scancel) it.
  void start_in_allocation(QProcess& salloc, const QString& job, const QString& plan_path, const QString& db) {
    salloc.start("salloc", {"-N1", "-n2", "-J", job, "--time=10", LOOM_CLI, "run", plan_path, "--db", db, "--json"});
    QVERIFY(salloc.waitForStarted());
  }

  // Until both ranks have stored events; the run's id and its ranks' pids.
  std::pair<std::int64_t, std::vector<qint64>> wait_for_training(const QString& db) {
    QElapsedTimer waited;
    waited.start();
    while (waited.elapsed() < 60000) {
      QTest::qWait(250);
      auto store = loom::store::RunStore::open(db.toStdString());
      if (!store.ok()) continue;
      auto runs = store->list_runs();
      if (!runs.ok() || runs->empty()) continue;
      const std::int64_t id = runs->front().id;
      const auto first = store->count_events(id, 0), second = store->count_events(id, 1);
      auto ranks = store->load_ranks(id);
      if (!first.ok() || !second.ok() || *first == 0 || *second == 0 || !ranks.ok() || ranks->size() != 2) continue;
      return {id, {(*ranks)[0].pid, (*ranks)[1].pid}};
    }
    return {0, {}};
  }

 private slots:
  void initTestCase() {
    if (::geteuid() != 0) QSKIP("the one-node Slurm cluster runs its daemons as root");
    for (const char* tool : {"munged", "slurmctld", "slurmd", "salloc", "srun", "sinfo"})
      if (QStandardPaths::findExecutable(tool).isEmpty())
        QSKIP(qPrintable(QString("%1 is not installed (apt-get install slurm-wlm munge)").arg(tool)));
    if (QProcess::execute(kScript, {"status"}) == 0) return;  // up already: use it, leave it up
    started_here_ = true;
    if (QProcess::execute(kScript, {"start"}) != 0) {
      QProcess::execute(kScript, {"stop"});
      started_here_ = false;
      QSKIP("the one-node Slurm cluster did not come up (scripts/cluster/slurm-single-node.sh; its logs are in "
            "/var/tmp/loom-slurm)");
    }
  }

  void cleanupTestCase() {
    if (started_here_) QCOMPARE(QProcess::execute(kScript, {"stop"}), 0);
  }

  // Both ranks start through srun inside the allocation, stream to loom-cli and finish.
  void runCompletesThroughSrun() {
    const QString db = dir_.filePath("completes.db");
    QProcess salloc;
    start_in_allocation(salloc, "loom-test-completes", write_plan("completes.json", plan(60)), db);
    QVERIFY(salloc.waitForFinished(120000));
    const QString out = QString::fromUtf8(salloc.readAllStandardOutput());
    QVERIFY2(salloc.exitCode() == 0, qPrintable(QString::fromUtf8(salloc.readAllStandardError()) + out));
    const QJsonObject summary = QJsonDocument::fromJson(out.trimmed().split('\n').last().toUtf8()).object();
    QCOMPARE(summary["status"].toString(), QString("completed"));
    auto store = loom::store::RunStore::open(db.toStdString());
    QVERIFY(store.ok());
    const auto run = store->load_run(summary["id"].toInteger());
    QVERIFY(run.ok());
    QVERIFY2(run->log.find(" srun --mpi=pmix -n 2 ") != std::string::npos, run->log.c_str());
    QVERIFY2(run->log.find("rank 1 finished: completed") != std::string::npos, run->log.c_str());
  }

  // A rank SIGKILLed mid-run: the run is stored as failed naming it at once, loom-cli
  // exits 1 within 10 s, and no rank outlives the job. (Without the host's two SIGINTs to
  // srun it took ~20 s: srun SIGTERMs the surviving rank, which takes it as a stop request
  // it cannot finish without its peer, and Slurm SIGKILLs only after KillWait, 30 s.)
  void killedRankFailsTheRun() {
    const QString db = dir_.filePath("killed.db");
    QProcess salloc;
    start_in_allocation(salloc, "loom-test-killed", write_plan("killed.json", plan(1000000)), db);
    const auto [id, pids] = wait_for_training(db);
    QVERIFY2(id > 0, "the ranks did not start training within 60 s");
    QCOMPARE(::kill(pid_t(pids[1]), SIGKILL), 0);
    QElapsedTimer since;
    since.start();
    auto store = loom::store::RunStore::open(db.toStdString());
    QVERIFY(store.ok());
    auto run = store->load_run(id);
    while (since.elapsed() < 5000 && (!run.ok() || run->status != loom::trace::RunStatus::Failed)) {
      QTest::qWait(100);
      run = store->load_run(id);
    }
    QVERIFY(run.ok());
    QCOMPARE(run->status, loom::trace::RunStatus::Failed);
    QVERIFY2(run->error.find("rank 1 died") != std::string::npos, run->error.c_str());
    qInfo("stored as failed %.1f s after the kill", since.elapsed() / 1000.0);
    QVERIFY(salloc.waitForFinished(90000));
    const double ended_s = since.elapsed() / 1000.0;
    qInfo("loom-cli ended %.1f s after the kill", ended_s);
    QVERIFY2(ended_s < 10, qPrintable(QString("the job ended %1 s after the kill").arg(ended_s)));
    QCOMPARE(salloc.exitCode(), 1);
    QTest::qWait(1000);
    QVERIFY2(!rank_alive(pids[0]), "the surviving rank outlived the job");
    QVERIFY2(!rank_alive(pids[1]), "the killed rank is still there");
    QVERIFY(job_gone("loom-test-killed"));
  }

  // scancel (as a time limit or a revoked allocation) SIGTERMs the ranks: they stop at an
  // agreed step and the run is stored as stopped, not as completed.
  void scancelStoresAStoppedRun() {
    const QString db = dir_.filePath("scancel.db");
    QProcess salloc;
    start_in_allocation(salloc, "loom-test-scancel", write_plan("scancel.json", plan(1000000)), db);
    const auto [id, pids] = wait_for_training(db);
    QVERIFY2(id > 0, "the ranks did not start training within 60 s");
    QCOMPARE(QProcess::execute("scancel", {"-n", "loom-test-scancel"}), 0);
    QVERIFY(salloc.waitForFinished(60000));
    QCOMPARE(salloc.exitCode(), 130);  // loom-cli's "stopped", passed on by salloc
    auto store = loom::store::RunStore::open(db.toStdString());
    QVERIFY(store.ok());
    const auto run = store->load_run(id);
    QVERIFY(run.ok());
    QVERIFY2(run->status == loom::trace::RunStatus::Stopped, qPrintable(QString::fromStdString(std::string(loom::trace::to_text(run->status)) + ": " + run->log)));
    QTest::qWait(1000);
    QVERIFY(!rank_alive(pids[0]) && !rank_alive(pids[1]));
    QVERIFY(job_gone("loom-test-scancel"));
  }
};

QTEST_GUILESS_MAIN(TestClusterSlurm)
#include "test_cluster_slurm.moc"
