// Starts a plan as a real job (launcher host: mpirun, one loom-rank per device, live
// stream into the run store) on a worker thread and reports back by queued signals, so
// the window stays responsive while the job runs and while it stops.
#pragma once

#include <QObject>
#include <QString>

#include <atomic>
#include <cstdint>
#include <thread>

#include "loom/core/plan.h"
#include "loom/host/resume.h"
#include "loom/host/store_feeder.h"

namespace loom::ui {

class RunController : public QObject {
  Q_OBJECT

 public:
  explicit RunController(QObject* parent = nullptr);
  ~RunController() override;  // stops a running job gracefully and waits for it

  void setDbPath(const QString& path) { db_path_ = path; }
  QString dbPath() const { return db_path_; }
  void setRankExecutable(const QString& path) { rank_executable_ = path; }
  QString rankExecutable() const { return rank_executable_; }
  bool isRunning() const { return running_; }

  // False (and nothing starts) while a job is already running. With `resume`, the job
  // continues that stored run from its checkpoint as a new run linked to it.
  bool start(const loom::Plan& plan, const host::ResumeRequest* resume = nullptr);
  // Asks the job to finish its step and stop (SIGUSR1, then SIGTERM, then SIGKILL).
  void stop();

 signals:
  void runCreated(qint64 runId);
  void progress(const loom::host::JobProgress& progress);
  void finished(qint64 runId, loom::trace::RunStatus status, const QString& error, double wallSeconds);

 private:
  void join();

  QString db_path_;
  QString rank_executable_;
  std::thread worker_;
  std::atomic<bool> stop_requested_{false};
  bool running_ = false;  // GUI thread only
};

}  // namespace loom::ui

Q_DECLARE_METATYPE(loom::host::JobProgress)
