// ReplayBar (replay_bar.h): the controls and the clock of a replay. The cursor moves in
// the run's own time: at speed s, one second of wall time advances it s seconds of the
// run, measured with an elapsed timer between ticks so a late tick does not slow it.
#include "loom/ui/timeline/replay_bar.h"

#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QPixmap>
#include <QSlider>
#include <QStyle>
#include <QToolButton>

#include <algorithm>
#include <cmath>

#include "loom/ui/timeline/timeline_view.h"

namespace loom::ui::timeline {
namespace {

constexpr int kTickMs = 33;          // about 30 cursor moves a second
constexpr int kSliderSteps = 10000;  // slider resolution over the run
constexpr double kFollowAt = 0.85;   // keep the cursor within this share of the window

QToolButton* tool_button(const QString& text, const QString& tip, QWidget* parent) {
  auto* b = new QToolButton(parent);
  b->setText(text);
  b->setToolTip(tip);
  b->setAutoRaise(true);
  return b;
}

}  // namespace

ReplayBar::ReplayBar(TimelineView* view, QWidget* parent) : QWidget(parent), view_(view) {
  setObjectName("ReplayBar");
  replay_ = tool_button(tr("Replay"), tr("Replay the run: the timeline shows only what had happened by the cursor, "
                                        "the charts the steps completed by then"), this);
  replay_->setCheckable(true);
  replay_->setObjectName("ReplayToggle");
  // The style's media icons: the fonts on a bare Debian lack the Unicode media symbols.
  back_ = tool_button(tr("Back"), tr("Back one step (or micro-batch)"), this);
  play_ = tool_button(tr("Play"), tr("Play / pause"), this);
  forward_ = tool_button(tr("Forward"), tr("Forward one step (or micro-batch)"), this);
  for (QToolButton* b : {back_, play_, forward_}) b->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  unit_ = new QComboBox(this);
  unit_->addItems({tr("by step"), tr("by micro-batch")});
  unit_->setToolTip(tr("What the step buttons move by"));
  speed_box_ = new QComboBox(this);
  for (double s : kSpeeds) speed_box_->addItem(QStringLiteral("%1x").arg(s), s);
  speed_box_->setCurrentIndex(3);  // 1x
  speed_box_->setToolTip(tr("Replay speed: run seconds per wall-clock second"));
  slider_ = new QSlider(Qt::Horizontal, this);
  slider_->setRange(0, kSliderSteps);
  slider_->setToolTip(tr("Drag to move the cursor through the run"));
  label_ = new QLabel(this);
  label_->setMinimumWidth(label_->fontMetrics().horizontalAdvance(QStringLiteral("000.000 s \u00b7 step 0000 of 0000")));
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(6, 2, 6, 2);
  for (QWidget* w : std::initializer_list<QWidget*>{replay_, back_, play_, forward_, unit_, speed_box_}) row->addWidget(w);
  row->addWidget(slider_, 1);
  row->addWidget(label_);
  tick_.setInterval(kTickMs);
  connect(&tick_, &QTimer::timeout, this, &ReplayBar::onTick);
  // The step count and the slider follow the run on screen (another run opened, the
  // timeline emptied, a live run's new steps), not only a replay's start and end.
  connect(view_, &TimelineView::dataChanged, this, &ReplayBar::refresh);
  connect(replay_, &QToolButton::toggled, this, &ReplayBar::setReplaying);
  connect(play_, &QToolButton::clicked, this, [this] { playing() ? pause() : play(); });
  connect(back_, &QToolButton::clicked, this, &ReplayBar::stepBack);
  connect(forward_, &QToolButton::clicked, this, &ReplayBar::stepForward);
  connect(unit_, &QComboBox::currentIndexChanged, this,
          [this](int i) { unit_kind_ = i == 1 ? ReplayUnit::Microbatch : ReplayUnit::Step; });
  connect(speed_box_, &QComboBox::currentIndexChanged, this,
          [this](int i) { speed_ = speed_box_->itemData(i).toDouble(); });
  connect(slider_, &QSlider::sliderMoved, this, [this](int value) {
    const auto& d = view_->data();
    setCursor(double(d.begin_ns()) + double(d.end_ns() - d.begin_ns()) * value / kSliderSteps);
  });
  refresh();
}

bool ReplayBar::replaying() const { return cursor_.has_value(); }

void ReplayBar::setReplaying(bool on) {
  if (on == replaying()) return;
  replay_->setChecked(on);
  if (on) {
    setCursor(double(view_->data().begin_ns()));
  } else {
    pause();
    cursor_.reset();
    view_->setReplayCursor(std::nullopt);
    emit cursorChanged(std::nullopt, view_->data().step_count());
  }
  refresh();
}

void ReplayBar::play() {
  if (!replaying()) setReplaying(true);
  if (*cursor_ >= double(view_->data().end_ns())) setCursor(double(view_->data().begin_ns()));  // from the top again
  since_tick_.start();
  tick_.start();
  refresh();
}

void ReplayBar::pause() {
  tick_.stop();
  refresh();
}

void ReplayBar::setSpeed(double speed) {
  const auto* found = std::find(std::begin(kSpeeds), std::end(kSpeeds), speed);
  if (found != std::end(kSpeeds)) speed_box_->setCurrentIndex(int(found - std::begin(kSpeeds)));
}

void ReplayBar::setUnit(ReplayUnit unit) { unit_->setCurrentIndex(unit == ReplayUnit::Microbatch ? 1 : 0); }

void ReplayBar::stepForward() { step(+1); }
void ReplayBar::stepBack() { step(-1); }

void ReplayBar::step(int direction) {
  if (!replaying()) setReplaying(true);
  pause();
  const auto to = next_boundary(replay_boundaries(view_->data(), unit_kind_), *cursor_, direction);
  setCursor(to ? *to : double(direction > 0 ? view_->data().end_ns() : view_->data().begin_ns()));
}

void ReplayBar::setCursor(double t_ns) {
  const auto& d = view_->data();
  cursor_ = std::clamp(t_ns, double(d.begin_ns()), double(std::max(d.begin_ns(), d.end_ns())));
  if (!replay_->isChecked()) replay_->setChecked(true);  // (re-enters setReplaying: no-op now)
  view_->setReplayCursor(cursor_);
  keepCursorInView();
  emit cursorChanged(cursor_, steps_completed(d, *cursor_));
  refresh();
}

void ReplayBar::onTick() {
  const double advanced = double(since_tick_.nsecsElapsed()) * speed_;
  since_tick_.restart();
  const double end = double(view_->data().end_ns());
  setCursor(*cursor_ + advanced);
  if (*cursor_ >= end) pause();
}

// The window keeps its width; when the cursor leaves it, it pages so the cursor sits near
// its left, then plays across it.
void ReplayBar::keepCursorInView() {
  const Viewport v = view_->viewport();
  const double width = v.t1_ns - v.t0_ns;
  if (*cursor_ >= v.t0_ns && *cursor_ <= v.t0_ns + kFollowAt * width) return;
  const double t0 = *cursor_ - (1.0 - kFollowAt) * width;
  view_->setViewport(Viewport{t0, t0 + width, v.width_px});
}

// The style's media icons are dark glyphs, which vanish on the dark palette: each is drawn
// in the palette's button text colour, again whenever the palette changes.
QIcon ReplayBar::paletteIcon(QStyle::StandardPixmap which) const {
  const int size = style()->pixelMetric(QStyle::PM_SmallIconSize, nullptr, this);
  QPixmap pixmap = style()->standardIcon(which, nullptr, this).pixmap(QSize(size, size), devicePixelRatioF());
  QPainter painter(&pixmap);
  painter.setCompositionMode(QPainter::CompositionMode_SourceIn);  // keep the glyph's shape, take the colour
  painter.fillRect(pixmap.rect(), palette().color(QPalette::ButtonText));
  return QIcon(pixmap);
}

void ReplayBar::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::ApplicationPaletteChange) refresh();
}

void ReplayBar::refresh() {
  const bool on = replaying();
  back_->setIcon(paletteIcon(QStyle::SP_MediaSkipBackward));
  forward_->setIcon(paletteIcon(QStyle::SP_MediaSkipForward));
  play_->setIcon(paletteIcon(playing() ? QStyle::SP_MediaPause : QStyle::SP_MediaPlay));
  play_->setText(playing() ? tr("Pause") : tr("Play"));
  const auto& d = view_->data();
  const double span = double(std::max<std::int64_t>(1, d.end_ns() - d.begin_ns()));
  if (!slider_->isSliderDown())
    slider_->setValue(on ? int(std::lround((*cursor_ - double(d.begin_ns())) / span * kSliderSteps)) : 0);
  slider_->setEnabled(d.event_count() > 0);
  if (!on) {
    label_->setText(tr("%L1 steps").arg(d.step_count()));
    return;
  }
  label_->setText(tr("%1 s \u00b7 step %2 of %3")
                      .arg(*cursor_ * 1e-9, 0, 'f', 3)
                      .arg(steps_completed(d, *cursor_))
                      .arg(d.step_count()));
}

}  // namespace loom::ui::timeline
