// Waiting in the screenshot programs (loom-screenshots, loom-timeline-shots,
// loom-compare-shots, loom-state-shots): the event loop runs while they wait, so views
// repaint and runs stream in before a picture is taken.
#pragma once

#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QTimer>

#include <functional>

namespace loom::shots {

// An event loop that sleeps between events, as the workbench's own does: the earlier
// loop of processEvents calls spun a core, which on a 2-core machine slowed the runs it
// pictured (calibration runs in loom-predict-shots took 1.5-3.4x their `loom-cli calibrate` time).
inline void wait_ms(int ms) {
  QEventLoop loop;
  QTimer::singleShot(ms, &loop, &QEventLoop::quit);
  loop.exec();
}

// Until done() or ms have passed; done()'s last answer.
inline bool wait_for(const std::function<bool()>& done, int ms) {
  QElapsedTimer clock;
  clock.start();
  while (!done() && clock.elapsed() < ms) wait_ms(50);
  return done();
}

}  // namespace loom::shots
