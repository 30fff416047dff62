// Lessons: one idea of parallel training each, taught on real runs. A lesson is a data
// file under resources/lessons/ (format in docs/lessons.md), compiled into this library
// with the example plans it runs. This library reads and checks lessons, builds their
// plans and measures their answer from the runs' summaries (`loom-cli show --json`); the
// caller runs the plans (loom-cli in the terminal, the workbench's Lessons dock), so both
// score a student the same way.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/core/plan.h"
#include "loom/core/status.h"

namespace loom::lessons {

// One run of a lesson: an example plan with some fields set (JSON pointer -> value).
struct LessonRun {
  std::string label;      // "2 replicas"
  std::string plan_file;  // a file of resources/plans
  nlohmann::json set = nlohmann::json::object();
};

// The measured answer: a figure of one run's summary, or its ratio to another run's.
struct AnswerSpec {
  std::string figure;  // a JSON pointer into `loom-cli show --json`, e.g. "/samples_per_s"
  int run = 0;
  std::optional<int> relative_to;  // the answer is figure(run) / figure(relative_to)
};

// A place to look after the runs: a run, optionally a rank, a span kind ("allreduce",
// as event_kind_name spells it) and a step.
struct Hint {
  std::string text;
  int run = 0;
  std::optional<int> rank;
  std::optional<std::string> kind;
};

struct Lesson {
  std::string name;   // the file's stem: `loom-cli lesson NAME`
  int order = 0;      // place in the list
  std::string title;
  std::vector<std::string> explanation;  // paragraphs, plain words
  std::string formula;                   // "" where the idea has none
  std::vector<LessonRun> runs;
  std::string question;  // asked before running; answered with a number in `unit`
  std::string unit;
  AnswerSpec answer;
  std::optional<double> theory;  // what the textbook formula predicts, where it does
  std::string theory_why;
  std::vector<std::string> after;  // what the measurement shows, read after the runs
  std::vector<Hint> hints;
};

// Reads one lesson file; errors name the lesson and the field ("runs[1].plan: ...").
Expected<Lesson> parse_lesson(std::string_view name, std::string_view json_text);

// Every lesson compiled in, in their order. An unreadable lesson file is a build defect
// (test_lessons checks them all); it is reported, not skipped.
Expected<std::vector<Lesson>> builtin_lessons();
Expected<Lesson> find_lesson(std::string_view name);

// The plan of run `run`, with the lesson's fields set and, when given, training.steps
// replaced (shortened lessons in tests and quick labs). Errors name the lesson, the run
// and the plan's field.
Expected<Plan> lesson_plan(const Lesson& lesson, int run, std::optional<int> steps = std::nullopt);

// Every run's plan builds and validates, the answer and hints name runs that exist and
// ranks within their run's world size.
Status check_lesson(const Lesson& lesson);

// The answer from each run's summary (summaries[i] is run i's `show --json`). An error
// names the figure when a summary lacks it or it is not a finite number.
Expected<double> measure_answer(const Lesson& lesson, const std::vector<nlohmann::json>& summaries);

// How far a prediction was: (prediction - measured) / |measured|; NaN when measured is 0.
double relative_error(double prediction, double measured);

// The error in words: "25% below the measured value", "105% above the measured value",
// "the measured value" (within 0.5%); empty when it has no size (measured 0).
std::string prediction_error_words(double prediction, double measured);

// For an answer that is a speedup (a ratio in "x" of one run's samples/s or time to
// another's) measured below 1: why the parallel run was the slower one, with this
// machine's hardware threads; empty otherwise.
std::string slowdown_note(const Lesson& lesson, double measured, int hardware_threads);

}  // namespace loom::lessons
