// wait_watched (loom/comm/watchdog.h), the wait the NCCL communicator puts around every
// NCCL operation: a finished operation returns at once without an abort; a failed one is
// aborted and its failure reported; one still running at the deadline is aborted and the
// error names the operation and the limit, so a rank whose peer hangs ends with a message.
#include <QtTest>

#include <atomic>
#include <chrono>

#include "loom/comm/watchdog.h"

using namespace loom::comm;
using namespace std::chrono_literals;

class Watchdog : public QObject {
  Q_OBJECT

 private slots:
  void finishedOperationIsNotAborted() {
    int polls = 0, aborts = 0;
    WatchedOp op{[&] { return ++polls < 3 ? OpState::Running : OpState::Done; }, {}, [&] { ++aborts; }};
    const loom::Status s = wait_watched(op, 10s, "ncclAllReduce");
    QVERIFY(s.ok());
    QCOMPARE(polls, 3);
    QCOMPARE(aborts, 0);
  }

  void failedOperationIsAbortedAndExplained() {
    int aborts = 0;
    WatchedOp op{[] { return OpState::Failed; }, [] { return std::string("remote process exited or there was a network error"); },
                 [&] { ++aborts; }};
    const loom::Status s = wait_watched(op, 10s, "ncclAllReduce of 4 floats");
    QVERIFY(!s.ok());
    QCOMPARE(aborts, 1);
    QCOMPARE(s.error().message, std::string("ncclAllReduce of 4 floats failed: remote process exited or there was a network error"));
    QVERIFY(s.error().hint.find("aborted") != std::string::npos);
  }

  void hungOperationIsAbortedAtTheDeadline() {
    int aborts = 0;
    std::atomic<int> polls = 0;
    WatchedOp op{[&] {
                   ++polls;
                   return OpState::Running;
                 },
                 {}, [&] { ++aborts; }};
    const auto start = std::chrono::steady_clock::now();
    const loom::Status s = wait_watched(op, 200ms, "ncclBroadcast of 8 bytes");
    const auto waited = std::chrono::steady_clock::now() - start;
    QVERIFY(!s.ok());
    QCOMPARE(aborts, 1);
    QCOMPARE(s.error().message, std::string("ncclBroadcast of 8 bytes did not complete within 0.2 s"));
    QVERIFY(s.error().hint.find("hung or dead") != std::string::npos);
    QVERIFY(waited >= 200ms);
    QVERIFY(waited < 5s);
    // It sleeps between polls after the first millisecond instead of spinning a core.
    QVERIFY2(polls < 20000, qPrintable(QString("%1 polls in 200 ms").arg(polls.load())));
  }
};

QTEST_GUILESS_MAIN(Watchdog)
#include "test_watchdog.moc"
