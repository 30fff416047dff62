// loom-cli when things around a run go wrong, with real mpirun jobs: the host side
// (loom-cli) killed outright mid-run must leave no rank or mpirun behind, and the run must
// read as interrupted, with what it recorded kept, instead of "running" forever; a rank
// stopped mid-run must get the run stored as hung and the job torn down; a run whose rank
// was killed resumes from its checkpoint on another rank count.
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QDateTime>
#include <QtTest>

#include <set>

#include "cli_runner.h"

namespace {

using loom::test::Result;
using loom::test::run_cli;

// A plan on Fashion-MNIST, long enough to be killed or stopped mid-training, with the
// given parallel section; `hang_timeout_s` 0 is the automatic limit.
QByteArray reliability_plan(const char* name, double hang_timeout_s, const char* parallel) {
  return QString(R"({
    "format": "loom-plan/1", "name": "%2",
    "model": {"input": [1, 28, 28], "layers": [{"type": "flatten"}, {"type": "linear", "out": 64},
              {"type": "relu"}, {"type": "linear", "out": 10}]},
    "data": {"source": "fashion-mnist", "path": "/usr/share/datasets/fashion-mnist", "train_limit": 6400, "test_limit": 500},
    "training": {"batch": 64, "steps": 1000000, "threads": 1, "hang_timeout_s": %1,
                 "optimizer": {"type": "sgd", "lr": 0.05}},
    "parallel": %3
  })")
      .arg(hang_timeout_s)
      .arg(QString::fromLatin1(name), QString::fromLatin1(parallel))
      .toUtf8();
}

// Two data-parallel ranks.
QByteArray long_plan(double hang_timeout_s = 0) {
  return reliability_plan("cli-reliability", hang_timeout_s,
                          R"({"devices": [{"kind": "cpu", "host": "localhost"}, {"kind": "cpu", "host": "localhost"}],
                 "data_parallel": 2})");
}

// The parameter-server example's shape: workers 0 and 1, server rank 2 (core/plan.h
// rank_role).
QByteArray ps_plan(double hang_timeout_s) {
  return reliability_plan("cli-reliability-ps", hang_timeout_s,
                          R"({"devices": [{"kind": "cpu", "host": "localhost"}, {"kind": "cpu", "host": "localhost"},
                             {"kind": "cpu", "host": "localhost"}],
                 "data_parallel": 2, "sync": {"mode": "parameter_server", "servers": 1}})");
}

// The MPI rank of a rank process, from the environment mpirun gave it; -1 if unknown.
int mpi_rank_of(qint64 pid) {
  QFile f(QStringLiteral("/proc/%1/environ").arg(pid));
  if (!f.open(QIODevice::ReadOnly)) return -1;
  for (const QByteArray& entry : f.readAll().split('\0'))
    if (entry.startsWith("OMPI_COMM_WORLD_RANK=")) return entry.mid(21).toInt();
  return -1;
}

// A process's parent and state from /proc/PID/stat; false when it is gone.
bool read_stat(qint64 pid, qint64& parent, char& state) {
  QFile f(QStringLiteral("/proc/%1/stat").arg(pid));
  if (!f.open(QIODevice::ReadOnly)) return false;
  const QByteArray text = f.readAll();
  const int close = text.lastIndexOf(')');  // the name may hold spaces and parentheses
  if (close < 0) return false;
  const QList<QByteArray> fields = text.mid(close + 2).split(' ');
  if (fields.size() < 2) return false;
  state = fields[0].isEmpty() ? '?' : fields[0][0];
  parent = fields[1].toLongLong();
  return true;
}

// Every live (not zombie) process below `root`, root excluded.
std::set<qint64> descendants(qint64 root) {
  std::map<qint64, qint64> parent_of;
  for (const QString& name : QDir("/proc").entryList(QDir::Dirs)) {
    bool number = false;
    const qint64 pid = name.toLongLong(&number);
    qint64 parent = 0;
    char state = '?';
    if (number && read_stat(pid, parent, state) && state != 'Z') parent_of[pid] = parent;
  }
  std::set<qint64> found{root};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [pid, parent] : parent_of)
      if (found.count(parent) && found.insert(pid).second) grew = true;
  }
  found.erase(root);
  return found;
}

// CPU seconds a process has used (user + system, /proc/PID/stat fields 14 and 15).
double cpu_seconds(qint64 pid) {
  QFile f(QStringLiteral("/proc/%1/stat").arg(pid));
  if (!f.open(QIODevice::ReadOnly)) return -1;
  const QByteArray text = f.readAll();
  const QList<QByteArray> fields = text.mid(text.lastIndexOf(')') + 2).split(' ');
  if (fields.size() < 13) return -1;
  return double(fields[11].toLongLong() + fields[12].toLongLong()) / double(sysconf(_SC_CLK_TCK));
}

