// The Lessons dock: the lesson list with each one's progress, the chosen lesson's
// explanation and question, a box for the student's prediction and a Run button; after
// the runs, the prediction, the measured value and the theory side by side with the
// error, then what the measurement shows and where to look (each hint a link that opens
// its run). When a lesson ends, the run its question asked about is opened. Progress (the
// last prediction and measurement of each lesson) is kept in QSettings under lessons/; the
// list ticks lessons done without giving their answers away.
#pragma once

#include <QWidget>

#include <vector>

#include "loom/lessons/lesson.h"

class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QTextBrowser;

namespace loom::ui {

class LessonResultModel;
class LessonSession;

class LessonPanel : public QWidget {
  Q_OBJECT

 public:
  explicit LessonPanel(LessonSession* session, QWidget* parent = nullptr);

  // Shows the lesson of that name; false when there is none.
  bool selectLesson(const QString& name);
  QString currentLesson() const;
  // The last result's answers (ui/models), as the result's table shows them; empty
  // until a lesson is measured.
  const LessonResultModel* resultModel() const { return result_model_; }

 signals:
  void openRunRequested(qint64 runId);  // a hint's link, or the answer's run when a lesson ends

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void layOut();
  void connectSignals();
  void fitListToLessons();
  void showLesson(int row);
  void runLesson();
  void onRunRequested(const QString& label, int index, int count);
  void onMeasured(const QString& lesson, double value, const QList<qint64>& runIds);
  void onFailed(const QString& lesson, const QString& message);
  void refreshProgress();
  const lessons::Lesson* current() const;

  LessonSession* session_;
  std::vector<lessons::Lesson> lessons_;
  QListWidget* list_;
  QTextBrowser* text_;
  QLineEdit* prediction_;
  QLabel* unit_;
  QPushButton* run_;
  QLabel* status_;
  QTextBrowser* result_;
  LessonResultModel* result_model_;
  QString result_html_;  // the result on show, read again when the palette changes
};

}  // namespace loom::ui
