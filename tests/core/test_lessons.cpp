// Lessons (core/lessons): every lesson compiled in reads, its plans validate and its hints
// point at runs, ranks and span kinds that exist; malformed lesson files are refused with
// the field named; answers are measured from summaries as documented (docs/lessons.md).
#include <QtTest>

#include <cmath>
#include <set>
#include <string>

#include "loom/lessons/lesson.h"
#include "loom/test/expect.h"
#include "loom/trace/event.h"

using loom::lessons::Lesson;
using loom::testing::must;

namespace {

std::set<std::string> span_kind_names() {
  std::set<std::string> names;
  for (int k = 0; k < loom::trace::kEventKindCount; ++k)
    names.insert(std::string(loom::trace::event_kind_name(loom::trace::EventKind(k))));
  return names;
}

// A valid lesson with one field replaced or removed (a null value removes it).
std::string lesson_with(const char* key, const nlohmann::json& value) {
  nlohmann::json doc = {{"format", "loom-lesson/1"},
                        {"order", 1},
                        {"title", "t"},
                        {"explanation", {"p"}},
                        {"runs", {{{"label", "one"}, {"plan", "mlp_fashion.json"}}}},
                        {"question", "q?"},
                        {"unit", "x"},
                        {"answer", {{"figure", "/samples_per_s"}, {"run", 0}}}};
  if (value.is_null()) doc.erase(key);
  else doc[key] = value;
  return doc.dump();
}

}  // namespace

class TestLessons : public QObject {
  Q_OBJECT

 private slots:
  void everyLessonIsValid() {
    const auto lessons = must(loom::lessons::builtin_lessons());
    QVERIFY(lessons.size() >= 3);
    const auto kinds = span_kind_names();
    std::set<std::string> names;
    for (const Lesson& l : lessons) {
      QVERIFY2(names.insert(l.name).second, l.name.c_str());
      const auto checked = loom::lessons::check_lesson(l);
      QVERIFY2(checked.ok(), checked.ok() ? "" : checked.error().describe().c_str());
      for (const auto& h : l.hints)
        if (h.kind) QVERIFY2(kinds.count(*h.kind), (l.name + ": hint kind " + *h.kind).c_str());
      QVERIFY2(l.theory.has_value() == !l.theory_why.empty(), l.name.c_str());
    }
    QVERIFY(std::is_sorted(lessons.begin(), lessons.end(),
                           [](const Lesson& a, const Lesson& b) { return a.order < b.order; }));
  }

  void malformedLessonsNameTheField_data() {
    QTest::addColumn<QString>("key");
    QTest::addColumn<QString>("value");  // JSON; "null" removes the key
    QTest::addColumn<QString>("named");
    QTest::newRow("format") << "format" << "\"loom-lesson/9\"" << "format";
    QTest::newRow("no title") << "title" << "null" << "title";
    QTest::newRow("explanation") << "explanation" << "[1]" << "explanation[0]";
    QTest::newRow("no runs") << "runs" << "[]" << "runs";
    QTest::newRow("run without plan") << "runs" << "[{\"label\": \"a\"}]" << "runs[0].plan";
    QTest::newRow("answer figure") << "answer" << "{\"figure\": \"samples\", \"run\": 0}" << "answer.figure";
    QTest::newRow("answer run") << "answer" << "{\"figure\": \"/a\", \"run\": -1}" << "answer.run";
    QTest::newRow("theory") << "theory" << "{\"why\": \"w\"}" << "theory";
    QTest::newRow("hint") << "hints" << "[{\"text\": \"t\"}]" << "hints[0].run";
  }

