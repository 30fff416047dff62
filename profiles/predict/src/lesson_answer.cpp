// The lesson's answer as the predictor gives it (see lesson_answer.h).
#include "loom/predict/lesson_answer.h"

namespace loom::predict {

LessonAnswer predicted_lesson_answer(const lessons::Lesson& lesson, std::optional<int> steps, const Calibration& calibration,
                                     const MachineShape& machine) {
  const std::string& pointer = lesson.answer.figure;
  auto figure = [&](int run) -> PredictedFigure {
    auto plan = lessons::lesson_plan(lesson, run, steps);
    if (!plan.ok()) return {std::nullopt, plan.error().message};
    return predicted_figure(pointer, *plan, calibration, machine);
  };
  const PredictedFigure a = figure(lesson.answer.run);
  if (!a.value) return {std::nullopt, a.why_not};
  if (!lesson.answer.relative_to) {
    if (figure_is_per_step(pointer)) return {std::nullopt, "predicted per step, measured over the run"};
    return {a.value, {}, calibration.runs.size()};
  }
  const PredictedFigure b = figure(*lesson.answer.relative_to);
  if (!b.value) return {std::nullopt, b.why_not};
  if (*b.value == 0) return {std::nullopt, "the run it is relative to is predicted at 0"};
  return {*a.value / *b.value, {}, calibration.runs.size()};
}

}  // namespace loom::predict
