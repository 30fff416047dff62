// Replay of a stored run: a time cursor that plays at a chosen speed (0.1x to 10x of the
// run's own pace) or jumps from one training step (or micro-batch) boundary to the next.
// The timeline shows what had happened by the cursor (TimelineView::setReplayCursor);
// cursorChanged tells the charts how many steps had completed. A row of controls that
// sits above the timeline.
#pragma once

#include <QElapsedTimer>
#include <QIcon>
#include <QStyle>
#include <QTimer>
#include <QWidget>

#include <optional>

#include "loom/ui/timeline/replay_steps.h"

class QComboBox;
class QLabel;
class QSlider;
class QToolButton;

namespace loom::ui::timeline {

class TimelineView;

class ReplayBar : public QWidget {
  Q_OBJECT
 public:
  static constexpr double kSpeeds[] = {0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0};

  explicit ReplayBar(TimelineView* view, QWidget* parent = nullptr);

  bool replaying() const;
  void setReplaying(bool on);  // on: the cursor starts at the run's beginning, paused
  bool playing() const { return tick_.isActive(); }
  void play();
  void pause();
  void setSpeed(double speed);  // one of kSpeeds
  double speed() const { return speed_; }
  void setUnit(ReplayUnit unit);
  void stepForward();
  void stepBack();
  void setCursor(double t_ns);  // clamped to the run; keeps the cursor in the window
  std::optional<double> cursor() const { return cursor_; }

 signals:
  // nullopt: replay ended (every event shown again). completed: steps_completed at t.
  void cursorChanged(std::optional<double> t_ns, int completed);

 protected:
  void changeEvent(QEvent* event) override;

 private:
  QIcon paletteIcon(QStyle::StandardPixmap which) const;
  void onTick();
  void step(int direction);
  void refresh();
  void keepCursorInView();

  TimelineView* view_;
  QToolButton* replay_ = nullptr;
  QToolButton* back_ = nullptr;
  QToolButton* play_ = nullptr;
  QToolButton* forward_ = nullptr;
  QComboBox* unit_ = nullptr;
  QComboBox* speed_box_ = nullptr;
  QSlider* slider_ = nullptr;
  QLabel* label_ = nullptr;
  QTimer tick_;
  QElapsedTimer since_tick_;
  double speed_ = 1.0;
  ReplayUnit unit_kind_ = ReplayUnit::Step;
  std::optional<double> cursor_;
};

}  // namespace loom::ui::timeline
