// The run lifecycle with the in-process transport, on a real SQLite file: a one-rank run
// lands whole in the store (every recorded event stored, one loss per step, its figures
// stored, status completed), a run whose dataset is missing is stored as failed with its
// error, a stop request ends it as stopped with its record kept, and checkpoints go once
// a run completes.
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <filesystem>

#include "loom/host/in_process_transport.h"
#include "loom/host/run_lifecycle.h"
#include "loom/store/run_store.h"

using namespace loom;

namespace {

// The example spirals plan, as a user would run it, shortened to `steps`.
Plan spirals_plan(std::int64_t steps) {
  QFile file(QStringLiteral(LOOM_SOURCE_DIR "/resources/plans/spirals_synthetic.json"));
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read the spirals example plan");
  PlanResult parsed = parse_plan(file.readAll().toStdString());
  if (!parsed.ok()) qFatal("the spirals example plan does not parse");
  Plan plan = *parsed.plan;
  plan.training.steps = steps;
  plan.training.threads = 1;
  return plan;
}

}  // namespace

class TestRunLifecycle : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  std::string db(const char* name) { return dir_.filePath(name).toStdString(); }

 private slots:
  void inProcessRunLandsInStore() {
    host::InProcessTransport transport;
    host::RunOptions options;
    std::int64_t announced = 0, last_step = 0;
    options.on_run_created = [&](std::int64_t id) { announced = id; };
    options.on_progress = [&](const host::JobProgress& p) { last_step = p.step; };
    auto outcome = host::run_plan(spirals_plan(30), db("landed.db"), transport, options);
    QVERIFY2(outcome.ok(), outcome.ok() ? "" : outcome.error().describe().c_str());
    QCOMPARE(outcome->status, trace::RunStatus::Completed);
    QCOMPARE(outcome->run_id, announced);
    QCOMPARE(last_step, std::int64_t(30));
    QCOMPARE(outcome->samples, 30 * spirals_plan(30).training.batch);
    auto store = store::RunStore::open(db("landed.db"));
    QVERIFY(store.ok());
    auto ranks = store->load_ranks(outcome->run_id);
    QVERIFY(ranks.ok());
    QCOMPARE(int(ranks->size()), 1);
    auto stored = store->count_events(outcome->run_id, 0);
    QVERIFY(stored.ok());
    QVERIFY((*ranks)[0].events_recorded > 30 * 6);
    QCOMPARE(*stored, (*ranks)[0].events_recorded);
    auto losses = store->load_metrics(outcome->run_id, "loss");
    QVERIFY(losses.ok());
    QCOMPARE(int(losses->size()), 30);
    auto run = store->load_run(outcome->run_id);
    QVERIFY(run.ok());
    QCOMPARE(run->status, trace::RunStatus::Completed);
    QCOMPARE(run->samples, outcome->samples);
    // The figures were stored with the end: the steady training window's time and samples.
    QVERIFY2(run->train_s > 0 && run->train_samples > 0, "the lifecycle did not store the training figures");
  }

  void missingDatasetFailsTheRunWithAHint() {
    Plan plan = default_plan();
    plan.data.path = dir_.filePath("no-such-dir").toStdString();
    host::InProcessTransport transport;
    auto outcome = host::run_plan(plan, db("missing.db"), transport, {});
    QVERIFY(outcome.ok());
    QCOMPARE(outcome->status, trace::RunStatus::Failed);
    QVERIFY2(outcome->error.find("no-such-dir") != std::string::npos, outcome->error.c_str());
    auto store = store::RunStore::open(db("missing.db"));
    QVERIFY(store.ok());
    auto run = store->load_run(outcome->run_id);
    QVERIFY(run.ok());
    QCOMPARE(run->status, trace::RunStatus::Failed);
    QCOMPARE(run->error, outcome->error);
  }

  // Stopped after 7 steps: stopped, not failed, with the checkpoint of its last step kept
  // for a resume (a completed run's are removed).
  void stopRequestEndsTheRunStoppedWithItsCheckpoint() {
    Plan plan = spirals_plan(30);
    plan.training.checkpoint_every = 5;
    std::atomic<bool> stop{false};
    host::RunOptions options;
    options.stop = &stop;
    options.on_progress = [&stop](const host::JobProgress& p) { stop = stop || p.step == 7; };
    host::InProcessTransport transport;
    auto outcome = host::run_plan(plan, db("stopped.db"), transport, options);
    QVERIFY(outcome.ok());
    QCOMPARE(outcome->status, trace::RunStatus::Stopped);
    QCOMPARE(outcome->samples, std::int64_t(7) * plan.training.batch);
    QVERIFY(std::filesystem::exists(store::checkpoint_dir(db("stopped.db"), outcome->run_id)));
    auto completed = host::run_plan(plan, db("stopped.db"), transport, {});
    QVERIFY(completed.ok());
    QCOMPARE(completed->status, trace::RunStatus::Completed);
    QVERIFY(!std::filesystem::exists(store::checkpoint_dir(db("stopped.db"), completed->run_id)));
  }

  // A store that cannot be opened (its folder is a file): no run, an error naming it.
  void unopenableStoreIsAnError() {
    QFile blocker(dir_.filePath("a-file"));
    QVERIFY(blocker.open(QIODevice::WriteOnly));
    blocker.close();
    host::InProcessTransport transport;
    const std::string path = dir_.filePath("a-file/runs.db").toStdString();
    auto outcome = host::run_plan(spirals_plan(3), path, transport, {});
    QVERIFY(!outcome.ok());
    QVERIFY2(outcome.error().describe().find("a-file") != std::string::npos, outcome.error().describe().c_str());
  }
};

QTEST_GUILESS_MAIN(TestRunLifecycle)
#include "test_run_lifecycle.moc"
