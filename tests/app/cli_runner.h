// Runs the real loom-cli executable (LOOM_CLI, set by CMake) and captures its exit code
// and output; shared by the loom-cli test suites.
#pragma once

#include <QProcess>
#include <QString>
#include <QStringList>

namespace loom::test {

struct Result {
  int exit_code = -1;  // -1: crashed or killed after the timeout
  QString out, err;
};

inline Result run_cli(const QStringList& args, int timeout_ms = 300000) {
  QProcess p;
  p.start(LOOM_CLI, args);
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace loom::test
