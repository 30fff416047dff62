// The launch log as the window shows it. The run's stored log arrives in chunks (bytes
// appended since the last poll) that may end mid-line; LaunchLog hands out whole lines
// only, and turns the rank's one-line JSON summary ({"final_loss":0.42,"samples_per_s":
// ...}) into a sentence. QtCore only: tested without a display.
#pragma once

#include <QString>

namespace loom::ui {

class LaunchLog {
 public:
  // Takes the next chunk of the log; returns the complete lines it finished (each ending
  // in '\n'), rewritten for reading. A partial last line waits for the next chunk.
  QString append(const QString& chunk);
  // What is left of an unfinished last line, rewritten (the run ended without a newline).
  QString flush();
  void clear() { pending_.clear(); }

  // One line rewritten for reading: the rank's JSON summary as text; others unchanged.
  static QString readable(const QString& line);

 private:
  QString pending_;
};

}  // namespace loom::ui
