// The predictor on hand-set costs, whose steps are worked out by hand below, and the
// calibration read back from runs written into a real store file.
#include <QTemporaryDir>
#include <QtTest>

#include <tuple>

#include <cmath>
#include <map>

#include "loom/analysis/pipeline_replay.h"
#include "loom/analysis/compare.h"
#include "loom/predict/against_run.h"
#include "loom/predict/stored_prediction.h"
#include "loom/predict/predictor.h"
#include "loom/store/run_store.h"
#include "loom/test/temp_store.h"
#include "predict_fixtures.h"

using loom::testing::must_ok;
using loom::testing::TempStore;

namespace {

// A completed one-process run of `plan` (fc1, act, fc2) in a store: 4 steps of 20 ms, each
// with nine 1 ms spans (data, three forwards, loss, three backwards, optimizer).
std::int64_t store_one_millisecond_spans(loom::store::RunStore& store, const Plan& plan, int step_ms = 20, int span_ms = 1,
                                         const std::string& rank_host = "h") {
  loom::trace::RunRecord run;
  run.plan_json = loom::plan_to_json(plan);
  run.host = "h";
  const std::int64_t id = *store.create_run(run);
  loom::trace::RankRecord record;
  record.host = rank_host;
  record.device_info.kind = "cpu";
  record.device_info.blas_threads = 1;
  record.device_info.logical_cores = 2;
  must_ok(store.upsert_rank(id, record));
  std::vector<Event> events;
  const std::vector<std::pair<EventKind, int>> order = {{EventKind::DataLoad, -1}, {EventKind::Forward, 0}, {EventKind::Forward, 1},
                                                        {EventKind::Forward, 2},   {EventKind::Loss, -1},   {EventKind::Backward, 2},
                                                        {EventKind::Backward, 1},  {EventKind::Backward, 0}, {EventKind::Optimizer, -1}};
  for (int step = 0; step < 4; ++step) {
    const std::int64_t t = step * step_ms * 1'000'000LL;
    Event s;
    s.kind = EventKind::Step, s.stream = loom::trace::Stream::Host, s.step = step, s.start_ns = t, s.end_ns = t + step_ms * 1'000'000LL;
    events.push_back(s);
    for (std::size_t i = 0; i < order.size(); ++i) {
      Event e;
      e.kind = order[i].first, e.layer = order[i].second, e.step = step;
      e.start_ns = t + std::int64_t(i) * span_ms * 1'000'000LL, e.end_ns = e.start_ns + span_ms * 1'000'000LL;
      events.push_back(e);
    }
  }
  must_ok(store.append_events(id, 0, events.data(), events.size()));
  must_ok(store.finish_run(id, loom::trace::RunStatus::Completed, 1.0, 256, ""));
  return id;
}

// A cpu rank with one BLAS thread on host "h", which has two cores.
loom::trace::RankRecord cpu_rank_on_h(int rank) {
  loom::trace::RankRecord record;
  record.rank = rank;
  record.host = "h";
  record.device_info.kind = "cpu";
  record.device_info.blas_threads = 1;
  record.device_info.logical_cores = 2;
  return record;
}

// A completed two-rank run of `plan` on host "h": five steps of 20 ms, in each a send of
// `bytes` taking `ms` on both ranks.
std::int64_t store_sending_run(loom::store::RunStore& store, const Plan& plan, std::int64_t bytes, double ms) {
  loom::trace::RunRecord run;
  run.plan_json = loom::plan_to_json(plan);
  run.world_size = 2;
  const std::int64_t id = *store.create_run(run);
  for (int rank = 0; rank < 2; ++rank) {
    must_ok(store.upsert_rank(id, cpu_rank_on_h(rank)));
    std::vector<Event> events;
    for (int step = 0; step < 5; ++step) {
      Event whole, send;
      whole.kind = EventKind::Step, whole.stream = loom::trace::Stream::Host, whole.step = step;
      whole.start_ns = step * 20'000'000LL, whole.end_ns = whole.start_ns + 20'000'000LL;
      send.kind = EventKind::Send, send.stream = loom::trace::Stream::Comm, send.step = step, send.bytes = bytes;
      send.start_ns = whole.start_ns + 1'000'000LL, send.end_ns = send.start_ns + std::int64_t(ms * 1e6);
      events.push_back(whole), events.push_back(send);
    }
    must_ok(store.append_events(id, rank, events.data(), events.size()));
  }
  must_ok(store.finish_run(id, loom::trace::RunStatus::Completed, 1.0, 640, ""));
  return id;
}

}  // namespace

class TestPredict : public QObject {
  Q_OBJECT

 private slots:
  void costCurveGoesThroughItsPoints() {
    LinearCost c;
    c.points = {{64, 1.0}, {512, 6.0}};
    QCOMPARE(c.at(64), 1.0);
    QCOMPARE(c.at(288), 3.5);
    QVERIFY(std::abs(c.at(1024) - (6.0 + 5.0 / 448.0 * 512.0)) < 1e-12);  // the last segment, extended
    QVERIFY(std::abs(c.at(0) - (1.0 - 5.0 / 448.0 * 64.0)) < 1e-12);         // the first, extended: a latency
    LinearCost steep;
    steep.points = {{64, 1.0}, {128, 3.0}};
    QCOMPARE(steep.at(0), 0.0);  // never below 0
    QCOMPARE(at(64, 2.0).at(32), 1.0);                                      // one size: proportional
  }

