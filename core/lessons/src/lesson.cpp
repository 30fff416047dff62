#include "loom/lessons/lesson.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <tuple>

#include "embedded.h"

namespace loom::lessons {

namespace {

using nlohmann::json;

constexpr std::string_view kFormat = "loom-lesson/1";

Error lesson_error(std::string_view lesson, const std::string& field, const std::string& what) {
  return make_error(ErrorCode::InvalidArgument,
                    "lesson '" + std::string(lesson) + "': " + (field.empty() ? "" : field + ": ") + what,
                    "lesson files are described in docs/lessons.md");
}

// Reads lesson fields, remembering the first problem with the field's path.
class Reader {
 public:
  explicit Reader(std::string_view lesson) : lesson_(lesson) {}

  std::string text(const json& parent, const std::string& key, const std::string& path, bool required = true) {
    const auto it = parent.find(key);
    if (it == parent.end()) {
      if (required) fail(path + key, "missing (a text)");
      return {};
    }
    if (!it->is_string() || (required && it->get_ref<const std::string&>().empty())) {
      fail(path + key, "must be a non-empty text");
      return {};
    }
    return it->get<std::string>();
  }

  std::optional<int> index(const json& parent, const std::string& key, const std::string& path, bool required) {
    const auto it = parent.find(key);
    if (it == parent.end()) {
      if (required) fail(path + key, "missing (a whole number from 0)");
      return std::nullopt;
    }
    if (!it->is_number_integer() || it->get<long long>() < 0 || it->get<long long>() > 1000) {
      fail(path + key, "must be a whole number from 0 to 1000");
      return std::nullopt;
    }
    return it->get<int>();
  }

  std::vector<std::string> paragraphs(const json& parent, const std::string& key, bool required) {
    std::vector<std::string> out;
    const auto it = parent.find(key);
    if (it == parent.end()) {
      if (required) fail(key, "missing (a list of paragraphs)");
      return out;
    }
    if (!it->is_array() || (required && it->empty())) {
      fail(key, "must be a list of paragraphs (texts)");
      return out;
    }
    for (std::size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string()) fail(key + "[" + std::to_string(i) + "]", "must be a text");
      else out.push_back((*it)[i].get<std::string>());
    }
    return out;
  }

  void fail(const std::string& field, const std::string& what) {
    if (!error_) error_ = lesson_error(lesson_, field, what);
  }
  const std::optional<Error>& error() const { return error_; }

 private:
  std::string_view lesson_;
  std::optional<Error> error_;
};

std::vector<LessonRun> read_runs(Reader& r, const json& doc) {
  std::vector<LessonRun> runs;
  const auto it = doc.find("runs");
  if (it == doc.end() || !it->is_array() || it->empty() || it->size() > 8) {
    r.fail("runs", "must be a list of 1 to 8 runs");
    return runs;
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const std::string path = "runs[" + std::to_string(i) + "].";
    const json& run = (*it)[i];
    if (!run.is_object()) {
      r.fail(path.substr(0, path.size() - 1), "must be an object");
      continue;
    }
    LessonRun lr;
    lr.label = r.text(run, "label", path);
    lr.plan_file = r.text(run, "plan", path);
    if (auto set = run.find("set"); set != run.end()) {
      if (!set->is_object()) r.fail(path + "set", "must be an object of JSON pointers to values");
      else lr.set = *set;
    }
    runs.push_back(std::move(lr));
  }
  return runs;
}

AnswerSpec read_answer(Reader& r, const json& doc) {
  AnswerSpec a;
  const auto it = doc.find("answer");
  if (it == doc.end() || !it->is_object()) {
    r.fail("answer", "missing (an object: figure, run, relative_to)");
    return a;
  }
  a.figure = r.text(*it, "figure", "answer.");
  try {
    if (a.figure.empty() || a.figure.front() != '/') throw std::invalid_argument("not a pointer");
    (void)json::json_pointer(a.figure);
  } catch (const std::exception&) {
    r.fail("answer.figure", "must be a JSON pointer into `loom-cli show --json`, e.g. /samples_per_s");
  }
  a.run = r.index(*it, "run", "answer.", true).value_or(0);
  a.relative_to = r.index(*it, "relative_to", "answer.", false);
  return a;
}

std::vector<Hint> read_hints(Reader& r, const json& doc) {
  std::vector<Hint> hints;
  const auto it = doc.find("hints");
  if (it == doc.end()) return hints;
  if (!it->is_array()) {
    r.fail("hints", "must be a list");
    return hints;
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const std::string path = "hints[" + std::to_string(i) + "].";
    const json& h = (*it)[i];
    if (!h.is_object()) {
      r.fail(path.substr(0, path.size() - 1), "must be an object");
      continue;
    }
    Hint hint;
    hint.text = r.text(h, "text", path);
    hint.run = r.index(h, "run", path, true).value_or(0);
    hint.rank = r.index(h, "rank", path, false);
    const std::string kind = r.text(h, "kind", path, false);
    if (!kind.empty()) hint.kind = kind;
    hints.push_back(std::move(hint));
  }
  return hints;
}

void read_theory(Reader& r, const json& doc, Lesson& lesson) {
  const auto it = doc.find("theory");
  if (it == doc.end()) return;
  if (!it->is_object() || !it->contains("value") || !(*it)["value"].is_number()) {
    r.fail("theory", "must be an object with a number 'value' and a text 'why'");
    return;
  }
  lesson.theory = (*it)["value"].get<double>();
  lesson.theory_why = r.text(*it, "why", "theory.");
}

const std::string* embedded_text(std::string_view path) {
  for (const EmbeddedFile& f : embedded_files())
    if (f.path == path) return &f.text;
  return nullptr;
}

std::string stem_of(std::string_view path) {
  std::string_view name = path.substr(path.rfind('/') + 1);
  return std::string(name.substr(0, name.rfind('.')));
}

}  // namespace

