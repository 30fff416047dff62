// `loom-cli lesson`: a lesson of resources/lessons run in the terminal. It asks for the
// student's prediction, runs the lesson's plans as `run` does, measures the answer from
// their summaries with the same code as the workbench (loom/lessons/lesson.h) and prints
// the prediction, the measurement and the theory side by side.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "commands.h"
#include "loom/predict/lesson_answer.h"
#include "loom/trace/machine.h"
#include "loom/host/run_report.h"
#include "loom/lessons/lesson.h"

namespace loom::cli {

namespace {

using lessons::Lesson;

void print_list(const std::vector<Lesson>& all) {
  std::printf("Lessons (run one with `loom-cli lesson NAME`):\n\n");
  for (const Lesson& l : all)
    std::printf("  %2d  %-22s %s (%zu run%s)\n", l.order, l.name.c_str(), l.title.c_str(), l.runs.size(),
                l.runs.size() == 1 ? "" : "s");
}

void print_list_json(const std::vector<Lesson>& all) {
  nlohmann::json out = nlohmann::json::array();
  for (const Lesson& l : all) out.push_back({{"name", l.name}, {"order", l.order}, {"title", l.title}, {"runs", l.runs.size()}});
  std::printf("%s\n", out.dump().c_str());
}

void print_paragraphs(const std::vector<std::string>& paragraphs) {
  for (const std::string& p : paragraphs) std::printf("%s\n\n", p.c_str());
}

void print_intro(const Lesson& l) {
  std::printf("%s\n%s\n\n", l.title.c_str(), std::string(l.title.size(), '=').c_str());
  print_paragraphs(l.explanation);
  if (!l.formula.empty()) std::printf("  %s\n\n", l.formula.c_str());
  std::printf("Question: %s (%s)\n", l.question.c_str(), l.unit.c_str());
}

std::optional<double> parse_number(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

// --predict, else a line typed at the terminal; nothing when not asked interactively.
std::optional<double> read_prediction(const Args& args, bool& bad) {
  if (args.predict) {
    auto v = parse_number(*args.predict);
    bad = !v;
    return v;
  }
  if (args.json || !isatty(STDIN_FILENO)) return std::nullopt;
  std::printf("Your prediction (a number, or Enter to skip): ");
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line)) return std::nullopt;
  return parse_number(line);
}

struct LessonOutcome {
  std::vector<std::int64_t> run_ids;
  double measured = 0;
};

Expected<LessonOutcome> run_lesson(const Lesson& lesson, std::optional<int> steps, store::RunStore& store, bool quiet) {
  LessonOutcome out;
  std::vector<nlohmann::json> summaries;
  for (int i = 0; i < int(lesson.runs.size()); ++i) {
    auto plan = lessons::lesson_plan(lesson, i, steps);
    if (!plan.ok()) return plan.error();
    if (!quiet) std::fprintf(stderr, "\nRun %d of %zu: %s\n", i + 1, lesson.runs.size(), lesson.runs[std::size_t(i)].label.c_str());
    auto id = run_for_lesson(*plan, store);
    if (!id.ok()) return id.error();
    out.run_ids.push_back(*id);
    auto report = host::run_report(store, *id);
    if (!report.ok()) return report.error();
    summaries.push_back(host::run_report_json(*report));
  }
  auto measured = lessons::measure_answer(lesson, summaries);
  if (!measured.ok()) return measured.error();
  out.measured = *measured;
  return out;
}

// What Loom's predictor says the answer will be, from this machine's runs so far (before
// the lesson's own runs).
predict::LessonAnswer predict_answer(const Lesson& lesson, std::optional<int> steps, store::RunStore& store) {
  auto calibration = predict::calibrate(store, machine::host_name());
  if (!calibration.ok()) return {std::nullopt, calibration.error().message};
  return predict::predicted_lesson_answer(lesson, steps, *calibration, {machine::cores_available(), nullptr});
}

std::string number_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, std::fabs(v) >= 100 ? "%.0f" : std::fabs(v) >= 10 ? "%.1f" : "%.2f", v);
  return text;
}