  void malformedLessonsNameTheField() {
    QFETCH(QString, key);
    QFETCH(QString, value);
    QFETCH(QString, named);
    const auto parsed = loom::lessons::parse_lesson(
        "broken", lesson_with(key.toUtf8().constData(), nlohmann::json::parse(value.toStdString())));
    QVERIFY(!parsed.ok());
    const std::string message = parsed.error().describe();
    QVERIFY2(message.find("lesson 'broken': " + named.toStdString() + ":") != std::string::npos, message.c_str());
    QVERIFY(!loom::lessons::parse_lesson("broken", "{not json").ok());
  }

  void plansGetTheLessonsFields() {
    const Lesson lesson = must(loom::lessons::find_lesson("data_parallel"));
    const loom::Plan two = must(loom::lessons::lesson_plan(lesson, 1));
    QCOMPARE(two.parallel.data_parallel, 2);
    QCOMPARE(loom::world_size(two), 2);
    QCOMPARE(two.training.steps, 200);
    QCOMPARE(must(loom::lessons::lesson_plan(lesson, 1, 7)).training.steps, 7);
    QVERIFY(!loom::lessons::lesson_plan(lesson, 9).ok());
    QCOMPARE(loom::lessons::find_lesson("no_such").error().code, loom::ErrorCode::NotFound);
    // A set that breaks the plan is refused with the run and the plan's field.
    Lesson broken = lesson;
    broken.runs[0].set["/parallel/data_parallel"] = 3;
    const auto refused = loom::lessons::check_lesson(broken);
    QVERIFY(!refused.ok());
    QVERIFY2(refused.error().describe().find("runs[0]") != std::string::npos, refused.error().describe().c_str());
  }

  void answersAreMeasuredFromSummaries() {
    Lesson l = must(loom::lessons::find_lesson("data_parallel"));  // run 1's samples/s over run 0's
    const std::vector<nlohmann::json> summaries = {{{"samples_per_s", 1000.0}}, {{"samples_per_s", 1500.0}}, {}};
    QCOMPARE(must(loom::lessons::measure_answer(l, summaries)), 1.5);
    const auto missing = loom::lessons::measure_answer(l, {{{"samples_per_s", 1000.0}}, {{"status", "failed"}}});
    QVERIFY(!missing.ok());
    QVERIFY(missing.error().describe().find("/samples_per_s") != std::string::npos);
    QVERIFY(!loom::lessons::measure_answer(l, {{{"samples_per_s", 0.0}}, {{"samples_per_s", 1.0}}}).ok());
    l.answer.relative_to.reset();
    l.answer.figure = "/stages/0/max_in_flight";
    QCOMPARE(must(loom::lessons::measure_answer(l, {{}, {{"stages", {{{"max_in_flight", 8}}}}}})), 8.0);
    QCOMPARE(loom::lessons::relative_error(3, 4), -0.25);
    QVERIFY(std::isnan(loom::lessons::relative_error(3, 0)));
  }

  // The result in words a newcomer reads: which side of the measurement a prediction was,
  // and why a speedup below 1 is a slowdown (only for speedups, only below 1).
  void resultsSayWhatTheyMean() {
    using loom::lessons::prediction_error_words;
    QCOMPARE(prediction_error_words(3, 4), std::string("25% below the measured value"));
    QCOMPARE(prediction_error_words(1.8, 0.88), std::string("105% above the measured value"));
    QCOMPARE(prediction_error_words(4.001, 4), std::string("the measured value"));
    QCOMPARE(prediction_error_words(3, 0), std::string());
    const Lesson dp = must(loom::lessons::find_lesson("data_parallel"));
    const std::string note = loom::lessons::slowdown_note(dp, 0.88, 2);
    QVERIFY2(note.find("slowdown") != std::string::npos && note.find("2 hardware threads") != std::string::npos, note.c_str());
    QVERIFY(loom::lessons::slowdown_note(dp, 1.4, 2).empty());
    QVERIFY(loom::lessons::slowdown_note(must(loom::lessons::find_lesson("gpipe_vs_1f1b")), 0.5, 2).empty());
  }
};

QTEST_GUILESS_MAIN(TestLessons)
#include "test_lessons.moc"
