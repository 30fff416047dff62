// StepNavigator (step_navigator.h). It keeps no copy of the steps: every refresh asks the
// view's TimelineData, whose step index is updated as batches arrive, so a live run's
// step count grows while it is watched.
#include "loom/ui/timeline/step_navigator.h"

#include <QAction>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QToolButton>
#include <algorithm>

#include "loom/ui/timeline/timeline_view.h"

namespace loom::ui::timeline {

namespace {

// { and } are Shift+[ and Shift+] on most layouts: the key event then carries Shift,
// which a platform without a key map (offscreen, some X setups) does not strip before
// matching, so each braced key is bound with and without Shift.
QAction* make_action(QWidget* owner, const QString& text, const QKeySequence& key) {
  auto* a = new QAction(text, owner);
  const int k = key[0].key();
  if (k == Qt::Key_BraceLeft || k == Qt::Key_BraceRight) {
    a->setShortcuts({key, QKeySequence(Qt::SHIFT | static_cast<Qt::Key>(k))});
  } else {
    a->setShortcut(key);
  }
  a->setShortcutContext(Qt::WindowShortcut);
  a->setToolTip(QStringLiteral("%1 (%2)").arg(text, key.toString(QKeySequence::NativeText)));
  owner->addAction(a);
  return a;
}

}  // namespace

StepNavigator::StepNavigator(TimelineView* view, QWidget* parent) : QWidget(parent), view_(view) {
  setObjectName(QStringLiteral("stepNavigator"));
  prev_step_ = make_action(this, tr("Previous step"), QKeySequence(Qt::Key_BracketLeft));
  next_step_ = make_action(this, tr("Next step"), QKeySequence(Qt::Key_BracketRight));
  prev_mb_ = make_action(this, tr("Previous micro-batch"), QKeySequence(Qt::Key_BraceLeft));
  next_mb_ = make_action(this, tr("Next micro-batch"), QKeySequence(Qt::Key_BraceRight));
  connect(prev_step_, &QAction::triggered, this, &StepNavigator::previousStep);
  connect(next_step_, &QAction::triggered, this, &StepNavigator::nextStep);
  connect(prev_mb_, &QAction::triggered, this, &StepNavigator::previousMicrobatch);
  connect(next_mb_, &QAction::triggered, this, &StepNavigator::nextMicrobatch);

  prev_button_ = new QToolButton(this);
  prev_button_->setDefaultAction(prev_step_);
  prev_button_->setArrowType(Qt::LeftArrow);
  prev_button_->setAutoRaise(true);
  next_button_ = new QToolButton(this);
  next_button_->setDefaultAction(next_step_);
  next_button_->setArrowType(Qt::RightArrow);
  next_button_->setAutoRaise(true);
  step_label_ = new QLabel(tr("step"), this);
  spin_ = new QSpinBox(this);
  spin_->setObjectName(QStringLiteral("stepSpin"));
  spin_->setKeyboardTracking(false);  // jump on Enter, not on every digit typed
  spin_->setToolTip(tr("The step under the middle of the timeline; type a step number to zoom to it"));
  count_label_ = new QLabel(this);
  count_label_->setObjectName(QStringLiteral("stepCount"));
  microbatch_ = new QComboBox(this);
  microbatch_->setObjectName(QStringLiteral("microbatchCombo"));
  microbatch_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  microbatch_->setToolTip(tr("Zoom to one micro-batch of the step, over every rank ({ and } step through them)"));

  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(2, 0, 2, 0);
  row->setSpacing(4);
  for (QWidget* w : std::initializer_list<QWidget*>{prev_button_, step_label_, spin_, count_label_, next_button_,
                                                    microbatch_})
    row->addWidget(w);

  connect(spin_, &QSpinBox::valueChanged, this, [this](int step) {
    if (step != step_) zoomToStep(step);
  });
  connect(microbatch_, &QComboBox::activated, this, [this](int index) {
    if (index == 0) {
      zoomToStep(step_);
    } else {
      zoomToMicrobatch(step_, index - 1);
    }
  });
  connect(view_, &TimelineView::viewportChanged, this, &StepNavigator::refresh);
  connect(view_, &TimelineView::dataChanged, this, &StepNavigator::refresh);
  refresh();
}

int StepNavigator::stepCount() const { return view_->data().step_count(); }

QString StepNavigator::text() const {
  const int n = stepCount();
  if (n == 0 || step_ < 0) return tr("no steps yet");
  if (last_in_view_ > first_in_view_)
    return tr("steps %1–%2 of %3").arg(first_in_view_).arg(last_in_view_).arg(n);
  return tr("step %1 of %2").arg(step_).arg(n);
}

void StepNavigator::refresh() {
  const TimelineData& data = view_->data();
  const int n = data.step_count();
  const Viewport v = view_->viewport();
  int step = n > 0 ? data.step_at(0.5 * (v.t0_ns + v.t1_ns)) : -1;
  if (microbatch_shown_ >= 0) {
    // A micro-batch is highlighted: it stays the navigator's step while its step fills
    // most of the window (a pipelined micro-batch reaches into its neighbours); zooming
    // out or moving away ends it, so that a wide view is never drawn faded.
    const auto r = data.step_range(step_);
    const double seen = r ? std::min(static_cast<double>(r->end_ns), v.t1_ns) -
                                std::max(static_cast<double>(r->begin_ns), v.t0_ns)
                          : 0.0;
    if (seen >= 0.5 * (v.t1_ns - v.t0_ns)) {
      step = step_;
    } else {
      microbatch_shown_ = -1;
      view_->setHighlight(-1, -1);
    }
  }
  step_ = step;
  // Steps more than a tenth in view count as shown (a neighbour's edge does not).
  first_in_view_ = last_in_view_ = -1;
  for (int k = 0; k < n; ++k) {
    const auto r = data.step_range(k);
    if (!r) continue;
    const double b = static_cast<double>(r->begin_ns), e = static_cast<double>(r->end_ns);
    const double seen = std::min(e, v.t1_ns) - std::max(b, v.t0_ns);
    if (seen <= 0.1 * std::max(e - b, 1.0)) continue;
    if (first_in_view_ < 0) first_in_view_ = k;
    last_in_view_ = k;
  }
  setEnabled(n > 0);
  {
    const QSignalBlocker block(spin_);
    spin_->setRange(0, std::max(0, n - 1));
    spin_->setValue(std::max(step, 0));
  }
  const int in_view = last_in_view_ >= first_in_view_ && first_in_view_ >= 0 ? last_in_view_ - first_in_view_ + 1 : 0;
  count_text_ = n == 0        ? tr("of 0: no steps yet")
                : in_view > 1 ? tr("of %1 (%2–%3 in view)").arg(n).arg(first_in_view_).arg(last_in_view_)
                              : tr("of %1").arg(n);
  compact_count_text_ = QStringLiteral("/%1").arg(n);
  count_label_->setToolTip(text());
  showCountText();
  prev_step_->setEnabled(step > 0);
  next_step_->setEnabled(step >= 0 && step + 1 < n);
  fillMicrobatches(step >= 0 ? data.microbatch_count(step) : 0);
}

void StepNavigator::showCountText() { count_label_->setText(compact_ ? compact_count_text_ : count_text_); }

void StepNavigator::setCompact(bool on) {
  if (on == compact_) return;
  compact_ = on;
  step_label_->setVisible(!on);
  showCountText();
  fillMicrobatches(step_ >= 0 ? view_->data().microbatch_count(step_) : 0);
  updateGeometry();
}

int StepNavigator::widthHint(bool compact) const {
  const QFontMetrics fm = count_label_->fontMetrics();
  const auto* row = layout();
  int w = row->contentsMargins().left() + row->contentsMargins().right();
  int items = 0;
  auto add = [&](int width) { w += width, ++items; };
  add(prev_button_->sizeHint().width());
  if (!compact) add(step_label_->sizeHint().width());
  add(spin_->sizeHint().width());
  add(fm.horizontalAdvance(compact ? compact_count_text_ : count_text_) + 2 * count_label_->margin() + 2);
  add(next_button_->sizeHint().width());
  if (!compact && microbatch_->count() > 1) add(microbatch_->sizeHint().width());
  return w + row->spacing() * (items - 1);
}

void StepNavigator::fillMicrobatches(int count) {
  const QSignalBlocker block(microbatch_);
  if (microbatch_->count() != count + 1) {
    microbatch_->clear();
    microbatch_->addItem(tr("whole step"));
    for (int m = 0; m < count; ++m) microbatch_->addItem(tr("micro-batch %1").arg(m));
  }
  microbatch_->setCurrentIndex(microbatch_shown_ >= 0 && microbatch_shown_ < count ? microbatch_shown_ + 1 : 0);
  microbatch_->setVisible(count > 0 && !compact_);
  prev_mb_->setEnabled(count > 0);
  next_mb_->setEnabled(count > 0);
}

void StepNavigator::previousStep() {
  if (step_ > 0) zoomToStep(step_ - 1);
}

void StepNavigator::nextStep() {
  if (step_ >= 0 && step_ + 1 < stepCount()) zoomToStep(step_ + 1);
}

void StepNavigator::zoomToStep(int step) {
  const auto r = view_->data().step_range(step);
  if (!r) return;
  microbatch_shown_ = -1;
  view_->setHighlight(-1, -1);
  view_->showRange(static_cast<double>(r->begin_ns), static_cast<double>(r->end_ns));
}

bool StepNavigator::zoomToMicrobatch(int step, int microbatch) {
  const auto ranges = view_->data().microbatch_ranges(step);
  if (microbatch < 0 || static_cast<std::size_t>(microbatch) >= ranges.size() || !ranges[microbatch]) return false;
  const TimeRange r = *ranges[static_cast<std::size_t>(microbatch)];
  view_->showRange(static_cast<double>(r.begin_ns), static_cast<double>(r.end_ns));
  // The middle of a pipelined micro-batch may lie in a neighbouring step's range: say
  // what was asked for, not what the middle falls on.
  step_ = step;
  microbatch_shown_ = microbatch;
  view_->setHighlight(step, microbatch);
  {
    const QSignalBlocker block(spin_);
    spin_->setValue(step);
  }
  fillMicrobatches(view_->data().microbatch_count(step));
  return true;
}

void StepNavigator::previousMicrobatch() {
  if (step_ < 0) return;
  if (microbatch_shown_ > 0) {
    zoomToMicrobatch(step_, microbatch_shown_ - 1);
  } else if (step_ > 0) {
    zoomToMicrobatch(step_ - 1, view_->data().microbatch_count(step_ - 1) - 1);
  }
}

void StepNavigator::nextMicrobatch() {
  if (step_ < 0) return;
  if (microbatch_shown_ + 1 < view_->data().microbatch_count(step_)) {
    zoomToMicrobatch(step_, microbatch_shown_ + 1);
  } else if (step_ + 1 < stepCount()) {
    zoomToMicrobatch(step_ + 1, 0);
  }
}

}  // namespace loom::ui::timeline
