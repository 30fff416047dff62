// RunController (see run_controller.h). The job runs on a std::thread; signals emitted
// there reach GUI-thread receivers queued, because this object lives on the GUI thread.
#include "loom/ui/workbench/run_controller.h"

#include <QCoreApplication>

#include "loom/host/job.h"

namespace loom::ui {

RunController::RunController(QObject* parent) : QObject(parent) {
  qRegisterMetaType<loom::host::JobProgress>();
  rank_executable_ = QString::fromStdString(
      host::default_rank_executable(QCoreApplication::applicationFilePath().toStdString()));
}

RunController::~RunController() {
  stop();
  join();
}

void RunController::join() {
  if (worker_.joinable()) worker_.join();
}

bool RunController::start(const loom::Plan& plan, const host::ResumeRequest* resume) {
  if (running_) return false;
  join();  // the previous job's thread has already reported; reap it
  running_ = true;
  stop_requested_ = false;
  host::RunOptions options;
  options.stop = &stop_requested_;
  options.on_run_created = [this](std::int64_t id) { emit runCreated(id); };
  options.on_progress = [this](const host::JobProgress& p) { emit progress(p); };
  if (resume) {
    options.resumed_from = resume->from_run;
    options.resume_step_dir = resume->step_dir;
    options.resume_step = resume->step;
  }
  host::MpirunOptions launch;
  launch.rank_executable = rank_executable_.toStdString();
  worker_ = std::thread([this, plan, options, launch, db = db_path_.toStdString()] {
    // Every plan, one rank too, runs as a job: a crash in training never takes the window
    // down with it, and a Stop works the same for every plan.
    host::MpirunTransport transport(launch);
    auto outcome = host::run_plan(plan, db, transport, options);
    // running_ is cleared on the GUI thread, in order after every queued signal above.
    QMetaObject::invokeMethod(this, [this] { running_ = false; }, Qt::QueuedConnection);
    if (!outcome.ok()) {
      emit finished(0, loom::trace::RunStatus::Failed, QString::fromStdString(outcome.error().describe()), 0.0);
    } else {
      emit finished(outcome->run_id, outcome->status,
                    QString::fromStdString(outcome->error), outcome->wall_s);
    }
  });
  return true;
}

void RunController::stop() { stop_requested_ = true; }

}  // namespace loom::ui
