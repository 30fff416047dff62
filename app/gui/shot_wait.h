// Waiting in the screenshot programs (loom-screenshots, loom-timeline-shots,
// loom-compare-shots, loom-state-shots): the event loop runs while they wait, so views
// repaint and runs stream in before a picture is taken.
#pragma once

#include <QApplication>
#include <QElapsedTimer>

#include <functional>

namespace loom::shots {

inline void wait_ms(int ms) {
  QElapsedTimer clock;
  clock.start();
  while (clock.elapsed() < ms) QApplication::processEvents(QEventLoop::AllEvents, 20);
}

// Until done() or ms have passed; done()'s last answer.
inline bool wait_for(const std::function<bool()>& done, int ms) {
  QElapsedTimer clock;
  clock.start();
  while (!done() && clock.elapsed() < ms) wait_ms(50);
  return done();
}

}  // namespace loom::shots
