// Real mpirun jobs supervised by the host: the record arrives in the store while the job
// runs and nothing is lost; a killed rank fails the run within 5 s and what it recorded
// stays; a stop request ends the run as stopped with its record intact.
#include <signal.h>

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <sstream>

#include <atomic>
#include <chrono>
#include <thread>

#include "loom/host/job.h"
#include "loom/host/oversubscription.h"
#include "loom/store/run_store.h"
#include "loom/test/files.h"

using namespace loom;
using Clock = std::chrono::steady_clock;
using loom::testing::per_test_db;

namespace {

Plan dp_plan(int ranks, int steps) {
  Plan plan = default_plan();
  plan.name = "host-job-test";
  plan.data.train_limit = 6400;
  plan.data.test_limit = 500;
  plan.training.steps = steps;
  plan.training.threads = 1;
  plan.parallel.data_parallel = ranks;
  plan.parallel.devices.assign(std::size_t(ranks), DeviceSpec{});
  return plan;
}

host::MpirunOptions launch_options() {
  host::MpirunOptions o;
  o.rank_executable = LOOM_RANK;
  o.mpirun = LOOM_MPIEXEC;
  return o;
}

host::RunOptions run_options(const std::atomic<bool>* stop = nullptr) {
  host::RunOptions o;
  o.stop = stop;
  return o;
}

// A plan run as a job through the lifecycle, as the workbench runs every plan.
Expected<host::RunOutcome> run_job(const Plan& plan, const std::string& db, const host::RunOptions& options,
                                   const host::MpirunOptions& launch = launch_options()) {
  host::MpirunTransport transport(launch);
  return host::run_plan(plan, db, transport, options);
}

// Runs a job on a thread so the test can watch the store while it runs.
struct BackgroundJob {
  Expected<host::RunOutcome> outcome = make_error(ErrorCode::Internal, "not finished");
  std::thread thread;
  BackgroundJob(const Plan& plan, const std::string& db, host::RunOptions options) {
    thread = std::thread([this, plan, db, options] { outcome = run_job(plan, db, options); });
  }
  ~BackgroundJob() {
    if (thread.joinable()) thread.join();
  }
  void join() { thread.join(); }
};

std::int64_t newest_run_id(store::RunStore& store) {
  auto runs = store.list_runs();
  return runs.ok() && !runs->empty() ? runs->front().id : 0;
}

std::string run_status(store::RunStore& store, std::int64_t id) {
  auto run = store.load_run(id);
  return run.ok() ? std::string(trace::to_text(run->status)) : "?";
}

// Polls until `done` holds or the timeout passes; true if it held.
template <class F>
bool wait_until(F done, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace

class TestJob : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::string db_;

 private slots:
  void init() { db_ = per_test_db(dir_).toStdString(); }

  void record_arrives_live_and_nothing_is_lost() {
    BackgroundJob job(dp_plan(2, 600), db_, run_options());
    auto store = store::RunStore::open(db_);
    QVERIFY(store.ok());
    std::int64_t id = 0;
    QVERIFY(wait_until([&] { return (id = newest_run_id(*store)) != 0; }, std::chrono::seconds(20)));
    // Counts seen while the run is still marked running: they must grow.
    std::vector<std::int64_t> live_counts;
    while (run_status(*store, id) == "running") {
      auto n = store->count_events(id);
      if (n.ok() && *n > 0 && (live_counts.empty() || *n > live_counts.back())) live_counts.push_back(*n);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    job.join();
    QVERIFY2(job.outcome.ok(), job.outcome.ok() ? "" : job.outcome.error().describe().c_str());
    QCOMPARE(job.outcome->status, loom::trace::RunStatus::Completed);
    QVERIFY2(live_counts.size() >= 3, "events did not arrive in the store while the job ran");
    auto ranks = store->load_ranks(id);
    QVERIFY(ranks.ok());
    QCOMPARE(int(ranks->size()), 2);
    for (const auto& r : *ranks) {
      auto stored = store->count_events(id, r.rank);
      QVERIFY(stored.ok());
      QVERIFY(r.events_recorded > 0);
      QCOMPARE(*stored, r.events_recorded);  // recorded on the rank == stored by the host
      QVERIFY(r.sync_end_ns > r.sync_start_ns);  // both clock estimates arrived
      QVERIFY(r.pid > 0);
    }
    auto p2p = store->load_metrics(id, "p2p_gbs");
    QVERIFY(p2p.ok() && !p2p->empty() && p2p->back().value > 0);
    auto latency = store->load_metrics(id, "stream_latency_max_ms");
    QVERIFY(latency.ok() && latency->size() == 2);
    for (const auto& m : *latency) qInfo("rank %d: recorded-to-stored latency max %.1f ms", m.rank, m.value);
  }

  // One rank more than this machine's cores: the run's log opens with the sentence and the
  // run keeps the worst host's ranks and cores as metrics, for stored runs to say it too.
  void oversubscription_is_recorded_with_the_run() {
    const int cores = host::cores_available();
    if (cores > 7) QSKIP("this machine has too many cores to oversubscribe cheaply");
    Plan plan = dp_plan(cores + 1, 5);
    plan.training.batch = 16 * (cores + 1);
    auto outcome = run_job(plan, db_, run_options());
    QVERIFY2(outcome.ok(), outcome.ok() ? "" : outcome.error().describe().c_str());
    QVERIFY2(outcome->status == loom::trace::RunStatus::Completed, outcome->error.c_str());
    QVERIFY(outcome->command.find("OMPI_MCA_mpi_yield_when_idle=1") != std::string::npos);
    auto store = store::RunStore::open(db_);
    QVERIFY(store.ok());
    auto run = store->load_run(outcome->run_id);
    QVERIFY(run.ok());
    const std::string said = "oversubscribed: " + std::to_string(cores + 1) + " ranks share " + std::to_string(cores) +
                             " core" + (cores == 1 ? "" : "s") + " on localhost: ranks take turns";
    QVERIFY2(run->log.rfind(said, 0) == 0, run->log.c_str());
    auto ranks = store->load_metrics(outcome->run_id, host::kOversubscribedRanksMetric);
    auto cores_metric = store->load_metrics(outcome->run_id, host::kOversubscribedCoresMetric);
    QVERIFY(ranks.ok() && cores_metric.ok() && ranks->size() == 1 && cores_metric->size() == 1);
    QCOMPARE(ranks->front().value, double(cores + 1));
    QCOMPARE(cores_metric->front().value, double(cores));
    QCOMPARE(ranks->front().step, std::int64_t(-1));
  }

  void killed_rank_fails_the_run_within_5_seconds() {
    BackgroundJob job(dp_plan(2, 100000), db_, run_options());
    auto store = store::RunStore::open(db_);
    QVERIFY(store.ok());
    std::int64_t id = 0;
    QVERIFY(wait_until([&] { return (id = newest_run_id(*store)) != 0; }, std::chrono::seconds(20)));
    int victim = 0;
    QVERIFY(wait_until(
        [&] {
          auto ranks = store->load_ranks(id);
          auto events = store->count_events(id, 1);
          for (const auto& r : ranks.ok() ? *ranks : std::vector<trace::RankRecord>{})
            if (r.rank == 1) victim = r.pid;
          return victim > 0 && events.ok() && *events > 100;
        },
        std::chrono::seconds(30)));
    const auto events_before = *store->count_events(id, 1);
    QCOMPARE(::kill(victim, SIGKILL), 0);
    const auto killed_at = Clock::now();
    QVERIFY2(wait_until([&] { return run_status(*store, id) == "failed"; }, std::chrono::seconds(5)),
             "the run was not marked failed within 5 s of the kill");
    const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
    qInfo("marked failed %.2f s after the kill", seconds);
    job.join();
    QVERIFY(job.outcome.ok());
    QCOMPARE(job.outcome->status, loom::trace::RunStatus::Failed);
    QVERIFY(*store->count_events(id, 1) >= events_before);  // what it recorded stays
    auto run = store->load_run(id);
    QVERIFY(run.ok());
    QVERIFY2(run->log.find("rank 1") != std::string::npos, run->log.c_str());
    // The host learnt it from the rank's stream closing, not from mpirun's exit later on.
    QVERIFY2(run->error.find("rank 1 died") != std::string::npos, run->error.c_str());
  }

  // mpirun itself killed: its ranks die with it, and the run says the launcher died, not
  // that a rank did.
  void killed_launcher_is_named() {
    BackgroundJob job(dp_plan(2, 100000), db_, run_options());
    auto store = store::RunStore::open(db_);
    QVERIFY(store.ok());
    std::int64_t id = 0;
    QVERIFY(wait_until([&] { return (id = newest_run_id(*store)) != 0; }, std::chrono::seconds(20)));
    int rank0 = 0;
    QVERIFY(wait_until(
        [&] {
          auto ranks = store->load_ranks(id);
          auto events = store->count_events(id, 0);
          for (const auto& r : ranks.ok() ? *ranks : std::vector<trace::RankRecord>{})
            if (r.rank == 0) rank0 = r.pid;
          return rank0 > 0 && events.ok() && *events > 100;
        },
        std::chrono::seconds(30)));
    // The rank's parent is the launcher (mpirun starts local ranks itself).
    std::ifstream stat("/proc/" + std::to_string(rank0) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto after_name = line.rfind(')');
    QVERIFY(after_name != std::string::npos);
    std::istringstream fields(line.substr(after_name + 2));
    char state = 0;
    int launcher = 0;
    fields >> state >> launcher;
    QVERIFY(launcher > 1);
    QCOMPARE(::kill(launcher, SIGKILL), 0);
    QVERIFY2(wait_until([&] { return run_status(*store, id) == "failed"; }, std::chrono::seconds(10)),
             "the run was not marked failed within 10 s of killing mpirun");
    job.join();
    auto run = store->load_run(id);
    QVERIFY(run.ok());
    QVERIFY2(run->error.find("the launcher (mpirun) died") != std::string::npos, run->error.c_str());
  }

  void stop_request_stores_a_stopped_run() {
    std::atomic<bool> stop{false};
    BackgroundJob job(dp_plan(2, 100000), db_, run_options(&stop));
    auto store = store::RunStore::open(db_);
    QVERIFY(store.ok());
    std::int64_t id = 0;
    QVERIFY(wait_until([&] { return (id = newest_run_id(*store)) != 0; }, std::chrono::seconds(20)));
    QVERIFY(wait_until([&] { auto n = store->count_events(id); return n.ok() && *n > 500; }, std::chrono::seconds(30)));
    stop = true;
    const auto asked = Clock::now();
    job.join();
    qInfo("stopped %.2f s after the request", std::chrono::duration<double>(Clock::now() - asked).count());
    QVERIFY(job.outcome.ok());
    QCOMPARE(job.outcome->status, loom::trace::RunStatus::Stopped);
    QCOMPARE(run_status(*store, id), std::string("stopped"));
    // The ranks agreed on a last step and flushed: still nothing lost.
    auto ranks = store->load_ranks(id);  // kept: a range-for over *temporary would dangle
    QVERIFY(ranks.ok());
    QCOMPARE(int(ranks->size()), 2);
    for (const auto& r : *ranks) {
      qInfo("rank %d: recorded %lld stored %lld", r.rank, (long long)r.events_recorded,
            (long long)*store->count_events(id, r.rank));
      QVERIFY(r.events_recorded > 0);
      QCOMPARE(*store->count_events(id, r.rank), r.events_recorded);
    }
  }

  // A stop nobody asked Loom for: Slurm's scancel or time limit SIGTERMs every rank. The
  // ranks stop at an agreed step and exit 0, and the run is stored as stopped, not completed.
  void stop_from_outside_stores_a_stopped_run() {
    BackgroundJob job(dp_plan(2, 100000), db_, run_options());
    auto store = store::RunStore::open(db_);
    QVERIFY(store.ok());
    std::int64_t id = 0;
    QVERIFY(wait_until([&] { return (id = newest_run_id(*store)) != 0; }, std::chrono::seconds(20)));
    std::vector<int> pids;
    QVERIFY(wait_until(
        [&] {
          auto ranks = store->load_ranks(id);
          auto events = store->count_events(id);
          pids.clear();
          for (const auto& r : ranks.ok() ? *ranks : std::vector<trace::RankRecord>{}) pids.push_back(r.pid);
          return pids.size() == 2 && pids[0] > 0 && pids[1] > 0 && events.ok() && *events > 500;
        },
        std::chrono::seconds(30)));
    for (int pid : pids) QCOMPARE(::kill(pid, SIGTERM), 0);
    job.join();
    QVERIFY(job.outcome.ok());
    QCOMPARE(job.outcome->status, loom::trace::RunStatus::Stopped);
    QCOMPARE(run_status(*store, id), std::string("stopped"));
  }

  void missing_rank_executable_is_a_clear_failure() {
    host::MpirunOptions launch = launch_options();
    launch.rank_executable = "/nonexistent/loom-rank";
    launch.drain_grace = std::chrono::milliseconds(200);
    host::RunOptions o = run_options();
    std::int64_t announced = 0;  // a GUI follows the run in the store from this id on
    o.on_run_created = [&announced](std::int64_t id) { announced = id; };
    auto outcome = run_job(dp_plan(2, 10), db_, o, launch);
    QVERIFY(outcome.ok());
    QVERIFY(announced > 0);
    QCOMPARE(outcome->run_id, announced);
    QCOMPARE(outcome->status, loom::trace::RunStatus::Failed);
    QVERIFY2(outcome->error.find("the rank executable /nonexistent/loom-rank does not exist") != std::string::npos,
             outcome->error.c_str());
  }
};

QTEST_GUILESS_MAIN(TestJob)
#include "test_job.moc"