  // One process: data 0.6 + forward 1 + 0.5 + 2 + loss 0.4, backward 1.5 + 0.25 + 3, the
  // untraced 0.2 measured steps had, then the optimizer 0.3: 9.75 ms.
  void oneProcessIsTheSumOfItsCosts() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}");
    const Prediction p = must(loom::predict::predict_step(plan, costs_for(plan), {2}));
    QCOMPARE(p.threads_per_rank, 1);
    QVERIFY(std::abs(p.step_ms - 9.75) < 1e-9);
    QVERIFY(std::abs(p.samples_per_s - 64 / 9.75e-3) < 1e-6);
    QCOMPARE(of(p, 0, EventKind::Forward).size(), std::size_t(3));
    QVERIFY(std::abs(of(p, 0, EventKind::Optimizer).front().start_ms - 9.45) < 1e-9);
    QVERIFY(of(p, 0, EventKind::Wait).empty() && of(p, 0, EventKind::AllReduce).empty());
  }

  // Two replicas, buckets of 108 bytes: fc2's gradient (bias 12 + weight 96 bytes), then
  // fc1's (bias 32 + weight 64). fc2's backward ends at 6.0: its bucket runs 6.0-8.0; fc1's
  // ends at 9.25: 9.25-11.25, a 2 ms wait; untraced 0.2, the optimizer 11.45-11.75.
  // At 104 bytes the buckets split by tensor, as GradientSync's do: fc2's bias alone (12),
  // fc2's weight (96), fc1's bias and weight (96); the second waits for the first.
  void bucketsOverlapTheBackward() {
    const Plan split = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2, "bucket_mb": 0.0001})", "0, 0, 0", 128);
    const auto by_tensor = of(must(loom::predict::predict_step(split, costs_for(split), {2})), 0, EventKind::AllReduce);
    QCOMPARE(by_tensor.size(), std::size_t(3));
    QCOMPARE(by_tensor[0].bytes, std::int64_t(12));
    QCOMPARE(by_tensor[1].bytes, std::int64_t(96));
    QVERIFY(std::abs(by_tensor[1].start_ms - 8.0) < 1e-9 && std::abs(by_tensor[2].start_ms - 10.0) < 1e-9);
    const Plan plan = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2, "bucket_mb": 0.000103})", "0, 0, 0", 128);
    const Prediction p = must(loom::predict::predict_step(plan, costs_for(plan), {2}));
    for (int rank = 0; rank < 2; ++rank) {
      const auto buckets = of(p, rank, EventKind::AllReduce);
      QCOMPARE(buckets.size(), std::size_t(2));
      QVERIFY(std::abs(buckets[0].start_ms - 6.0) < 1e-9 && std::abs(buckets[0].end_ms - 8.0) < 1e-9);
      QCOMPARE(buckets[0].bytes, std::int64_t(108));
      QVERIFY(std::abs(buckets[1].start_ms - 9.25) < 1e-9 && std::abs(buckets[1].end_ms - 11.25) < 1e-9);
      const auto wait = of(p, rank, EventKind::Wait);
      QCOMPARE(wait.size(), std::size_t(1));
      QVERIFY(std::abs(wait[0].end_ms - wait[0].start_ms - 2.0) < 1e-9);
    }
    QVERIFY(std::abs(p.step_ms - 11.75) < 1e-9);
  }

  // A straggler with slowdown 2 adds its own compute (9.25 ms) after its backward; its
  // buckets still leave as its backward finishes them, so it does not wait; the step ends
  // with its optimizer at 18.5 + 0.2 + 0.3 = 19.0.
  void stragglerAddsItsSlowdown() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(2) +
                                R"(, "data_parallel": 2, "bucket_mb": 0.0001, "stragglers": [{"rank": 1, "slowdown": 2.0}]})",
                                "0, 0, 0", 128);
    const Prediction p = must(loom::predict::predict_step(plan, costs_for(plan), {2}));
    const auto injected = of(p, 1, EventKind::InjectedDelay);
    QCOMPARE(injected.size(), std::size_t(1));
    QVERIFY(std::abs(injected[0].end_ms - injected[0].start_ms - 9.25) < 1e-9);
    QVERIFY(of(p, 1, EventKind::Wait).empty());
    QVERIFY(of(p, 0, EventKind::InjectedDelay).empty());
    QVERIFY(std::abs(p.step_ms - 19.0) < 1e-9);
  }

  // Two GPipe stages, four micro-batches of 16: the step is what the schedule replay gives
  // for the same op times and transfers, and the first stage idles for the bubble.
  void pipelineFollowsTheScheduleReplay() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(2) + R"(, "stages": 2, "microbatches": 4, "schedule": "gpipe"})", "0, 1, 1");
    Calibration cal = costs_for(plan);
    cal.costs.erase(loom::predict::residual_key(false, "cpu 1t"));
    cal.costs[loom::predict::residual_key(true, "cpu 1t")] = at(8, 0.8);           // per step of 8 ops
    cal.costs[loom::predict::p2p_key(loom::CommBackend::Mpi)] = at(16 * 8 * 4, 0.05);  // fc1's output
    const Prediction p = must(loom::predict::predict_step(plan, cal, {2}));
    // Per micro-batch of 16 samples the costs are a quarter of those at 64.
    const double f0 = (0.6 + 1.0) / 4, b0 = 3.0 / 4;
    const double f1 = (0.6 + 0.5 + 2.0 + 0.4) / 4, b1 = (0.25 + 1.5) / 4;  // the loss stage loads labels,
    const double ahead1 = 0.6 / 4;                                              // before its input arrives
    const double opt0 = 0.3 * 24 / 51, opt1 = 0.3 * 27 / 51;  // each stage's own parameters
    const auto replay =
        loom::analysis::replay_ops(loom::Schedule::GPipe, 4, {{.forward = f0, .backward = b0, .to_next = 0.05},
                                                               {.forward = f1, .backward = b1, .to_previous = 0.05, .forward_ahead = ahead1}});
    QVERIFY(replay[1].front().start < replay[0].front().end + 0.05);  // the labels load while the input travels
    const double expected = std::max(replay[0].back().end + opt0, replay[1].back().end + opt1) + 0.8;
    QVERIFY2(std::abs(p.step_ms - expected) < 1e-9, qPrintable(QString("%1 vs %2").arg(p.step_ms).arg(expected)));
    QVERIFY(!of(p, 0, EventKind::Idle).empty());
    QCOMPARE(of(p, 0, EventKind::Send).size(), std::size_t(4));  // one activation per micro-batch
    QCOMPARE(of(p, 1, EventKind::Loss).size(), std::size_t(4));
    QVERIFY(of(p, 0, EventKind::Loss).empty() && of(p, 1, EventKind::DataLoad).size() == 4);
  }

  // Four ranks of one thread on two cores: costs measured unshared are stretched 2x, and
  // the prediction says so.
  void crowdedHostStretchesUnsharedCosts() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(4) + R"(, "data_parallel": 4})", "0, 0, 0", 256);
    Calibration cal = costs_for(plan);
    cal.costs[loom::predict::allreduce_key(4, loom::CommBackend::Mpi)].points = {{204, 1.0}};
    const Prediction p = must(loom::predict::predict_step(plan, cal, {2}));
    QCOMPARE(p.stretch, 2.0);
    QCOMPARE(of(p, 0, EventKind::Forward).front().end_ms - of(p, 0, EventKind::Forward).front().start_ms, 2.0);
    QVERIFY(std::any_of(p.notes.begin(), p.notes.end(), [](const std::string& n) { return n.find("stretched") != std::string::npos; }));
  }

  // Four ranks on two cores (x2.00) where only x1.50, x3.00 and no crowding were
  // measured: the nearest crowding's costs as they are (a crowded rank yields its core
  // while it waits, so its compute is stretched far less than the crowding), else the
  // unshared ones stretched 2x; the prediction says which it took.
  void unmeasuredCrowdingTakesTheNearestMeasured() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(4) + R"(, "data_parallel": 4})", "0, 0, 0", 256);
    Calibration cal = costs_for(plan);
    const loom::ModelInfo m = loom::infer_model(plan, nullptr);
    cal.costs[loom::predict::forward_key(layer(m, "fc1"), "cpu 1t shared x1.50")] = at(64, 1.25);
    cal.costs[loom::predict::forward_key(layer(m, "fc1"), "cpu 1t shared x3.00")] = at(64, 9.0);  // farther
    cal.costs[loom::predict::allreduce_key(4, loom::CommBackend::Mpi)].points = {{204, 1.0}};
    const Prediction p = must(loom::predict::predict_step(plan, cal, {2}));
    const auto forward = of(p, 0, EventKind::Forward);
    QCOMPARE(forward[0].end_ms - forward[0].start_ms, 1.25);       // fc1: from x1.50
    QCOMPARE(forward[2].end_ms - forward[2].start_ms, 2.0 * 2.0);  // fc2: unshared, stretched
    QVERIFY(std::any_of(p.notes.begin(), p.notes.end(), [](const std::string& n) {
      return n.find("taken from forward linear 2->8 @cpu 1t shared x1.50") != std::string::npos;
    }));
  }

  void missingCostsAreNamed() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}");
    const auto p = loom::predict::predict_step(plan, Calibration{}, {2});
    QVERIFY(!p.ok() && p.error().code == loom::ErrorCode::NotFound);
    QVERIFY2(p.error().message.find("forward linear 2->8 @cpu 1t") != std::string::npos, p.error().message.c_str());
    QVERIFY(p.error().message.find("optimizer sgd @cpu 1t") != std::string::npos);
    // The all-reduce is looked up last: its absence is said too (it was counted as free).
    const Plan dp2 = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    Calibration no_allreduce = costs_for(dp2);
    no_allreduce.costs.erase(loom::predict::allreduce_key(2, loom::CommBackend::Mpi));
    const auto free_sync = loom::predict::predict_step(dp2, no_allreduce, {2});
    QVERIFY(!free_sync.ok() && free_sync.error().message.find("all-reduce 2 ranks mpi") != std::string::npos);
    // A parameter server's messages are point-to-point: their cost is named when missing.
    const Plan async = tiny_plan(R"({"devices": )" + devices(3) + R"(, "data_parallel": 2, "sync": {"mode": "parameter_server"}})");
    const auto no_messages = loom::predict::predict_step(async, costs_for(async), {8});
    QVERIFY(!no_messages.ok() && no_messages.error().code == loom::ErrorCode::NotFound);
    QVERIFY2(no_messages.error().message.find("send mpi") != std::string::npos, no_messages.error().message.c_str());
  }

  // A crowded plan's per-layer notes are said once per way and device tag, where the
  // first stood, with each layer named; fewer than three, and notes of no cost, as they are.
  void notesOfOneApproximationAreGrouped() {
    const std::vector<std::string> notes = {
        "ranks outnumber cores 1.50x: costs measured so crowded",
        "forward fc1 @cpu 1t shared x1.50: not measured, taken from forward fc1 @cpu 1t shared x2.00",
        "optimizer sgd @cpu 1t shared x1.50: measured only unshared, stretched",
        "backward fc1 @cpu 1t shared x1.50: not measured, taken from backward fc1 @cpu 1t shared x2.00",
        "forward fc2 @cpu 1t shared x1.50: not measured, taken from forward fc2 @cpu 1t shared x2.00",
        "loss softmax @cpu 1t shared x1.50: measured only unshared, stretched"};
    const std::vector<std::string> expected = {
        notes[0],
        "3 costs @cpu 1t shared x1.50 not measured, taken from @cpu 1t shared x2.00: forward fc1; backward fc1; forward fc2",
        notes[2], notes[5]};
    QCOMPARE(loom::predict::grouped_notes(notes), expected);
    // Taken from another name (not only another crowding) stays apart.
    std::vector<std::string> other = notes;
    other[4] = "forward fc2 @cpu 1t shared x1.50: not measured, taken from forward fc1 @cpu 1t shared x2.00";
    QCOMPARE(loom::predict::grouped_notes(other), other);
  }

  // A parallel block split over two stages: branch a on stage 0, branch b on stage 1,
  // where the block's concatenation runs (costed as the block's span) before fc. GPipe,
  // one micro-batch, free messages. Branch b is fed by the batch, so as the engine runs it,
  // stage 1 loads the batch and runs b while stage 0 runs a: both 0-1.6 (data 0.6 and 1).
  // Then stage 1's concat 0.5, fc 2, loss 0.4 to 4.5, its backward 4.5-9.25 (fc 1.5, concat
  // 0.25, then b 3 after a's gradient left at 6.25), stage 0's 6.25-9.25 (a 3); then the
  // residual 0.2 and stage 1's optimizer over its 39 parameters (0.3 x 39/51). Predicted
  // one after the other (before b was known to run ahead), the step was 13.85 + 0.27.
  void branchesOnTwoStagesConcatenateWhereTheBlockEnds() {
    const std::string json = std::string(R"({"format": "loom-plan/1", "name": "split", "model": {"input": [2], "layers": [)") +
        R"({"type": "parallel", "name": "P", "branches": [{"layers": [{"type": "linear", "out": 4, "name": "a"}]},)" +
        R"({"stage": 1, "layers": [{"type": "linear", "out": 4, "name": "b"}]}]},)" +
        R"({"type": "linear", "out": 3, "name": "fc", "stage": 1}]},)" +
        R"("data": {"source": "synthetic", "kind": "spirals", "classes": 3, "train_samples": 640, "test_samples": 128},)" +
        R"("training": {"batch": 64, "steps": 5, "threads": 1, "optimizer": "sgd"},)" +
        R"("parallel": {"stages": 2, "devices": [{"kind": "cpu"}, {"kind": "cpu"}]}})";
    loom::PlanResult parsed = loom::parse_plan(json);
    QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.errors.front().reason.c_str());
    const Plan& plan = *parsed.plan;
    const loom::ModelInfo m = loom::infer_model(plan, nullptr);
    using namespace loom::predict;
    Calibration c;
    const std::string d = "cpu 1t";
    for (const auto& [name, fwd, bwd] : {std::tuple{"a", 1.0, 3.0}, {"b", 1.0, 3.0}, {"P", 0.5, 0.25}, {"fc", 2.0, 1.5}}) {
      c.costs[forward_key(layer(m, name), d)] = at(64, fwd);
      c.costs[backward_key(layer(m, name), d)] = at(64, bwd);
    }
    c.costs[loss_key(plan, d)] = at(64, 0.4);
    c.costs[data_key(plan)] = at(64, 0.6);
    c.costs[optimizer_key(plan, d)] = at(51, 0.3);
    c.costs[residual_key(false, d)] = at(2, 0.2);
    c.costs[p2p_key(loom::CommBackend::Mpi)] = at(1, 0.0);
    const Prediction p = must(predict_step(plan, c, {8}));
    QCOMPARE(of(p, 0, EventKind::Forward).size(), std::size_t(1));  // a
    QCOMPARE(of(p, 1, EventKind::Forward).size(), std::size_t(3));  // b, the concatenation, fc
    QCOMPARE(of(p, 1, EventKind::Forward)[1].layer, layer(m, "P").id.value);
    QCOMPARE(of(p, 1, EventKind::DataLoad).front().start_ms, 0.0);  // not waiting for stage 0
    QVERIFY(std::abs(of(p, 0, EventKind::Backward).front().start_ms - 6.25) < 1e-9);
    QVERIFY2(std::abs(p.step_ms - (9.25 + 0.2 + 0.3 * 39 / 51)) < 1e-9, qPrintable(QString::number(p.step_ms, 'g', 12)));
  }

  // Replicas where only two were measured, scaled by the bytes each rank sends as Loom's
  // all-reduce runs: 3 go round a ring (2*2/3 of the buffer, against 2*1/2 for 2), 4
  // double (the whole buffer twice).
  void allreduceScalesFromAnotherRankCount() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(4) + R"(, "data_parallel": 4})", "0, 0, 0", 256);
    Calibration cal = costs_for(plan, "cpu 1t shared x2.00");
    const Prediction p = must(loom::predict::predict_step(plan, cal, {2}));
    const auto bucket = of(p, 0, EventKind::AllReduce);
    QCOMPARE(bucket.size(), std::size_t(1));  // 204 bytes, in one bucket of 25 MiB
    QVERIFY2(std::abs(bucket[0].end_ms - bucket[0].start_ms - 2.0 * 2) < 1e-9,
             qPrintable(QString::number(bucket[0].end_ms - bucket[0].start_ms, 'g', 12)));
    const Plan three = tiny_plan(R"({"devices": )" + devices(3) + R"(, "data_parallel": 3})", "0, 0, 0", 192);
    const auto ring = of(must(loom::predict::predict_step(three, costs_for(three), {4})), 0, EventKind::AllReduce);
    QVERIFY2(std::abs(ring[0].end_ms - ring[0].start_ms - 2.0 * (4.0 / 3)) < 1e-9,
             qPrintable(QString::number(ring[0].end_ms - ring[0].start_ms, 'g', 12)));
  }

  // A send measured at one size (16 KB, 0.5 ms) says nothing of how its time grows with
  // bytes: with the slope of the runs' point-to-point probe (2 GB/s), 2 MB more takes 1 ms
  // more, and below it the line falls to a latency; without a probe, in proportion. A
  // slope the points give (sizes 1.5x apart) stands. Calibrated from a stored MPI run
  // whose sends were all 16 KB, the send's cost has the slope of its probe (2 GB/s), and
  // none before the probe's figure was stored.
  void sendsTakeTheProbesBandwidthBeyondTheirSize() {
    LinearCost c = at(16384, 0.5);
    c.probe_slope = 1.0 / 2e6;
    QVERIFY(std::abs(c.at(16384 + 2e6) - 1.5) < 1e-12);
    QVERIFY(std::abs(c.at(0) - (0.5 - 16384 / 2e6)) < 1e-12);
    QCOMPARE(at(16384, 0.5).at(65536), 2.0);
    c.points = {{16384, 0.5}, {65536, 0.6}};
    QVERIFY(std::abs(c.at(131072) - (0.6 + 0.1 / 49152 * 65536)) < 1e-12);
    QTemporaryDir dir;
    auto store = loom::store::RunStore::open(dir.filePath("runs.db").toStdString());
    QVERIFY(store.ok());
    const Plan plan = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    const std::int64_t id = store_sending_run(*store, plan, 16384, 0.5);
    const std::string key = loom::predict::p2p_key(loom::CommBackend::Mpi);
    QCOMPARE(must(loom::predict::calibrate(*store, "")).costs.at(key).probe_slope, 0.0);  // no probe recorded
    QVERIFY(store->append_metrics(id, {{0, -1, 1, "p2p_gbs", 2.0}}).ok());
    const LinearCost send = must(loom::predict::calibrate(*store, "")).costs.at(key);
    QCOMPARE(send.points, (std::vector<std::pair<double, double>>{{16384, 0.5}}));
    QCOMPARE(send.probe_slope, 1.0 / 2e6);
    QVERIFY(std::abs(send.at(16384 + 2e6) - 1.5) < 1e-12);
  }

  // Between measured sizes a cost is the line through them; below the smallest, a sample
  // costs at least what it cost there (the line through 64 and 128 samples would give 16
  // samples 0.0375 ms); above the largest, the last segment's line.
  void costBelowTheSmallestSizeIsAtLeastProportional() {
    loom::predict::LinearCost c;
    c.points = {{64, 0.44}, {128, 0.98}};
    QVERIFY(std::abs(c.at(96) - 0.71) < 1e-12);
    QVERIFY(std::abs(c.at(16) - 0.44 * 16 / 64) < 1e-12);
    QVERIFY(std::abs(c.at(256) - (0.98 + 0.54 * 2)) < 1e-12);
    c.points = {{64, 0.44}, {128, 0.6}};  // sublinear: the line stays above proportional
    QVERIFY(std::abs(c.at(32) - (0.44 - 0.08)) < 1e-12);
  }

  // Beyond the measured sizes a slope is taken only from sizes at least 1.5x apart, and
  // never one that falls as size grows: a 940584-byte bucket and a 940800-byte arena
  // (0.0812 and 0.0764 ms) once put a 131 KB all-reduce at 19 ms.
  void closeSizesGiveNoSlopeBeyondThem() {
    loom::predict::LinearCost c;
    c.points = {{940584, 0.0812}, {940800, 0.0764}};
    QVERIFY(std::abs(c.at(131072) - 0.0812 * 131072 / 940584) < 1e-12);
    QVERIFY(std::abs(c.at(4e6) - 0.0764 * 4e6 / 940800) < 1e-12);
    QVERIFY(std::abs(c.at(940692) - 0.0788) < 1e-12);  // between them: the line
    c.points = {{131072, 0.011}, {940584, 0.0812}, {940800, 0.0764}};  // 131072 is far enough below
    const double slope = (0.0812 - 0.011) / (940584 - 131072);
    QVERIFY(std::abs(c.at(65536) - std::max(0.011 + slope * (65536 - 131072), 0.011 / 2)) < 1e-12);
    QVERIFY(std::abs(c.at(2e6) - (0.0764 + (0.0764 - 0.011) / (940800 - 131072) * (2e6 - 940800))) < 1e-12);
  }

  // Crowded, with only a crowded two-rank all-reduce measured (2.5 ms for 96 KB, 2
  // exchanges): each exchange waits for a core, whatever the bytes (the 204-byte bucket
  // takes 2.5 ms too), so it scales by Loom's exchanges. Three
  // ranks on two cores go round a ring, 4 exchanges: 5 ms; four double, 2 exchanges:
  // 2.5 ms. The uncrowded cost is not taken (it is what ranks that never wait take).
  void crowdedAllreduceScalesByExchanges() {
    const auto crowded = [](int ranks, const std::string& device) {
      const Plan plan = tiny_plan(R"({"devices": )" + devices(ranks) + R"(, "data_parallel": )" + std::to_string(ranks) + "}",
                                  "0, 0, 0", 64 * ranks);
      Calibration cal = costs_for(plan, device);
      cal.costs[loom::predict::allreduce_key(2, loom::CommBackend::Mpi, 2.0)].points = {{96000, 2.5}};
      const auto bucket = of(must(loom::predict::predict_step(plan, cal, {2})), 0, EventKind::AllReduce);
      return bucket.size() == 1 ? bucket[0].end_ms - bucket[0].start_ms : -1.0;
    };
    const double three = crowded(3, "cpu 1t shared x1.50"), four = crowded(4, "cpu 1t shared x2.00");
    QVERIFY2(std::abs(three - 2.5 * 2) < 1e-9, qPrintable(QString::number(three, 'g', 12)));
    QVERIFY2(std::abs(four - 2.5) < 1e-9, qPrintable(QString::number(four, 'g', 12)));
  }

  // A layer of another size is scaled by work from the measured ones of its kind.
  void unmeasuredSizeIsScaledByWork() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}");
    Calibration cal = costs_for(plan);
    const loom::ModelInfo m = loom::infer_model(plan, nullptr);
    for (const char* name : {"fc1", "fc2"}) {
      const auto& l = layer(m, name);
      cal.costs[loom::predict::forward_key(l, "cpu 1t")].work = loom::predict::layer_work(l);
    }
    cal.costs.erase(loom::predict::forward_key(layer(m, "fc2"), "cpu 1t"));  // 8 -> 3: 48 FLOPs, fc1 32
    const Prediction p = must(loom::predict::predict_step(plan, cal, {2}));
    const auto forward = of(p, 0, EventKind::Forward);
    QVERIFY(std::abs(forward[2].end_ms - forward[2].start_ms - 1.0 * 48 / 32) < 1e-9);
    QVERIFY(!p.notes.empty());

    // With a second size of the kind measured (4 -> 8: 64 FLOPs in 1.6 ms, where 32 took
    // 1 ms), fc2 scales from the nearest (64) as the two nearest show time grows with
    // work: 1.6 x (48/64)^(ln(1/1.6) / ln(32/64)).
    loom::LayerInfo wider = layer(m, "fc1");
    wider.input = {4};
    wider.forward_flops *= 2;
    QCOMPARE(loom::predict::layer_work(wider), 64.0);
    cal.costs[loom::predict::forward_key(wider, "cpu 1t")] = at(64, 1.6);
    cal.costs[loom::predict::forward_key(wider, "cpu 1t")].work = 64;
    const Prediction q = must(loom::predict::predict_step(plan, cal, {2}));
    const auto scaled = of(q, 0, EventKind::Forward);
    const double exponent = std::log(1.0 / 1.6) / std::log(32.0 / 64.0);
    QVERIFY2(std::abs(scaled[2].end_ms - scaled[2].start_ms - 1.6 * std::pow(48.0 / 64.0, exponent)) < 1e-9,
             qPrintable(QString::number(scaled[2].end_ms - scaled[2].start_ms, 'g', 12)));
  }

  // Two ranks, five steps of 20 ms but the last of 40 (steady: median 20, mean 25): forward
  // fc1 lasts 10 ms in the warm-up step and 1, 2, 3 and 10 ms after. A compute span's cost
  // is its mean scaled by the median step over the mean, 4 x 20/25 = 3.2 (the median
  // would be 2.5, the mean 4); the all-reduce of 204 bytes 5 ms on rank 0, which arrived
  // first, and 2 ms on rank 1 (the cost: 2). A run still running is not read.
  void calibrationTakesSteadySteps() {
    QTemporaryDir dir;
    auto store = loom::store::RunStore::open(dir.filePath("runs.db").toStdString());
    QVERIFY(store.ok());
    const Plan plan = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    loom::trace::RunRecord run;
    run.name = "dp2";
    run.plan_json = loom::plan_to_json(plan);
    run.world_size = 2;
    const std::int64_t id = *store->create_run(run);
    const std::int64_t running = *store->create_run(run);
    for (std::int64_t r : {id, running})
      for (int rank = 0; rank < 2; ++rank) {
        QVERIFY(store->upsert_rank(r, cpu_rank_on_h(rank)).ok());
        std::vector<Event> events;
        const double forward_ms[] = {10, 1, 2, 3, 10};
        for (int step = 0; step < 5; ++step) {
          const std::int64_t t = step * 20'000'000LL;
          auto span = [&](EventKind kind, loom::trace::Stream stream, std::int64_t start, double ms, int layer = -1) {
            Event e;
            e.kind = kind, e.stream = stream, e.step = step, e.layer = layer;
            e.start_ns = start, e.end_ns = start + std::int64_t(ms * 1e6);
            return e;
          };
          events.push_back(span(EventKind::Step, loom::trace::Stream::Host, t, step == 4 ? 40 : 20));
          events.push_back(span(EventKind::Forward, loom::trace::Stream::Compute, t, forward_ms[step], 0));
          Event bucket = span(EventKind::AllReduce, loom::trace::Stream::Comm, t + 12'000'000, rank == 0 ? 5 : 2);
          bucket.bytes = 204;
          events.push_back(bucket);
        }
        QVERIFY(store->append_events(r, rank, events.data(), events.size()).ok());
      }
    QVERIFY(store->finish_run(id, loom::trace::RunStatus::Completed, 1.0, 640, "").ok());
    const Calibration cal = *loom::predict::calibrate(*store, "");
    QCOMPARE(cal.runs, (std::vector<std::int64_t>{id}));
    const loom::ModelInfo m = loom::infer_model(plan, nullptr);
    const LinearCost& fc1 = cal.costs.at(loom::predict::forward_key(layer(m, "fc1"), "cpu 1t"));
    QCOMPARE(fc1.points.size(), std::size_t(1));
    QCOMPARE(fc1.points[0].first, 64.0);
    QVERIFY2(std::abs(fc1.points[0].second - 3.2) < 1e-9, qPrintable(QString::number(fc1.points[0].second, 'g', 12)));
    QCOMPARE(fc1.observations, std::int64_t(8));
    QCOMPARE(cal.costs.at(loom::predict::allreduce_key(2, loom::CommBackend::Mpi)).points,
             (std::vector<std::pair<double, double>>{{204, 2.0}}));
    // The run measured only fc1 and the all-reduce: the predictor cannot make a step of
    // its plan, so the run gives no residual.
    QVERIFY(!cal.costs.count(loom::predict::residual_key(false, "cpu 1t")));
  }

  // One process whose nine spans take 1 ms each in steps of 20 ms: the predictor makes 9 ms
  // of those costs, so the residual is 11 ms per step of 2 ops, and the prediction of the
  // same plan gives back the 20 ms the run measured.
  void residualIsWhatTheStepTookBeyondItsCosts() {
    TempStore store;
    const Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}");
    store_one_millisecond_spans(store, plan);
    const Calibration cal = *loom::predict::calibrate(store, "");
    QCOMPARE(cal.costs.at(loom::predict::residual_key(false, "cpu 1t")).points, (std::vector<std::pair<double, double>>{{2, 11.0}}));
    QVERIFY(std::abs(must(loom::predict::predict_step(plan, cal, {2})).step_ms - 20.0) < 1e-9);
  }

  // A run started here whose rank ran on another machine (a hostfile, Slurm, the simulated
  // hosts) measured that machine, and a run across hosts the link between them: neither
  // calibrates this one. Its 2 ms spans would have made every cost 1.5 ms.
  void runsOnOtherMachinesDoNotCalibrateThisOne() {
    TempStore store;
    const Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}");
    const std::int64_t here = store_one_millisecond_spans(store, plan, 20, 1);
    store_one_millisecond_spans(store, plan, 30, 2, "another-host");
    const Calibration cal = *loom::predict::calibrate(store, "");
    QCOMPARE(cal.runs, (std::vector<std::int64_t>{here}));
    QVERIFY(std::abs(must(loom::predict::predict_step(plan, cal, {2})).step_ms - 20.0) < 1e-9);
  }

  // Two configurations of one plan (buckets of 25 MB, larger than the gradient, and of one
  // byte, one per tensor, which one process never all-reduces: the same keys at the same
  // sizes) measured nine spans of 1 and of 2 ms in steps
  // of 20 and 30 ms. Each is predicted from its own runs: 20 and 30 ms, the second's
  // forwards 3 x 2 ms. A third configuration, never run, takes every run's costs (1.5 ms,
  // the median) and its kind's residual (11 and 12: 11.5): 9 x 1.5 + 11.5 = 25 ms.
  void aMeasuredConfigurationKeepsItsOwnCosts() {
    TempStore store;
    const Plan a = tiny_plan(R"({"devices": )" + devices(1) + "}");
    Plan b = a, never_run = a;
    b.parallel.bucket_mb = 1.0 / (1 << 20), never_run.parallel.bucket_mb = 2.0 / (1 << 20);
    store_one_millisecond_spans(store, a, 20, 1);
    store_one_millisecond_spans(store, b, 30, 2);
    const Calibration cal = *loom::predict::calibrate(store, "");
    QCOMPARE(cal.by_configuration.size(), std::size_t(2));
    QVERIFY(loom::predict::configuration_of(a) != loom::predict::configuration_of(b));
    Plan renamed = a;
    renamed.name = "another name", renamed.training.steps = 5000, renamed.training.seed = 7, renamed.training.optimizer.lr = 1;
    QCOMPARE(loom::predict::configuration_of(renamed), loom::predict::configuration_of(a));
    // Nor what changes nothing the run does: another bucket larger than the gradient, the
    // schedule of one stage.
    Plan same = a;
    same.parallel.bucket_mb = 50, same.parallel.schedule = loom::Schedule::OneFOneB;
    QCOMPARE(loom::predict::configuration_of(same), loom::predict::configuration_of(a));
    // Threads left to the launcher are the threads the ranks got.
    Plan named = a, left = a;
    named.training.threads = 3, left.training.threads = 0;
    QCOMPARE(loom::predict::configuration_of(left, 3), loom::predict::configuration_of(named));
    QVERIFY(loom::predict::configuration_of(left, 2) != loom::predict::configuration_of(named));
    const Prediction pa = must(loom::predict::predict_step(a, cal, {2}));
    const Prediction pb = must(loom::predict::predict_step(b, cal, {2}));
    const Prediction pn = must(loom::predict::predict_step(never_run, cal, {2}));
    QVERIFY2(std::abs(pa.step_ms - 20.0) < 1e-9 && std::abs(pb.step_ms - 30.0) < 1e-9,
             qPrintable(QString("%1 %2").arg(pa.step_ms).arg(pb.step_ms)));
    double forward_b = 0;
    for (const PredictedSpan& sp : of(pb, 0, EventKind::Forward)) forward_b += sp.end_ms - sp.start_ms;
    QVERIFY(std::abs(forward_b - 6.0) < 1e-9);
    QVERIFY2(std::abs(pn.step_ms - 25.0) < 1e-9, qPrintable(QString::number(pn.step_ms)));
  }

  // Against the run it came from: the step (20 against 20 ms) and per kind what each side
  // says (3 forwards of 1 ms: 3 against 3); a run of another size is refused.
  void againstTheRunItCameFrom() {
    TempStore store;
    const Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}");
    const std::int64_t id = store_one_millisecond_spans(store, plan);
    const Prediction p = must(loom::predict::predict_step(plan, *loom::predict::calibrate(store, ""), {2}));
    const loom::predict::AgainstRun a = *loom::predict::against_run(p, store, id);
    QCOMPARE(a.steady_steps, std::int64_t(3));
    QVERIFY(std::abs(a.measured_step_ms - 20.0) < 1e-9 && std::abs(a.predicted_step_ms - 20.0) < 1e-9);
    std::map<EventKind, std::pair<double, double>> by_kind;
    for (const auto& k : a.kinds) by_kind[k.kind] = {k.predicted_ms, k.measured_ms};
    QCOMPARE(by_kind.size(), std::size_t(5));  // data, forward, loss, backward, optimizer
    QVERIFY(std::abs(by_kind[EventKind::Forward].first - 3.0) < 1e-9 && std::abs(by_kind[EventKind::Forward].second - 3.0) < 1e-9);
    QVERIFY(std::abs(by_kind[EventKind::Optimizer].first - 1.0) < 1e-9);
    const Plan dp2 = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    const Prediction two = must(loom::predict::predict_step(dp2, costs_for(dp2), {2}));
    const auto refused = loom::predict::against_run(two, store, id);
    QVERIFY(!refused.ok() && refused.error().code == loom::ErrorCode::InvalidArgument);
  }

  // Stored, the prediction is a run of kind "predicted": six equal steps of 20 ms that
  // the comparison puts beside the measured run (20 against 20 ms, no run starred, its
  // mode says "predicted"); it never calibrates.
  void storedPredictionSitsBesideTheRun() {
    TempStore store;
    const Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}");
    const std::int64_t measured = store_one_millisecond_spans(store, plan);
    const Calibration cal = *loom::predict::calibrate(store, "");
    const Prediction p = must(loom::predict::predict_step(plan, cal, {2}));
    const std::int64_t predicted = *loom::predict::store_prediction(store, plan, p, cal);
    const loom::trace::RunRecord run = *store.load_run(predicted);
    QVERIFY(run.predicted() && run.status == loom::trace::RunStatus::Completed);
    QVERIFY(run.log.find("runs " + std::to_string(measured)) != std::string::npos);
    QCOMPARE(store.load_events(predicted, 0)->size(), std::size_t(loom::predict::kStoredPredictionSteps) * (1 + p.spans.size()));
    QCOMPARE(loom::predict::calibrate(store, "")->runs, (std::vector<std::int64_t>{measured}));
    const auto c = loom::analysis::compare_runs(store, {measured, predicted});
    QVERIFY2(c.ok(), c.ok() ? "" : c.error().describe().c_str());
    QVERIFY(c->runs[1].mode.starts_with("predicted: one process"));
    for (const auto& row : c->metrics) {
      QCOMPARE(row.best, -1);
      if (row.key == "step_time_median_ms")
        QVERIFY(std::abs(row.values[0] - 20.0) < 1e-6 && std::abs(row.values[1] - 20.0) < 1e-6);
    }
  }
};

QTEST_GUILESS_MAIN(TestPredict)
#include "test_predict.moc"
