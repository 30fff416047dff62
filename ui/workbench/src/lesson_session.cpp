#include "loom/ui/workbench/lesson_session.h"

#include <QCoreApplication>
#include <QMetaObject>
#include <QPointer>
#include <QThreadPool>

#include "loom/host/run_report.h"
#include "loom/store/run_store.h"
#include "loom/trace/machine.h"

namespace loom::ui {

namespace {
QString qs(const std::string& s) { return QString::fromStdString(s); }

// Reads each run's report on the calling (pool) thread and measures the answer.
Expected<double> measure_runs(const std::string& db_path, const lessons::Lesson& lesson, const QList<qint64>& ids) {
  auto store = store::RunStore::open(db_path);
  if (!store.ok()) return store.error();
  std::vector<nlohmann::json> summaries;
  for (qint64 id : ids) {
    auto report = host::run_report(*store, id);
    if (!report.ok()) return report.error();
    summaries.push_back(host::run_report_json(*report));
  }
  return lessons::measure_answer(lesson, summaries);
}
}  // namespace

LessonSession::LessonSession(QObject* parent) : QObject(parent) {
  connect(&runs_, &RunSequence::runRequested, this, &LessonSession::runRequested);
  connect(&runs_, &RunSequence::completed, this, &LessonSession::measure);
  connect(&runs_, &RunSequence::failed, this, [this](const QString& why) { fail(why + tr("; the lesson stops here.")); });
}

bool LessonSession::start(const lessons::Lesson& lesson) {
  if (active_) {
    emit failed(qs(lesson.name), tr("A lesson is already running."));
    return false;
  }
  std::vector<RunSequence::Item> runs;
  for (int i = 0; i < int(lesson.runs.size()); ++i) {
    auto plan = lessons::lesson_plan(lesson, i, steps_);
    if (!plan.ok()) {
      emit failed(qs(lesson.name), qs(plan.error().describe()));
      return false;
    }
    runs.push_back({std::move(plan).value(), qs(lesson.runs[std::size_t(i)].label)});
  }
  lesson_ = lesson;
  loom_answer_ = predictAnswer(lesson);
  active_ = true;
  ++generation_;
  if (runs_.start(std::move(runs))) return true;
  fail(tr("The lesson has no runs."));
  return false;
}

predict::LessonAnswer LessonSession::predictAnswer(const lessons::Lesson& lesson) const {
  auto store = store::RunStore::open(db_path_.toStdString());
  if (!store.ok()) return {std::nullopt, store.error().message};
  auto calibration = predict::calibrate(*store, machine::host_name());
  if (!calibration.ok()) return {std::nullopt, calibration.error().message};
  return predict::predicted_lesson_answer(lesson, steps_, *calibration, {machine::cores_available(), nullptr});
}

void LessonSession::cancel() {
  runs_.cancel();
  active_ = false;
  ++generation_;
}

// Off the GUI thread: reading a run's report walks all its events.
void LessonSession::measure(const QList<qint64>& ids) {
  QPointer<LessonSession> self(this);
  const quint64 generation = generation_;
  QThreadPool::globalInstance()->start([self, generation, path = db_path_.toStdString(), lesson = *lesson_, ids] {
    Expected<double> value = measure_runs(path, lesson, ids);
    QMetaObject::invokeMethod(qApp, [self, generation, value = std::move(value), name = qs(lesson.name), ids] {
      if (!self || generation != self->generation_) return;
      self->active_ = false;
      if (!value.ok()) return self->fail(qs(value.error().describe()));
      emit self->measured(name, *value, ids);
    });
  });
}

void LessonSession::fail(const QString& message) {
  active_ = false;
  emit failed(lesson_ ? qs(lesson_->name) : QString(), message);
}

}  // namespace loom::ui
