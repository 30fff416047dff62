// Comparison tests: two constructed 2-rank runs whose step times, layer times and buckets
// are known give the known step-time median and p95 (warm-up left out, the slowest rank
// of each step counted), ratios and deltas against the baseline, the better run marked
// (none on a tie), the phase diff per role and phase, a step range, time to a target
// accuracy; the POP efficiencies and step ranges on their own; and clear errors.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "loom/analysis/compare.h"
#include "loom/test/events.h"
#include "loom/test/expect.h"
#include "loom/text/run_text.h"

using loom::analysis::Comparison;
using loom::analysis::CompareOptions;
using loom::analysis::CompareRow;
using loom::analysis::PhaseRow;
using loom::store::RunStore;
using loom::trace::Event;
using loom::trace::EventKind;
using loom::trace::Stream;
using loom::testing::must;
using loom::testing::must_ok;

namespace {

constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kT0 = 1'000 * kMs;
constexpr int kSteps = 5;  // step 0 is warm-up

const char* kPlan = R"({"format": "loom-plan/1", "name": "dp2",
 "model": {"input": [2], "layers": [{"type": "linear", "out": 3, "name": "fc"}]},
 "data": {"source": "synthetic", "kind": "spirals", "classes": 3, "train_samples": 640, "test_samples": 128},
 "training": {"batch": 32, "steps": 5},
 "parallel": {"devices": [{"kind": "cpu"}, {"kind": "cpu"}], "data_parallel": 2}})";

Event span(EventKind kind, Stream stream, std::int64_t start_ns, std::int64_t length_ms, int step, int layer = -1) {
  return loom::testing::span_ns(kind, stream, start_ns, start_ns + length_ms * kMs, step, layer);
}

// One rank's steps, 30 ms apart: step 0 lasts 100 ms (warm-up, never counted), the others
// step_ms, and rank 1's step 4 six ms more. Each step: forward of layer 0 (fc), backward
// 3 ms, two 1 ms all-reduce buckets, optimizer 1 ms at the end.
// `layer` -1: the passes are timed whole, as a PyTorch trace times them.
std::vector<Event> rank_events(int rank, std::int64_t step_ms, std::int64_t forward_ms, int layer = 0) {
  std::vector<Event> v;
  for (int s = 0; s < kSteps; ++s) {
    const std::int64_t t = kT0 + (s == 0 ? 0 : 100 * kMs + s * 30 * kMs);
    const std::int64_t length = s == 0 ? 100 : step_ms + (rank == 1 && s == 4 ? 6 : 0);
    v.push_back(span(EventKind::Step, Stream::Host, t, length, s));
    v.push_back(span(EventKind::Forward, Stream::Compute, t, forward_ms, s, layer));
    v.push_back(span(EventKind::Backward, Stream::Compute, t + forward_ms * kMs, 3, s, layer));
    v.push_back(span(EventKind::AllReduce, Stream::Comm, t + (forward_ms + 1) * kMs, 1, s));
    v.push_back(span(EventKind::AllReduce, Stream::Comm, t + (forward_ms + 2) * kMs, 1, s));
    v.push_back(span(EventKind::Optimizer, Stream::Compute, t + (length - 1) * kMs, 1, s));
  }
  return v;
}

// Accuracy (step, value, ms after the first step starts) on rank 0; the last loss 0.5.
std::int64_t add_run(RunStore& store, const char* name, std::int64_t step_ms, std::int64_t forward_ms,
                     std::vector<std::tuple<int, double, int>> accuracy, int layer = 0, const char* plan = kPlan) {
  loom::trace::RunRecord run;
  run.name = name;
  run.plan_json = plan;
  run.world_size = 2;
  const std::int64_t id = must(store.create_run(run));
  for (int r = 0; r < 2; ++r) {
    const auto events = rank_events(r, step_ms, forward_ms, layer);
    must_ok(store.append_events(id, r, events.data(), events.size()));
    must_ok(store.upsert_rank(id, {r, "h", "cpu", 0, 0, 0, std::int64_t(events.size())}));
  }
  std::vector<loom::trace::MetricRecord> metrics = {{0, kSteps - 1, kT0 + 300 * kMs, "loss", 0.5}};
  for (auto [step, value, ms] : accuracy) metrics.push_back({0, step, kT0 + ms * kMs, "test_accuracy", value});
  must_ok(store.append_metrics(id, metrics));
  must_ok(store.finish_run(id, loom::trace::RunStatus::Completed, 1.0, 320, ""));
  return id;
}