Expected<Lesson> parse_lesson(std::string_view name, std::string_view json_text) {
  json doc = json::parse(json_text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return lesson_error(name, "", "not a JSON object");
  Reader r(name);
  Lesson lesson;
  lesson.name = std::string(name);
  if (doc.value("format", std::string()) != kFormat) r.fail("format", "must be \"" + std::string(kFormat) + "\"");
  lesson.order = r.index(doc, "order", "", true).value_or(0);
  lesson.title = r.text(doc, "title", "");
  lesson.explanation = r.paragraphs(doc, "explanation", true);
  lesson.formula = r.text(doc, "formula", "", false);
  lesson.runs = read_runs(r, doc);
  lesson.question = r.text(doc, "question", "");
  lesson.unit = r.text(doc, "unit", "");
  lesson.answer = read_answer(r, doc);
  read_theory(r, doc, lesson);
  lesson.after = r.paragraphs(doc, "after", false);
  lesson.hints = read_hints(r, doc);
  if (r.error()) return *r.error();
  return lesson;
}

Expected<std::vector<Lesson>> builtin_lessons() {
  std::vector<Lesson> lessons;
  for (const EmbeddedFile& f : embedded_files()) {
    if (!f.path.starts_with("lessons/")) continue;
    auto lesson = parse_lesson(stem_of(f.path), f.text);
    if (!lesson.ok()) return lesson.error();
    lessons.push_back(std::move(lesson).value());
  }
  std::sort(lessons.begin(), lessons.end(),
            [](const Lesson& a, const Lesson& b) { return std::tie(a.order, a.name) < std::tie(b.order, b.name); });
  return lessons;
}

Expected<Lesson> find_lesson(std::string_view name) {
  auto all = builtin_lessons();
  if (!all.ok()) return all.error();
  for (Lesson& l : *all)
    if (l.name == name) return std::move(l);
  std::string names;
  for (const Lesson& l : *all) names += (names.empty() ? "" : ", ") + l.name;
  return make_error(ErrorCode::NotFound, "no lesson named '" + std::string(name) + "'", "the lessons: " + names);
}

Expected<Plan> lesson_plan(const Lesson& lesson, int run, std::optional<int> steps) {
  if (run < 0 || std::size_t(run) >= lesson.runs.size())
    return lesson_error(lesson.name, "", "has no run " + std::to_string(run));
  const LessonRun& spec = lesson.runs[std::size_t(run)];
  const std::string field = "runs[" + std::to_string(run) + "]";
  const std::string* text = embedded_text("plans/" + spec.plan_file);
  if (!text) return lesson_error(lesson.name, field + ".plan", "no example plan '" + spec.plan_file + "'");
  json plan = json::parse(*text, nullptr, false);
  if (plan.is_discarded()) return lesson_error(lesson.name, field + ".plan", "'" + spec.plan_file + "' is not JSON");
  for (const auto& [pointer, value] : spec.set.items()) {
    try {
      plan[json::json_pointer(pointer)] = value;
    } catch (const json::exception& e) {
      return lesson_error(lesson.name, field + ".set", "'" + pointer + "': " + e.what());
    }
  }
  if (steps) plan["training"]["steps"] = *steps;
  PlanResult parsed = parse_plan(plan.dump());
  if (!parsed.ok()) {
    const PlanError& first = parsed.errors.front();
    return lesson_error(lesson.name, field + " (" + spec.plan_file + ")", first.path + ": " + first.reason);
  }
  return std::move(*parsed.plan);
}

Status check_lesson(const Lesson& lesson) {
  std::vector<int> world;
  for (int i = 0; i < int(lesson.runs.size()); ++i) {
    auto plan = lesson_plan(lesson, i);
    if (!plan.ok()) return plan.error();
    world.push_back(world_size(*plan));
  }
  const int runs = int(lesson.runs.size());
  if (lesson.answer.run >= runs) return lesson_error(lesson.name, "answer.run", "no such run");
  if (lesson.answer.relative_to && *lesson.answer.relative_to >= runs)
    return lesson_error(lesson.name, "answer.relative_to", "no such run");
  for (std::size_t i = 0; i < lesson.hints.size(); ++i) {
    const Hint& h = lesson.hints[i];
    const std::string field = "hints[" + std::to_string(i) + "]";
    if (h.run >= runs) return lesson_error(lesson.name, field + ".run", "no such run");
    if (h.rank && *h.rank >= world[std::size_t(h.run)])
      return lesson_error(lesson.name, field + ".rank", "run " + std::to_string(h.run) + " has " +
                                                            std::to_string(world[std::size_t(h.run)]) + " ranks");
  }
  return {};
}

Expected<double> measure_answer(const Lesson& lesson, const std::vector<nlohmann::json>& summaries) {
  auto figure_of = [&](int run) -> Expected<double> {
    if (run < 0 || std::size_t(run) >= summaries.size())
      return lesson_error(lesson.name, "answer", "no summary of run " + std::to_string(run));
    const json::json_pointer pointer(lesson.answer.figure);
    const json& summary = summaries[std::size_t(run)];
    if (!summary.contains(pointer) || !summary[pointer].is_number())
      return make_error(ErrorCode::NotFound, "run " + std::to_string(run) + " (" + lesson.runs[std::size_t(run)].label +
                                                 ") has no figure " + lesson.answer.figure,
                        "the run may have failed or stopped early: see `loom-cli show`");
    return summary[pointer].get<double>();
  };
  auto value = figure_of(lesson.answer.run);
  if (!value.ok() || !lesson.answer.relative_to) return value;
  auto base = figure_of(*lesson.answer.relative_to);
  if (!base.ok()) return base;
  if (*base == 0)
    return make_error(ErrorCode::InvalidArgument, "the answer divides by " + lesson.answer.figure + " of run " +
                                                      std::to_string(*lesson.answer.relative_to) + ", which is 0");
  return *value / *base;
}

double relative_error(double prediction, double measured) {
  if (measured == 0 || !std::isfinite(measured)) return std::numeric_limits<double>::quiet_NaN();
  return (prediction - measured) / std::fabs(measured);
}

std::string prediction_error_words(double prediction, double measured) {
  const double error = relative_error(prediction, measured);
  if (!std::isfinite(error)) return {};
  const long percent = std::lround(std::fabs(error) * 100);
  if (percent == 0) return "the measured value";
  return std::to_string(percent) + "% " + (error > 0 ? "above" : "below") + " the measured value";
}

std::string slowdown_note(const Lesson& lesson, double measured, int hardware_threads) {
  const bool speedup = lesson.unit == "x" && lesson.answer.relative_to && lesson.answer.figure == "/samples_per_s";
  if (!speedup || !(measured < 1.0)) return {};
  char text[512];
  std::snprintf(text, sizeof text,
                "Below 1 x means a slowdown: the run with more ranks processed fewer samples per second. "
                "This machine has %d hardware thread%s. When the ranks (and their communication) outnumber "
                "them, ranks take turns on the cores instead of computing at once, and the all-reduce each "
                "step adds work a single process does not do. The Breakdown shows both: descheduled time "
                "and exposed communication.",
                hardware_threads, hardware_threads == 1 ? "" : "s");
  return text;
}

}  // namespace loom::lessons