bool alive(qint64 pid) {
  qint64 parent = 0;
  char state = '?';
  return read_stat(pid, parent, state) && state != 'Z';
}

QString command_of(qint64 pid) {
  QFile f(QStringLiteral("/proc/%1/cmdline").arg(pid));
  return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll().replace('\0', ' ')) : QString();
}

}  // namespace

class CliReliabilityTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString db_name_;  // one store per test: "the newest run" is then the test's own
  QString db() const { return dir_.filePath(db_name_); }

  QJsonObject only_run() {
    const Result runs = run_cli({"runs", "--db", db(), "--json"});
    const QJsonArray list = QJsonDocument::fromJson(runs.out.toUtf8()).array();
    return list.isEmpty() ? QJsonObject() : list.first().toObject();
  }

  // Events stored for the run, over its ranks (`show --json`).
  qint64 events_stored(qint64 run_id) {
    const Result shown = run_cli({"show", QString::number(run_id), "--db", db(), "--json"});
    qint64 total = 0;
    for (const auto& v : loom::test::last_json_line(shown.out)["ranks"].toArray())
      total += v.toObject()["events_stored"].toInteger();
    return total;
  }

  // Whether every rank of the run has stored training compute (`show --json`): setup's
  // events (clock and bandwidth probes) are not enough, since a plan's hang limit applies
  // from the first step and setup has 120 s.
  bool every_rank_trains(qint64 run_id, int workers) {
    const Result shown = run_cli({"show", QString::number(run_id), "--db", db(), "--json"});
    const QJsonArray ranks = loom::test::last_json_line(shown.out)["ranks"].toArray();
    int training = 0;
    for (const auto& v : ranks) training += v.toObject()["compute_s"].toDouble() > 0;
    return training >= workers;
  }

  // Starts `loom-cli run` on a long plan and waits until both ranks train (each has
  // stored compute spans); returns the job's processes below loom-cli (mpirun and the ranks).
  // `ranks` processes, of which `workers` compute (a parameter server does not).
  std::set<qint64> start_training(QProcess& cli, const QByteArray& plan_json, std::size_t ranks = 2, int workers = 2) {
    QFile plan(dir_.filePath("long.json"));
    if (!plan.open(QIODevice::WriteOnly)) return {};
    plan.write(plan_json);
    plan.close();
    cli.start(LOOM_CLI, {"run", plan.fileName(), "--db", db()});
    if (!cli.waitForStarted()) return {};
    QElapsedTimer waited;
    waited.start();
    while (waited.elapsed() < 60000) {
      QTest::qWait(500);
      const std::set<qint64> job = descendants(cli.processId());
      if (rank_pids(job).size() == ranks && !only_run().isEmpty() &&
          every_rank_trains(only_run()["id"].toInteger(), workers))
        return job;
      if (cli.state() == QProcess::NotRunning) break;
    }
    qWarning("the run never had both ranks training; loom-cli said:\n%s\nthe store says: %s",
             cli.readAllStandardError().constData(), QJsonDocument(only_run()).toJson().constData());
    return {};
  }

  static std::vector<qint64> rank_pids(const std::set<qint64>& job) {
    std::vector<qint64> ranks;
    for (qint64 pid : job)
      if (command_of(pid).section(' ', 0, 0).endsWith("loom-rank")) ranks.push_back(pid);
    return ranks;
  }

  // Fails with the survivors' command lines unless every process of `job` ends within 10 s.
  static void expect_gone_within_10s(std::set<qint64> left) {
    QElapsedTimer waited;
    waited.start();
    while (!left.empty() && waited.elapsed() < 10000) {
      QTest::qWait(200);
      for (auto it = left.begin(); it != left.end();) it = alive(*it) ? std::next(it) : left.erase(it);
    }
    QString survivors;
    for (qint64 pid : left) {
      survivors += QString::number(pid) + ": " + command_of(pid) + "\n";
      ::kill(pid_t(pid), SIGKILL);  // leave nothing behind for the next test
    }
    QVERIFY2(left.empty(), qPrintable("alive 10 s after:\n" + survivors));
  }

 private slots:
  // SIGKILL to loom-cli while its two ranks train: mpirun gets its parent-death signal and
  // takes the ranks down; nothing of the job may be alive 10 s later. The next reader of
  // the store finds the owner gone and marks the run interrupted, its events kept.
  void killedHostLeavesNoOrphansAndRunIsInterrupted() {
    db_name_ = "killed-host.db";
    QProcess cli;
    const std::set<qint64> job = start_training(cli, long_plan(0));
    QCOMPARE(rank_pids(job).size(), std::size_t(2));
    QCOMPARE(only_run()["status"].toString(), QString("running"));  // the owner is alive
    ::kill(pid_t(cli.processId()), SIGKILL);
    QVERIFY(cli.waitForFinished(5000));
    expect_gone_within_10s(job);
    const QJsonObject run = only_run();
    QCOMPARE(run["status"].toString(), QString("interrupted"));
    QVERIFY2(run["error"].toString().contains("ended without finishing it"), qPrintable(run["error"].toString()));
    QVERIFY(events_stored(run["id"].toInteger()) > 0);
  }

  // SIGSTOP to one rank: its peer blocks in the all-reduce, nothing new arrives, and
  // within the plan's 3 s limit (plus a tick) the host stores the run as hung, naming the
  // stopped rank, and ends the job: loom-cli exits 1 and no process of it is left.
  void stoppedRankIsHungAndTornDown() {
    db_name_ = "stopped-rank.db";
    QProcess cli;
    const std::set<qint64> job = start_training(cli, long_plan(3));
    const std::vector<qint64> ranks = rank_pids(job);
    QCOMPARE(ranks.size(), std::size_t(2));
    ::kill(pid_t(ranks[1]), SIGSTOP);
    QElapsedTimer detected;
    detected.start();
    // The peer waits for the stopped rank without spinning (test_comm_mpi: waits_do_not_spin).
    QTest::qWait(500);
    const double cpu_before = cpu_seconds(ranks[0]);
    QTest::qWait(1500);
    const double waiting_cpu = cpu_seconds(ranks[0]) - cpu_before;
    QVERIFY2(cpu_before >= 0 && waiting_cpu < 0.5,
             qPrintable(QString("the waiting rank used %1 s of CPU in 1.5 s").arg(waiting_cpu)));
    QVERIFY(cli.waitForFinished(30000));
    const double seconds = detected.elapsed() / 1000.0;
    QVERIFY2(seconds < 10, qPrintable(QString("loom-cli ended %1 s after the SIGSTOP").arg(seconds)));
    QCOMPARE(cli.exitCode(), 1);
    expect_gone_within_10s(job);
    const QJsonObject run = only_run();
    QCOMPARE(run["status"].toString(), QString("hung"));
    const QString error = run["error"].toString();
    QVERIFY2(error.contains("its process is stopped") && error.contains("its last span:"), qPrintable(error));
    QVERIFY2(QString::fromUtf8(cli.readAllStandardError()).contains("hung"), "loom-cli says the run hung");
  }

  // A 3-rank parameter-server job with a 3 s limit: a stopped server, then a stopped
  // worker, is found hung within the limit plus two seconds of the SIGSTOP, and named. The
  // server records no steps, so the watchdog used to hold it to setup's 120 s (a stopped
  // server was found after 120.6 s); a rank's setup allowance now ends when it has built
  // its model (store_feeder).
  void stoppedParameterServerOrWorkerIsHungWithinTheLimit() {
    constexpr double kLimit = 3;
    for (const int stopped : {2, 0}) {
      db_name_ = QString("ps-stopped-rank-%1.db").arg(stopped);
      QProcess cli;
      const std::set<qint64> job = start_training(cli, ps_plan(kLimit), 3, 2);
      qint64 target = 0;
      for (qint64 pid : rank_pids(job))
        if (mpi_rank_of(pid) == stopped) target = pid;
      QVERIFY2(target > 0, qPrintable(QString("no process of rank %1").arg(stopped)));
      const qint64 stopped_at = QDateTime::currentMSecsSinceEpoch();
      ::kill(pid_t(target), SIGSTOP);
      QVERIFY(cli.waitForFinished(30000));
      expect_gone_within_10s(job);
      const QJsonObject run = only_run();
      QCOMPARE(run["status"].toString(), QString("hung"));
      const QJsonObject shown = loom::test::last_json_line(
          run_cli({"show", QString::number(run["id"].toInteger()), "--db", db(), "--json"}).out);
      const double found_s = double(shown["ended_unix_ms"].toInteger() - stopped_at) / 1000.0;
      qInfo("rank %d stopped: found hung after %.2f s (limit %.0f s)", stopped, found_s, kLimit);
      // Alone on this project's 2-core VM: 3.03 and 3.24 s; beside other tests (ctest -j2):
      // 4.07 s once (the supervisor and the store wait for a core). The bug this guards
      // against took 120 s.
      QVERIFY2(found_s < kLimit + 2, qPrintable(QString("found hung %1 s after the SIGSTOP").arg(found_s)));
      const QString error = run["error"].toString();
      QVERIFY2(error.startsWith(QString("rank %1 ").arg(stopped)) && error.contains("its process is stopped"),
               qPrintable(error));
    }
  }

  // SIGKILL to a rank of a run that saves a checkpoint every 100 steps, after its first:
  // the run fails; `loom-cli resume` continues it from that checkpoint on one rank instead
  // of two, as a new run linked to the failed one, which trains the remaining steps and
  // completes. The failed run's checkpoints stay (it may be resumed again).
  void killedRankRunResumesOnAnotherRankCount() {
    db_name_ = "resume.db";
    QByteArray plan = long_plan(0).replace("1000000", "3000").replace("\"threads\": 1,", "\"threads\": 1, \"checkpoint_every\": 100,");
    QProcess cli;
    const std::vector<qint64> ranks = rank_pids(start_training(cli, plan));
    QCOMPARE(ranks.size(), std::size_t(2));
    // Any step both ranks have saved.
    const QDir checkpoints(db() + ".checkpoints/run-1");
    auto saved = [&] {
      for (const QString& step : checkpoints.entryList({"step-*"}, QDir::Dirs))
        if (QDir(checkpoints.filePath(step)).entryList({"rank-*.ckpt"}).size() == 2) return true;
      return false;
    };
    QElapsedTimer waited;
    waited.start();
    while (!saved() && waited.elapsed() < 60000) QTest::qWait(10);
    QVERIFY2(cli.state() == QProcess::Running, "the run ended before a rank could be killed");
    ::kill(pid_t(ranks[1]), SIGKILL);
    QVERIFY(cli.waitForFinished(30000));
    QCOMPARE(only_run()["status"].toString(), QString("failed"));

    const Result resumed = run_cli({"resume", "1", "--replicas", "1", "--db", db(), "--json"});
    QVERIFY2(resumed.exit_code == 0, qPrintable(resumed.err + resumed.out));
    QVERIFY2(resumed.err.contains("resuming run 1 from step") && resumed.err.contains("on 1 rank"), qPrintable(resumed.err));
    const QJsonObject summary = loom::test::last_json_line(resumed.out);
    QCOMPARE(summary["status"].toString(), QString("completed"));
    QCOMPARE(summary["resumed_from"].toInteger(), 1);
    // Its first step is the checkpoint's (steps count from 0): a multiple of 100.
    const QRegularExpressionMatch from = QRegularExpression("from step (\\d+)").match(resumed.err);
    QVERIFY(from.hasMatch());
    const qint64 at = summary["resumed_at_step"].toInteger();
    QCOMPARE(at, from.captured(1).toLongLong());
    QVERIFY2(at >= 100 && at % 100 == 0, qPrintable(QString("resumed at step %1").arg(at)));
    QVERIFY(QDir(db() + ".checkpoints/run-1").exists());
    QVERIFY(!QDir(db() + ".checkpoints/run-2").exists());  // a completed run keeps none
  }

  // The store on a 3 MiB tmpfs: it fills up mid-run. The run must end promptly as failed
  // with the reason, and what was stored before stays readable.
  void fullDiskFailsTheRunWithTheReason() {
    const QString mount_point = dir_.filePath("tiny-disk");
    QVERIFY(QDir().mkpath(mount_point));
    if (QProcess::execute("mount", {"-t", "tmpfs", "-o", "size=3m", "tmpfs", mount_point}) != 0)
      QSKIP("cannot mount a tmpfs here (needs root and a kernel that allows it)");
    const QString store = mount_point + "/runs.db";
    QFile plan(dir_.filePath("fills-disk.json"));
    QVERIFY(plan.open(QIODevice::WriteOnly));
    plan.write(long_plan(0).replace("1000000", "100000"));  // minutes, unless it stops
    plan.close();
    QElapsedTimer took;
    took.start();
    const Result run = run_cli({"run", plan.fileName(), "--db", store}, 300000);
    const double seconds = took.elapsed() / 1000.0;
    const Result runs = run_cli({"runs", "--db", store, "--json"});
    const Result shown = run_cli({"show", "1", "--db", store, "--json"});
    QProcess::execute("umount", {mount_point});
    qint64 events = 0;
    for (const auto& v : loom::test::last_json_line(shown.out)["ranks"].toArray())
      events += v.toObject()["events_stored"].toInteger();
    QVERIFY2(events > 1000, qPrintable(QString("%1 events kept").arg(events)));
    QCOMPARE(run.exit_code, 1);
    QVERIFY2(seconds < 20, qPrintable(QString("the run went on for %1 s on a full disk").arg(seconds)));
    const QJsonObject stored = QJsonDocument::fromJson(runs.out.toUtf8()).array().first().toObject();
    QCOMPARE(stored["status"].toString(), QString("failed"));
    QVERIFY2(stored["error"].toString().contains("disk is full"), qPrintable(stored["error"].toString()));
    QVERIFY(run.err.contains("disk is full"));
  }
};

QTEST_GUILESS_MAIN(CliReliabilityTest)
#include "test_cli_reliability.moc"
