// "Loom predicted" in a lesson: the answer a lesson measures (a figure of one run, or its
// ratio to another's), predicted for the lesson's plans from this machine's runs before
// the lesson runs them. Shared by `loom-cli lesson` and the workbench's Lessons dock.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "loom/lessons/lesson.h"
#include "loom/predict/figures.h"

namespace loom::predict {

struct LessonAnswer {
  std::optional<double> value;
  std::string why_not;   // when there is none: a missing cost, a figure not predicted
  std::size_t runs = 0;  // the runs the calibration came from
};

LessonAnswer predicted_lesson_answer(const lessons::Lesson& lesson, std::optional<int> steps, const Calibration& calibration,
                                     const MachineShape& machine);

}  // namespace loom::predict