void print_result(const Lesson& l, const LessonOutcome& o, std::optional<double> prediction, const predict::LessonAnswer& loom) {
  std::printf("\nRuns:");
  for (std::size_t i = 0; i < o.run_ids.size(); ++i)
    std::printf("%s %s = run %lld", i ? "," : "", l.runs[i].label.c_str(), static_cast<long long>(o.run_ids[i]));
  std::printf("\n\n");
  std::printf("  measured:    %s %s\n", number_text(o.measured).c_str(), l.unit.c_str());
  if (l.theory)
    std::printf("  theory:      %s %s  (%s)\n", number_text(*l.theory).c_str(), l.unit.c_str(), l.theory_why.c_str());
  if (prediction) {
    const std::string error = lessons::prediction_error_words(*prediction, o.measured);
    std::printf("  you said:    %s %s", number_text(*prediction).c_str(), l.unit.c_str());
    if (!error.empty()) std::printf("  (%s)", error.c_str());
    std::printf("\n");
  }
  if (loom.value) {
    const std::string error = lessons::prediction_error_words(*loom.value, o.measured);
    std::printf("  Loom predicted: %s %s  (%s%sfrom %zu earlier run%s on this machine)\n", number_text(*loom.value).c_str(),
                l.unit.c_str(), error.c_str(), error.empty() ? "" : "; ", loom.runs, loom.runs == 1 ? "" : "s");
  } else {
    std::printf("  Loom predicted: -  (%s)\n", loom.why_not.c_str());
  }
  std::printf("\n");
  const std::string slowdown = lessons::slowdown_note(l, o.measured, int(std::thread::hardware_concurrency()));
  if (!slowdown.empty()) print_paragraphs({slowdown});
  print_paragraphs(l.after);
  if (!l.hints.empty()) std::printf("Look here (`loom-cli show ID`, or open the run in the workbench):\n");
  for (const lessons::Hint& h : l.hints) {
    std::printf("  - the %s run (`loom-cli show %lld`)", l.runs[std::size_t(h.run)].label.c_str(),
                static_cast<long long>(o.run_ids[std::size_t(h.run)]));
    if (h.rank) std::printf(", rank %d", *h.rank);
    if (h.kind) std::printf(", %s spans", h.kind->c_str());
    std::printf(": %s\n", h.text.c_str());
  }
}

void print_result_json(const Lesson& l, const LessonOutcome& o, std::optional<double> prediction, const predict::LessonAnswer& loom) {
  nlohmann::json runs = nlohmann::json::array();
  for (std::size_t i = 0; i < o.run_ids.size(); ++i) runs.push_back({{"label", l.runs[i].label}, {"id", o.run_ids[i]}});
  auto number = [](std::optional<double> v) { return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(); };
  const nlohmann::json error = prediction ? number(lessons::relative_error(*prediction, o.measured)) : nlohmann::json();
  const nlohmann::json out = {{"lesson", l.name},          {"title", l.title},     {"question", l.question},
                              {"unit", l.unit},            {"figure", l.answer.figure}, {"runs", runs},
                              {"measured", o.measured},    {"theory", number(l.theory)},
                              {"prediction", number(prediction)}, {"error", error}};
  nlohmann::json with_loom = out;
  with_loom["loom_predicted"] = number(loom.value);
  if (!loom.value) with_loom["loom_predicted_why_not"] = loom.why_not;
  std::printf("%s\n", with_loom.dump().c_str());
}

}  // namespace

int cmd_lesson(const Args& args) {
  if (args.positional.empty()) {
    auto all = lessons::builtin_lessons();
    if (!all.ok()) {
      print_error(all.error());
      return kFailed;
    }
    args.json ? print_list_json(*all) : print_list(*all);
    return kOk;
  }
  auto lesson = lessons::find_lesson(args.positional[0]);
  if (!lesson.ok()) {
    print_error(lesson.error());
    return kInvalidInput;
  }
  std::optional<int> steps;
  if (args.steps) {
    char* end = nullptr;
    const long n = std::strtol(args.steps->c_str(), &end, 10);
    if (*end != '\0' || n < 1 || n > 1'000'000) {
      std::fprintf(stderr, "loom-cli: lesson: --steps needs a number of steps from 1 (got '%s')\n", args.steps->c_str());
      return kInvalidInput;
    }
    steps = int(n);
  }
  if (!args.json) print_intro(*lesson);
  bool bad_prediction = false;
  const std::optional<double> prediction = read_prediction(args, bad_prediction);
  if (bad_prediction) {
    std::fprintf(stderr, "loom-cli: lesson: --predict needs a number (got '%s')\n", args.predict->c_str());
    return kInvalidInput;
  }
  auto store = open_store(args);
  if (!store.ok()) {
    print_error(store.error());
    return kFailed;
  }
  const predict::LessonAnswer loom = predict_answer(*lesson, steps, *store);  // before the runs it predicts
  auto outcome = run_lesson(*lesson, steps, *store, args.json);
  if (!outcome.ok()) {
    print_error(outcome.error());
    return kFailed;
  }
  args.json ? print_result_json(*lesson, *outcome, prediction, loom) : print_result(*lesson, *outcome, prediction, loom);
  return kOk;
}

}  // namespace loom::cli
