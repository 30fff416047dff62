// One lesson being run in the workbench: its plans one after another, then its answer
// measured from the stored runs with the same code as `loom-cli lesson`
// (loom/lessons/lesson.h over host::run_report_json). The runs go through a RunSequence,
// so the main window starts them itself and the student watches them live like any other.
#pragma once

#include <QList>
#include <QObject>
#include <QString>

#include <optional>
#include <vector>

#include "loom/core/plan.h"
#include "loom/lessons/lesson.h"
#include "loom/predict/lesson_answer.h"
#include "loom/trace/records.h"
#include "loom/ui/workbench/run_sequence.h"

namespace loom::ui {

class LessonSession : public QObject {
  Q_OBJECT

 public:
  explicit LessonSession(QObject* parent = nullptr);

  void setDbPath(const QString& path) { db_path_ = path; }
  // Trains every run this many steps instead of the lesson's (tests, short labs).
  void setStepsOverride(std::optional<int> steps) { steps_ = steps; }
  bool isActive() const { return active_; }
  // What Loom's predictor said the answer would be, worked out as the session started
  // (before its runs), from the store's earlier runs.
  const predict::LessonAnswer& loomAnswer() const { return loom_answer_; }

  // Builds the lesson's plans and requests the first run; false (with failed emitted)
  // when a plan does not build or a session is already active.
  bool start(const lessons::Lesson& lesson);
  // Forgets the session (the runs already made stay stored).
  void cancel();
  // Ends the session with failed(reason): a requested run could not start.
  void abandon(const QString& reason) { runs_.abandon(reason); }

 public slots:
  // Every run's end, from the main window; the session takes the one it asked for.
  void onRunFinished(qint64 runId, loom::trace::RunStatus status, const QString& error) {
    runs_.onRunFinished(runId, status, error);
  }

 signals:
  void runRequested(const loom::Plan& plan, const QString& label, int index, int count);
  void measured(const QString& lesson, double value, const QList<qint64>& runIds);
  void failed(const QString& lesson, const QString& message);

 private:
  predict::LessonAnswer predictAnswer(const lessons::Lesson& lesson) const;
  void measure(const QList<qint64>& ids);
  void fail(const QString& message);

  QString db_path_;
  std::optional<int> steps_;
  bool active_ = false;
  std::optional<lessons::Lesson> lesson_;
  RunSequence runs_;
  quint64 generation_ = 0;  // a measurement of a cancelled session is dropped
  predict::LessonAnswer loom_answer_;
};

}  // namespace loom::ui
