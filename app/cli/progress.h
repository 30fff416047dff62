// A one-line progress bar for terminals: step, loss, samples/s and time left, redrawn at
// most ten times a second so printing never slows training.
#pragma once

#include <cstdint>
#include <cstdio>

#include "loom/engine/training_loop.h"

namespace loom::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::FILE* out);  // draws only when `out` is a terminal
  void update(const engine::StepProgress& p);
  void finish();  // ends the line

 private:
  std::FILE* out_;
  bool enabled_;
  std::int64_t last_draw_ns_ = 0;
  bool drawn_ = false;
};

std::string format_duration(double seconds);  // "1:05" or "1:02:03"

}  // namespace loom::cli
