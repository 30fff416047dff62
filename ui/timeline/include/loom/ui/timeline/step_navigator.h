// The step navigator of a TimelineView: "step 120 of 300", previous and next step, a step
// number to jump to, and a micro-batch to zoom into, from the Step spans and the events'
// micro-batch numbers (TimelineData's step index). The step shown is the one under the
// middle of the visible window, so it follows wheel zoom and drags too.
//
// Keys (window-wide, so they work wherever the focus is except in a text field):
//   [ and ]  previous / next step, zoomed to the whole step
//   { and }  previous / next micro-batch of the step
// TimelineView puts one in its header; a main window may move it into a toolbar
// (QToolBar::addWidget reparents it) since it only talks to its view.
#pragma once

#include <QString>
#include <QWidget>

class QAction;
class QComboBox;
class QLabel;
class QSpinBox;
class QToolButton;

namespace loom::ui::timeline {

class TimelineView;

class StepNavigator : public QWidget {
  Q_OBJECT
 public:
  explicit StepNavigator(TimelineView* view, QWidget* parent = nullptr);

  int currentStep() const { return step_; }  // -1 without steps
  int stepCount() const;
  QString text() const;  // "step 120 of 300", "steps 3–40 of 300", "no steps yet"

  void previousStep();
  void nextStep();
  void zoomToStep(int step);
  // The micro-batch's events over every rank, the others faded (TimelineView::setHighlight)
  // until another step is shown; false when the step has none.
  bool zoomToMicrobatch(int step, int microbatch);
  void previousMicrobatch();
  void nextMicrobatch();

  // Compact: "◀ [120] /300 ▶", without the word "step", the steps in view and the
  // micro-batch box (the { } keys still work), for a narrow timeline. widthHint says how
  // wide each form wants to be, so the owner can choose before laying out.
  void setCompact(bool on);
  bool compact() const { return compact_; }
  int widthHint(bool compact) const;

  QAction* previousStepAction() const { return prev_step_; }
  QAction* nextStepAction() const { return next_step_; }
  QAction* previousMicrobatchAction() const { return prev_mb_; }
  QAction* nextMicrobatchAction() const { return next_mb_; }

 public slots:
  void refresh();  // after a data or viewport change

 private:
  void fillMicrobatches(int count);
  void showCountText();

  TimelineView* view_;
  QToolButton* prev_button_;
  QToolButton* next_button_;
  QLabel* step_label_;
  QSpinBox* spin_;
  QLabel* count_label_;
  QComboBox* microbatch_;
  QAction* prev_step_;
  QAction* next_step_;
  QAction* prev_mb_;
  QAction* next_mb_;
  bool compact_ = false;
  QString count_text_, compact_count_text_;
  int step_ = -1;
  int microbatch_shown_ = -1;  // micro-batch the view was last zoomed to, in step_
  int first_in_view_ = -1, last_in_view_ = -1;
};

}  // namespace loom::ui::timeline
