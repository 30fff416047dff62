// The host's StoreFeeder writes what ranks stream into the run store: here, the updates a
// parameter-server rank reports (stored as sent, for whichever workers pushed them), a
// rank's device identity (kept through the clock and Done updates that follow it), and a
// store failure that must surface as store_error() rather than stop the stream.
#include <QTemporaryDir>
#include <QtTest>

#include "loom/host/store_feeder.h"

using namespace loom;

namespace {
trace::UpdateRecord update(int i) {
  return {i % 3, 1, 1000 + i, -(1LL << 40) + i, (1LL << 41) + i, 5 + i, 1'700'000'000'000'000'000LL + i};
}
}  // namespace

class TestStoreFeeder : public QObject {
  Q_OBJECT
 private slots:
  void updatesAreStoredAsSent() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("runs.db").toStdString();
    auto reader = store::RunStore::open(path);
    QVERIFY(reader.ok());
    const std::int64_t id = *reader->create_run({});
    auto writer = store::RunStore::open(path);
    QVERIFY(writer.ok());
    host::StoreFeeder feeder(std::move(writer).value(), id, 4, "here");
    feeder.on_updates(3, {update(0), update(1)});  // rank 3 is the server that applied them
    feeder.on_updates(3, {});
    feeder.on_updates(3, {update(2)});
    QCOMPARE(feeder.store_error(), std::string());
    auto stored = reader->load_updates(id);
    QVERIFY(stored.ok());
    QCOMPARE(stored->size(), std::size_t(3));
    // Every field as sent: the worker is not overwritten by the connection's rank (3).
    for (int i = 0; i < 3; ++i) QVERIFY2((*stored)[std::size_t(i)] == update(i), qPrintable(QString("update %1").arg(i)));
  }

  // A parameter server records no steps: its setup allowance ends when it has built its
  // model, so a stopped worker freezing every rank is found within the plan's limit.
  void setupEndsWhenTheModelIsBuilt() {
    QTemporaryDir dir;
    auto store = store::RunStore::open(dir.filePath("runs.db").toStdString());
    QVERIFY(store.ok());
    const std::int64_t id = *store->create_run({});
    host::StoreFeeder feeder(std::move(store).value(), id, 2, "here");
    trace::Event load;
    load.kind = trace::EventKind::Setup;
    load.message = std::int32_t(trace::SetupPhase::LoadData);
    feeder.on_events(1, {load});
    QVERIFY2(!feeder.activity()[1].training, "loading data is setup");
    trace::Event build = load;
    build.message = std::int32_t(trace::SetupPhase::BuildModel);
    feeder.on_events(1, {build});
    QVERIFY2(feeder.activity()[1].training, "a server with its model built is past setup");
    trace::Event update;
    update.kind = trace::EventKind::Optimizer;
    feeder.on_events(0, {update});
    QVERIFY2(feeder.activity()[0].training, "work ends setup too");
  }

  // The Device frame arrives after Hello; the later Clock and Done frames rewrite the rank's
  // row and must keep the identity, as must the log line that names it.
  void deviceIdentityIsStoredAndKept() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("runs.db").toStdString();
    auto reader = store::RunStore::open(path);
    QVERIFY(reader.ok());
    const std::int64_t id = *reader->create_run({});
    auto writer = store::RunStore::open(path);
    QVERIFY(writer.ok());
    host::StoreFeeder feeder(std::move(writer).value(), id, 2, "here");
    stream::Hello hello;
    hello.rank = 1;
    hello.host = "gpu-node";
    hello.device = "gpu 1";
    feeder.on_hello(hello);
    trace::DeviceInfo gpu;
    gpu.kind = "gpu";
    gpu.name = "NVIDIA H200";  // as a rank on an H200 sends it; no GPU is needed to store it
    gpu.memory_bytes = 150'011'707'392LL;
    gpu.nccl = "2.28.3";
    feeder.on_device(1, gpu);
    feeder.on_clock(1, stream::ClockInfo{5, 6, 1, 2, 3, 4});
    feeder.on_done(1, stream::Done{10, trace::RunStatus::Completed, ""});
    QCOMPARE(feeder.store_error(), std::string());
    auto ranks = reader->load_ranks(id);
    QVERIFY(ranks.ok());
    QCOMPARE(ranks->size(), std::size_t(1));
    QCOMPARE((*ranks)[0].offset_ns, std::int64_t(5));
    QCOMPARE((*ranks)[0].events_recorded, std::int64_t(10));
    QVERIFY((*ranks)[0].device_info == gpu);
    auto run = reader->load_run(id);
    QVERIFY(run.ok());
    QVERIFY2(run->log.find("rank 1 runs on NVIDIA H200, 139.7 GiB, NCCL 2.28.3") != std::string::npos, run->log.c_str());
  }

  void storeFailureIsReported() {
    QTemporaryDir dir;
    auto store = store::RunStore::open(dir.filePath("runs.db").toStdString());
    QVERIFY(store.ok());
    host::StoreFeeder feeder(std::move(store).value(), /*run_id: none such*/ 77, 2, "here");
    feeder.on_updates(1, {update(0)});
    QVERIFY2(!feeder.store_error().empty(), "an update for an unknown run was silently dropped");
  }
};

QTEST_GUILESS_MAIN(TestStoreFeeder)
#include "test_store_feeder.moc"
