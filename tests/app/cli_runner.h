// Runs the real loom-cli executable (LOOM_CLI, set by CMake) and captures its exit code
// and output, and reads and writes the JSON it takes and prints; shared by the loom-cli
// test suites.
#pragma once

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QtGlobal>

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

// The object on the last line of `--json` output (earlier lines may be progress).
inline QJsonObject last_json_line(const QString& out) {
  return QJsonDocument::fromJson(out.trimmed().split('\n').last().toUtf8()).object();
}

inline QJsonObject read_json_file(const QString& path) {
  QFile f(path);
  f.open(QIODevice::ReadOnly);
  return QJsonDocument::fromJson(f.readAll()).object();
}

// Writes `plan` to `path` and runs it: `loom-cli run PATH --db DB --json`; a failed run
// prints its output as a warning (the caller asserts on the result).
inline Result run_plan(const QJsonObject& plan, const QString& path, const QString& db) {
  QFile f(path);
  f.open(QIODevice::WriteOnly);
  f.write(QJsonDocument(plan).toJson());
  f.close();
  const Result run = run_cli({"run", path, "--db", db, "--json"});
  if (run.exit_code != 0) qWarning("%s", qPrintable(run.err + run.out));
  return run;
}

}  // namespace loom::test
