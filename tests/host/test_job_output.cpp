// Reading mpirun's output about a rank's end (launcher/host job_output.h), on text as
// Open MPI 4.1 prints it.
#include <QtTest>

#include "loom/host/job_output.h"

using namespace loom::host;

namespace {
const std::string kKilled = R"(rank 0 lost: connection closed before Done
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
mpirun: Forwarding signal 10 to job
--------------------------------------------------------------------------
mpirun noticed that process rank 1 with PID 7831 on node vm exited on signal 9 (Killed).
--------------------------------------------------------------------------
)";

const std::string kAborted = R"(loom-rank 2: step 41
loom-rank 2: out of memory while training (make the model or the batch smaller)
loom-rank 12: unrelated
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[49012,1],2]
  Exit code:    134
--------------------------------------------------------------------------
)";
}  // namespace

class TestJobOutput : public QObject {
  Q_OBJECT
 private slots:
  void verdicts() {
    QCOMPARE(mpirun_verdict(1, kKilled), std::string("exited on signal 9 (Killed)"));
    QCOMPARE(mpirun_verdict(0, kKilled), std::string());  // mpirun named another rank
    QCOMPARE(mpirun_verdict(2, kAborted), std::string("exited with exit code 134"));
    QCOMPARE(mpirun_verdict(1, kAborted), std::string());
  }
  void lastLinesAreTheRanksOwn() {
    QCOMPARE(rank_last_lines(2, kAborted),
             (std::vector<std::string>{"loom-rank 2: step 41",
                                       "loom-rank 2: out of memory while training (make the model or the batch smaller)"}));
    QCOMPARE(rank_last_lines(2, kAborted, 1).size(), std::size_t(1));
    QVERIFY(rank_last_lines(1, kAborted).empty());  // "loom-rank 12:" is not rank 1
  }
  void explanation() {
    QCOMPARE(explain_rank_end(1, kKilled), std::string("; mpirun: exited on signal 9 (Killed)"));
    QCOMPARE(explain_rank_end(2, kAborted),
             std::string("; mpirun: exited with exit code 134; its last lines: loom-rank 2: step 41 | loom-rank 2: out "
                         "of memory while training (make the model or the batch smaller)"));
    QCOMPARE(explain_rank_end(3, kKilled), std::string());
  }
};

QTEST_GUILESS_MAIN(TestJobOutput)
#include "test_job_output.moc"