const CompareRow& row(const Comparison& c, const std::string& key) {
  for (const CompareRow& r : c.metrics)
    if (r.key == key) return r;
  qFatal("no metric row %s", key.c_str());
}

const PhaseRow* phase(const Comparison& c, const std::string& role, const std::string& name) {
  for (const PhaseRow& p : c.phases)
    if (p.role == role && p.phase == name) return &p;
  return nullptr;
}

bool has_metric(const Comparison& c, const std::string& key) {
  return std::any_of(c.metrics.begin(), c.metrics.end(), [&](const CompareRow& r) { return r.key == key; });
}

}  // namespace

class TestCompare : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::optional<RunStore> store_;
  std::int64_t a_ = 0, b_ = 0;

 private slots:
  void initTestCase() {
    store_ = must(RunStore::open(dir_.filePath("runs.db").toStdString()));
    a_ = add_run(*store_, "fast", 10, 2, {{2, 0.5, 250}, {4, 0.9, 450}});
    b_ = add_run(*store_, "slow", 20, 4, {{3, 0.85, 700}});
  }

  // Per step the slowest rank counts: A's steady steps take 10, 10, 10 and 16 ms (rank 1's
  // step 4), B's 20, 20, 20 and 26; step 0 (100 ms) is warm-up.
  void stepTimesRatiosAndTheBetterRun() {
    const Comparison c = must(loom::analysis::compare_runs(*store_, {a_, b_}));
    QCOMPARE(c.runs.size(), std::size_t(2));
    QCOMPARE(c.runs[0].name, std::string("fast"));
    QCOMPARE(c.runs[1].mode, std::string("all-reduce, 2 replicas"));
    const CompareRow& median = row(c, "step_time_median_ms");
    QCOMPARE(median.values, (std::vector<double>{10.0, 20.0}));
    QCOMPARE(median.best, 0);
    QCOMPARE(row(c, "step_time_p95_ms").values, (std::vector<double>{16.0, 26.0}));
    QCOMPARE(row(c, "compute_ms").best, 0);
    // The critical path of each step: the rank that ends it last (rank 1 in step 4), its
    // forward, backward and optimizer as work, the rest of its step untraced.
    QCOMPARE(row(c, "path_ms").values, (std::vector<double>{11.5, 21.5}));  // (3 x 10 + 16) / 4, (3 x 20 + 26) / 4
    QCOMPARE(row(c, "path_work_ms").values, (std::vector<double>{6.0, 8.0}));
    QCOMPARE(row(c, "path_untraced_ms").values, (std::vector<double>{5.5, 13.5}));
    const CompareRow& loss = row(c, "final_loss");
    QCOMPARE(loss.values, (std::vector<double>{0.5, 0.5}));
    QCOMPARE(loss.best, -1);  // a tie marks no run
    QVERIFY(!has_metric(c, "staleness_p50"));  // neither run has updates
    QVERIFY(!has_metric(c, "bubble_pct"));     // nor a pipeline
    QVERIFY(!has_metric(c, "time_to_target_s"));  // no target set

    const nlohmann::json j = loom::analysis::comparison_to_json(c);
    for (const auto& m : j["metrics"]) {
      if (m["key"] != "step_time_median_ms") continue;
      QCOMPARE(m["ratio"][1].get<double>(), 2.0);
      QCOMPARE(m["delta"][1].get<double>(), 10.0);
      QCOMPARE(m["better"].get<std::string>(), std::string("lower"));
    }
    QVERIFY(j["steps"]["to"].is_null());
    QVERIFY(j["target_accuracy"].is_null());
  }

  // Both ranks are "worker"s; each steady step of each rank is one sample.
  void phaseDiffPerRoleAndPhase() {
    const Comparison c = must(loom::analysis::compare_runs(*store_, {a_, b_}));
    const PhaseRow* forward = phase(c, "worker", "forward fc");
    QVERIFY(forward);
    QCOMPARE(forward->median_ms, (std::vector<double>{2.0, 4.0}));
    QCOMPARE(forward->samples, (std::vector<std::int64_t>{8, 8}));
    QCOMPARE(phase(c, "worker", "backward fc")->median_ms, (std::vector<double>{3.0, 3.0}));
    QCOMPARE(phase(c, "worker", "all-reduce bucket 1")->median_ms, (std::vector<double>{1.0, 1.0}));
    QCOMPARE(phase(c, "worker", "whole step")->median_ms, (std::vector<double>{10.0, 20.0}));
    // In the order a step runs: forward before backward before the buckets.
    auto at = [&](const std::string& name) { return phase(c, "worker", name) - c.phases.data(); };
    QVERIFY(at("forward fc") < at("backward fc"));
    QVERIFY(at("backward fc") < at("all-reduce bucket 0"));
    QVERIFY(at("optimizer") < at("whole step"));
    const nlohmann::json j = loom::analysis::comparison_to_json(c);
    for (const auto& p : j["phases"])
      if (p["phase"] == "forward fc") QCOMPARE(p["delta_ms"][1].get<double>(), 2.0);
  }

  // A run that times whole passes (layer -1, as an imported PyTorch trace does) meets a
  // per-layer run on the "forward" and "backward" rows: the per-layer run's layers summed
  // per step. The per-layer rows stay, the whole-pass run having no value there.
  void wholePassesMeetPerLayerRows() {
    const std::int64_t whole = add_run(*store_, "whole passes", 10, 5, {{4, 0.9, 450}}, -1);
    const Comparison c = must(loom::analysis::compare_runs(*store_, {a_, whole}));
    const PhaseRow* forward = phase(c, "worker", "forward");
    QVERIFY(forward);
    QCOMPARE(forward->median_ms, (std::vector<double>{2.0, 5.0}));
    QCOMPARE(phase(c, "worker", "backward")->median_ms, (std::vector<double>{3.0, 3.0}));
    QVERIFY(std::isnan(phase(c, "worker", "forward fc")->median_ms[1]));
    auto at = [&](const std::string& name) { return phase(c, "worker", name) - c.phases.data(); };
    QVERIFY(at("forward") < at("forward fc") && at("backward fc") < at("backward"));
    QVERIFY(store_->delete_run(whole).ok());  // the other tests compare A and B alone
  }

  // An imported trace whose ranges name layer 0 "fc" (its plan lists the names) meets the
  // Loom run's own "fc" rows layer by layer.
  void importedLayerNamesMeetLoomLayers() {
    const char* imported = R"({"imported": "kineto", "files": ["rank0.json"], "world_size": 2, "layers": ["fc"]})";
    const std::int64_t trace = add_run(*store_, "pytorch, layers named", 10, 5, {{4, 0.9, 450}}, 0, imported);
    const Comparison c = must(loom::analysis::compare_runs(*store_, {a_, trace}));
    const PhaseRow* forward = phase(c, "worker", "forward fc");
    QVERIFY(forward);
    QCOMPARE(forward->median_ms, (std::vector<double>{2.0, 5.0}));
    QCOMPARE(phase(c, "worker", "backward fc")->median_ms, (std::vector<double>{3.0, 3.0}));
    QVERIFY(!phase(c, "worker", "forward layer 0"));
    QVERIFY(store_->delete_run(trace).ok());
  }

  void stepRangeAndTargetAccuracy() {
    CompareOptions options;
    options.steps = must(loom::analysis::parse_step_range("3:5"));
    options.target_accuracy = 0.8;
    const Comparison c = must(loom::analysis::compare_runs(*store_, {a_, b_}, options));
    QCOMPARE(row(c, "step_time_median_ms").values, (std::vector<double>{13.0, 23.0}));  // steps 3 and 4
    QCOMPARE(phase(c, "worker", "forward fc")->samples, (std::vector<std::int64_t>{4, 4}));
    // Counted from the start of rank 0's first step (the warm-up step, at kT0): A reaches
    // 0.8 at step 4, 450 ms in; B at step 3, 700 ms in.
    QCOMPARE(row(c, "time_to_target_s").values, (std::vector<double>{0.45, 0.7}));
    QCOMPARE(row(c, "time_to_target_s").best, 0);
    QCOMPARE(row(c, "steps_to_target").values, (std::vector<double>{4.0, 3.0}));
    QCOMPARE(row(c, "steps_to_target").best, 1);
    const std::string text = loom::text::format_comparison(c);
    QVERIFY2(text.find("steps 3 to 4") != std::string::npos, text.c_str());
    QVERIFY2(text.find("1.77x") != std::string::npos, text.c_str());  // 23 / 13
  }

  // The difference in critical path per step, split by part; a run without a path is
  // left out, and so is a part that is unknown.
  void stepTimeSplitByPart() {
    using loom::analysis::CompareRow;
    using loom::analysis::kNaN;
    auto row = [](const char* key, std::vector<double> v) {
      CompareRow r;
      r.key = key;
      r.values = std::move(v);
      return r;
    };
    loom::analysis::Comparison c;
    c.runs.resize(3);
    c.metrics = {row("path_ms", {10, 14, kNaN}),         row("path_work_ms", {6, 9, 5}),
                 row("path_comm_ms", {3, 2.5, 1}),       row("path_waiting_ms", {1, 2.5, 0}),
                 row("path_descheduled_ms", {0, kNaN, 0}), row("path_untraced_ms", {0.003, 0.001, 0}),
                 row("path_bubble_ms", {0, 1, 0})};
    const auto split = loom::analysis::step_time_split(c);
    QCOMPARE(split.size(), std::size_t(1));
    QCOMPARE(split[0].run, 1);
    QCOMPARE(split[0].total_ms, 4.0);
    const std::vector<std::pair<std::string, double>> parts{
        {"compute", 2.0},          {"exposed communication", -0.5}, {"waiting for late ranks", 1.5},
        {"pipeline bubble", 1.0}, {"untraced", 0.001 - 0.003}};  // the parts sum to the 4 ms
    QCOMPARE(split[0].parts, parts);  // a tiny difference is kept; only its text rounds to +0.00
    const std::string text = loom::text::format_step_time_split(c);
    QCOMPARE(text, std::string("B: +4.00 ms = compute +2.00, exposed communication -0.50, waiting for late ranks "
                               "+1.50, pipeline bubble +1.00, untraced +0.00\n"));
  }

  // Ratios print the same in every view; beside a baseline near zero only the bound shows.
  void ratiosAsPrinted() {
    using loom::text::format_compare_ratio;
    QCOMPARE(format_compare_ratio(3, 2), std::string("1.50x"));
    QCOMPARE(format_compare_ratio(0.94, 0.002), std::string(">100x"));
    QCOMPARE(format_compare_ratio(0.002, 0.94), std::string("<0.01x"));
    QCOMPARE(format_compare_ratio(0, 5), std::string("0.00x"));
    QCOMPARE(format_compare_ratio(1, 0), std::string());
    QCOMPARE(format_compare_ratio(loom::analysis::kNaN, 1), std::string());
  }

  void efficiencyAndRanges() {
    loom::analysis::RankBreakdown r0, r1, server;
    r0.compute_s = 6, r0.optimizer_s = 1, r0.data_s = 1, r0.window_s = 10, r0.steady_steps = 4;
    r1.compute_s = 4, r1.window_s = 9, r1.steady_steps = 4;
    server.compute_s = 9, server.window_s = 20;  // no steps: not a worker, not counted
    const auto e = loom::analysis::pop_efficiency({r0, r1, server});
    QCOMPARE(e.load_balance, 0.75);
    QCOMPARE(e.communication_efficiency, 0.8);
    QCOMPARE(e.parallel_efficiency, 0.6);
    QVERIFY(std::isnan(loom::analysis::pop_efficiency({server}).load_balance));

    QCOMPARE(must(loom::analysis::parse_step_range("10:")).to, std::numeric_limits<std::int64_t>::max());
    QCOMPARE(must(loom::analysis::parse_step_range(":7")).from, std::int64_t(0));
    for (const char* bad : {"5:5", "7:3", "a:b", "10", "-1:3", "1:2x", ""}) {
      const auto r = loom::analysis::parse_step_range(bad);
      QVERIFY2(!r.ok(), bad);
      QVERIFY(r.error().message.find("--steps") != std::string::npos);
    }
  }

  void errorsNameTheProblem() {
    using loom::ErrorCode;
    auto code = [&](std::vector<std::int64_t> ids) { return loom::analysis::compare_runs(*store_, ids).error().code; };
    QCOMPARE(code({a_}), ErrorCode::InvalidArgument);
    QCOMPARE(code({a_, a_}), ErrorCode::InvalidArgument);
    QCOMPARE(code({a_, b_, a_ + 10, a_ + 11, a_ + 12, a_ + 13, a_ + 14}), ErrorCode::InvalidArgument);
    QCOMPARE(code({a_, 999}), ErrorCode::NotFound);
  }
};

QTEST_GUILESS_MAIN(TestCompare)
#include "test_compare.moc"
