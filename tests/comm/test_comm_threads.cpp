// The in-process communicator (ranks as threads): the shared backend contract from
// comm_checks.h on groups of 1, 2 and 4 ranks, plus what only this backend promises —
// sums taken in rank order (bitwise reproducible) and mismatched collectives reported
// to every rank instead of hanging or corrupting memory.
#include <QtTest>

#include <thread>

#include "comm_checks.h"
#include "loom/comm/threads.h"

using namespace loom;
using namespace loom::comm;

namespace {

// Runs fn(comm) on one thread per rank; returns every rank's failures, prefixed by rank.
template <class Fn>
QStringList run_ranks(std::vector<std::unique_ptr<Communicator>>& comms, Fn fn) {
  std::vector<checks::Failures> failures(comms.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < comms.size(); ++r) threads.emplace_back([&, r] { fn(*comms[r], failures[r]); });
  for (auto& t : threads) t.join();
  QStringList all;
  for (std::size_t r = 0; r < failures.size(); ++r) {
    for (const auto& m : failures[r].messages) all << QString("rank %1: %2").arg(r).arg(QString::fromStdString(m));
  }
  return all;
}

// Values whose float sum depends on the order they are added in.
float order_sensitive(int rank, std::int64_t i) {
  const float magnitude[] = {1e8f, 1.0f, -1e8f, 3.7f};
  return magnitude[rank % 4] * (1.0f + float(i % 13) * 0.1f) + float(i % 7) * 0.01f;
}

}  // namespace

class ThreadCommTest : public QObject {
  Q_OBJECT
 private slots:
  void contract_data() {
    QTest::addColumn<int>("check");
    QTest::addColumn<int>("size");
    const auto all = checks::all_checks();
    for (int k = 0; k < int(all.size()); ++k) {
      for (int size : {1, 2, 4}) QTest::addRow("%s/%d", all[std::size_t(k)].name, size) << k << size;
    }
  }
  void contract() {
    QFETCH(int, check);
    QFETCH(int, size);
    auto comms = make_thread_group(size);
    QCOMPARE(int(comms.size()), size);
    QCOMPARE(comms[0]->backend_name(), std::string("threads"));
    const checks::CheckFn fn = checks::all_checks()[std::size_t(check)].fn;
    const QStringList failures = run_ranks(comms, [&](Communicator& c, checks::Failures& f) { fn(c, f); });
    QVERIFY2(failures.isEmpty(), qPrintable(failures.join("\n")));
  }

  void allreduceSumsInRankOrder() {
    const int size = 4;
    const std::int64_t n = 9000;
    auto comms = make_thread_group(size);
    std::vector<std::vector<float>> results(size);
    run_ranks(comms, [&](Communicator& c, checks::Failures& f) {
      std::vector<float> data(n);
      for (std::int64_t i = 0; i < n; ++i) data[std::size_t(i)] = order_sensitive(c.rank(), i);
      auto request = c.iallreduce_sum(data.data(), n);
      f.expect_ok(request->wait(), "iallreduce");
      results[std::size_t(c.rank())] = data;
    });
    int order_matters = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      float expected = order_sensitive(0, i);
      for (int r = 1; r < size; ++r) expected += order_sensitive(r, i);
      float reversed = order_sensitive(size - 1, i);
      for (int r = size - 2; r >= 0; --r) reversed += order_sensitive(r, i);
      order_matters += expected != reversed;
      for (int r = 0; r < size; ++r) {
        QVERIFY2(results[std::size_t(r)][std::size_t(i)] == expected,
                 qPrintable(QString("rank %1 element %2").arg(r).arg(i)));
      }
    }
    QVERIFY2(order_matters > 100, "the data does not distinguish summation orders");
  }

  void mismatchedCollectivesFailOnEveryRank() {
    auto comms = make_thread_group(2);
    std::vector<Status> results(2);
    run_ranks(comms, [&](Communicator& c, checks::Failures&) {
      std::vector<float> data(10 + 10 * std::size_t(c.rank()), 1.0f);  // 10 vs 20 floats
      results[std::size_t(c.rank())] = c.allreduce_sum(data.data(), std::int64_t(data.size()));
    });
    QVERIFY(!results[0].ok());
    QVERIFY(!results[1].ok());
    QCOMPARE(results[0].error().code, ErrorCode::InvalidArgument);
    QVERIFY(results[0].error().message.find("mismatch") != std::string::npos);
  }

  void invalidArgumentsFailOnEveryRank() {
    auto comms = make_thread_group(2);
    std::vector<Status> results(2);
    run_ranks(comms, [&](Communicator& c, checks::Failures&) {
      float x = 1.0f;
      results[std::size_t(c.rank())] = c.allreduce_sum(c.rank() == 0 ? &x : nullptr, 1);
    });
    QVERIFY(!results[0].ok());
    QVERIFY(!results[1].ok());
  }

  void requestDestroyedBeforeWaitStillCompletes() {
    auto comms = make_thread_group(2);
    std::vector<float> out(2, 0.0f);
    run_ranks(comms, [&](Communicator& c, checks::Failures&) {
      float x = float(c.rank() + 1);
      { auto dropped = c.iallreduce_sum(&x, 1); }  // the destructor waits
      out[std::size_t(c.rank())] = x;
    });
    QCOMPARE(out[0], 3.0f);
    QCOMPARE(out[1], 3.0f);
  }

  void emptyGroupForBadSize() { QVERIFY(make_thread_group(0).empty()); }
};

QTEST_GUILESS_MAIN(ThreadCommTest)
#include "test_comm_threads.moc"
