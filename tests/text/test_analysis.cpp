// Analysis tests: hand-built events whose overlaps are known give exact per-category
// seconds (nested spans counted once, containers and off-stream spans excluded) and exact
// exposed communication; all-reduce bandwidth, clock rows and scaling efficiency against
// a single-rank reference run come out as defined in analysis.h; the summary JSON carries
// every key the CLI and GUI read; pipeline bubbles per stage come out exactly, in each
// schedule's convention, with the in-flight and activation metrics per stage.
#include <QtTest>

#include <cmath>

#include "loom/analysis/analysis.h"
#include "loom/test/events.h"
#include "loom/test/temp_store.h"
#include "loom/text/run_text.h"

using loom::analysis::RankBreakdown;
using loom::trace::Event;
using loom::trace::EventKind;
using loom::trace::Stream;
using loom::testing::must;
using loom::testing::must_ok;
using loom::testing::TempStore;

namespace {
constexpr std::int64_t kMs = 1'000'000;

// Times in milliseconds; step 0 unless given.
Event span(EventKind kind, Stream stream, std::int64_t start_ms, std::int64_t end_ms, int step = 0, int layer = -1) {
  return loom::testing::span_ms(kind, stream, start_ms, end_ms, step, layer);
}

// Rank 0, one 100 ms step:
//   data [0,10)  forward [10,40) with layers [10,20) [20,40)  loss [40,45)  backward [45,75)
//   allreduce [60,85) on comm (overlaps backward)  wait [85,90)  optimizer [90,95)
//   a Forward on the comm stream [95,98) (not compute)  step container [0,100)
// compute = [10,75) = 65 ms; comm = 25; optimizer = 5; data = 10;
// busy union = [0,85) + [90,95) = 90 ms, so idle = 100 - 90 = 10 ms.
std::vector<Event> rank0_events() {
  return {
      span(EventKind::Step, Stream::Host, 0, 100),
      span(EventKind::DataLoad, Stream::Host, 0, 10),
      span(EventKind::Forward, Stream::Compute, 10, 40),
      span(EventKind::Forward, Stream::Compute, 10, 20, 0, 0),
      span(EventKind::Forward, Stream::Compute, 20, 40, 0, 1),
      span(EventKind::Loss, Stream::Compute, 40, 45),
      span(EventKind::Backward, Stream::Compute, 45, 75),
      span(EventKind::AllReduce, Stream::Comm, 60, 85),
      span(EventKind::Wait, Stream::Comm, 85, 90),
      span(EventKind::Optimizer, Stream::Compute, 90, 95),
      span(EventKind::Forward, Stream::Comm, 95, 98),
  };
}

// Rank 1: a 50 ms step with 20 ms of forward and nothing else: idle 30 ms.
std::vector<Event> rank1_events() {
  return {span(EventKind::Step, Stream::Host, 0, 50, 1), span(EventKind::Forward, Stream::Compute, 0, 20, 1)};
}

// Rank 1 of a 4-rank run: forward [0,20) with two 10 MB all-reduce buckets, [10,20)
// hidden behind it and [30,40) exposed: comm 20 ms, exposed 10 ms, algbw 1 GB/s.
std::vector<Event> rank1_with_allreduce() {
  std::vector<Event> v = rank1_events();
  for (auto [start, end] : {std::pair{10, 20}, std::pair{30, 40}}) {
    Event e = span(EventKind::AllReduce, Stream::Comm, start, end, 1);
    e.bytes = 10'000'000;
    v.push_back(e);
  }
  return v;
}

// Stage 0 (rank 0), one 100 ms step: data [0,10), forward [10,30) [30,50), idle [50,70)
// waiting for a receive, backward [70,90), optimizer [90,95); a send on the host stream
// and a forward on the comm stream (neither is compute work) and a forward after the step
// [100,110) (outside the window). busy = 75 ms, bubble = 25 ms.
std::vector<Event> stage0_events() {
  return {
      span(EventKind::Step, Stream::Host, 0, 100),     span(EventKind::DataLoad, Stream::Compute, 0, 10),
      span(EventKind::Forward, Stream::Compute, 10, 30), span(EventKind::Forward, Stream::Compute, 30, 50),
      span(EventKind::Send, Stream::Host, 30, 32),     span(EventKind::Idle, Stream::Compute, 50, 70),
      span(EventKind::Backward, Stream::Compute, 70, 90), span(EventKind::Optimizer, Stream::Compute, 90, 95),
      span(EventKind::Forward, Stream::Comm, 95, 98),  span(EventKind::Forward, Stream::Compute, 100, 110),
  };
}

// Stage 1 (rank 1), one 100 ms step: forward [40,60) with per-layer forwards nested in it
// (counted once), loss [60,65), backward [65,85). busy = 45 ms, bubble = 55 ms.
std::vector<Event> stage1_events() {
  return {
      span(EventKind::Step, Stream::Host, 0, 100),         span(EventKind::Forward, Stream::Compute, 40, 60),
      span(EventKind::Forward, Stream::Compute, 40, 50, 0, 3), span(EventKind::Forward, Stream::Compute, 50, 60, 0, 4),
      span(EventKind::Loss, Stream::Compute, 60, 65),      span(EventKind::Backward, Stream::Compute, 65, 85),
  };
}

// The default MLP on `devices` devices in `stages` stages (the later layers on stage 1).
loom::Plan pipeline_plan(int stages, int data_parallel, int microbatches, loom::Schedule schedule) {
  loom::Plan plan = loom::default_plan();
  plan.parallel.devices.assign(static_cast<std::size_t>(stages * data_parallel), loom::DeviceSpec{});
  plan.parallel.stages = stages;
  plan.parallel.data_parallel = data_parallel;
  plan.parallel.microbatches = microbatches;
  plan.parallel.schedule = schedule;
  for (std::size_t i = 3; i < plan.model.layers.size(); ++i) plan.model.layers[i].stage = stages - 1;
  return plan;
}

const std::vector<loom::trace::MetricRecord> kPipelineMetrics = {
    {0, 9, 1, "max_in_flight", 2.0},         {1, 9, 1, "max_in_flight", 1.0},
    {0, 9, 1, "peak_activation_bytes", 1048576.0}, {1, 9, 1, "peak_activation_bytes", 4096.0},
    {1, 9, 1, "loss", 3.0},  // another metric: ignored
};

// The default MLP trained asynchronously by `workers` workers and one server (rank workers).
loom::Plan async_plan(loom::SyncMode mode, int workers, int bound) {
  loom::Plan plan = loom::default_plan();
  plan.parallel.data_parallel = workers;
  plan.parallel.sync.mode = mode;
  plan.parallel.sync.bound = bound;
  plan.parallel.sync.servers = 1;
  plan.parallel.devices.assign(static_cast<std::size_t>(loom::world_size(plan)), loom::DeviceSpec{});
  // summarize_run ignores a plan that does not validate, so an invalid one would hide staleness.
  if (!loom::validate_plan(plan).empty()) qFatal("async_plan: %s", loom::validate_plan(plan)[0].reason.c_str());
  return plan;
}

// Worker 0's staleness is 1..20, worker 1's {100, 0}. Nearest rank over n values takes the
// ceil(p*n/100)-th smallest: worker 0 p50 = 10th = 10, p95 = 19th = 19 (0.95*20 is
// exactly 19: no rounding up to 20); worker 1 p50 = 1st = 0, p95 = 2nd = 100; all 22
// values [0, 1..20, 100]: p50 = 11th = 10, p95 = 21st = 20, mean 310/22.
std::vector<loom::trace::UpdateRecord> known_updates() {
  std::vector<loom::trace::UpdateRecord> u;
  for (int i = 1; i <= 20; ++i) u.push_back({0, 0, i, 50, 50 + i, i, i * kMs});
  u.push_back({1, 0, 0, 0, 100, 100, 21 * kMs});
  u.push_back({1, 0, 1, 100, 100, 0, 22 * kMs});
  return u;
}

// Worker 0 waits [0,10) and [20,25) with a nested Wait [21,23): 15 ms. The server (rank 2)
// waits too, but is no worker.
std::vector<std::vector<Event>> waiting_ranks() {
  return {{span(EventKind::Wait, Stream::Comm, 0, 10), span(EventKind::Forward, Stream::Compute, 10, 20),
           span(EventKind::Wait, Stream::Comm, 20, 25), span(EventKind::Wait, Stream::Comm, 21, 23)},
          {span(EventKind::Forward, Stream::Compute, 0, 30)},
          {span(EventKind::Wait, Stream::Comm, 0, 100)}};
}

void check_known_staleness(const loom::analysis::StalenessStats& st) {
  QVERIFY(st.present);
  QCOMPARE(st.mean, 310.0 / 22.0);
  QCOMPARE(st.p50, 10.0);
  QCOMPARE(st.p95, 20.0);
  QCOMPARE(st.max, std::int64_t(100));
  QCOMPARE(st.workers.size(), std::size_t(2));  // ranks 0 and 1; the server is not a worker
  const auto& w0 = st.workers[0];
  QCOMPARE(w0.rank, 0);
  QCOMPARE(w0.updates, std::int64_t(20));
  QCOMPARE(w0.mean, 10.5);
  QCOMPARE(w0.p50, 10.0);
  QCOMPARE(w0.p95, 19.0);
  QCOMPARE(w0.max, std::int64_t(20));
  QCOMPARE(w0.wait_s, 0.015);
  const auto& w1 = st.workers[1];
  QCOMPARE(w1.rank, 1);
  QCOMPARE(w1.updates, std::int64_t(2));
  QCOMPARE(w1.mean, 50.0);
  QCOMPARE(w1.p50, 0.0);
  QCOMPARE(w1.p95, 100.0);
  QCOMPARE(w1.max, std::int64_t(100));
  QCOMPARE(w1.wait_s, 0.0);
}

}  // namespace

class TestAnalysis : public QObject {
  Q_OBJECT
 private slots:
  void unionOfIntervals() {
    std::vector<std::pair<std::int64_t, std::int64_t>> v = {{5, 10}, {0, 3}, {2, 4}, {10, 12}, {20, 20}, {6, 7}};
    QCOMPARE(loom::analysis::union_length_ns(v), std::int64_t(4 + 7));  // [0,4) + [5,12)
    std::vector<std::pair<std::int64_t, std::int64_t>> none;
    QCOMPARE(loom::analysis::union_length_ns(none), std::int64_t(0));
  }

  void breakdownIsExact() {
    RankBreakdown b = loom::analysis::breakdown_rank(0, rank0_events());
    QCOMPARE(b.compute_s, 0.065);
    QCOMPARE(b.comm_s, 0.025);
    QCOMPARE(b.optimizer_s, 0.005);
    QCOMPARE(b.data_s, 0.010);
    QCOMPARE(b.idle_s, 0.010);
    QCOMPARE(b.events_stored, std::int64_t(11));
    // allreduce [60,85) against compute up to 75: [75,85) is exposed.
    QCOMPARE(b.exposed_comm_s, 0.010);
  }

  // A gpu rank's copy lane only shows its uploads: their time lies in DataLoad spans
  // already, so a copy span (here placed after everything else) changes no category.
  void copyLaneIsShownNotCounted() {
    std::vector<Event> events = rank0_events();
    events.push_back(span(EventKind::Copy, Stream::Copy, 95, 99));
    RankBreakdown b = loom::analysis::breakdown_rank(0, events);
    QCOMPARE(b.data_s, 0.010);
    QCOMPARE(b.idle_s, 0.010);
    QCOMPARE(b.compute_s, 0.065);
    QCOMPARE(b.events_stored, std::int64_t(12));
  }

  // A gpu rank as measured on an H200 before the fix: a host-timed optimizer span over
  // stamped backward work, a host-timed loss starting before the forward spans. The
  // categories still partition the window: an instant is compute if any compute span
  // covers it, else optimizer, else data, else exposed communication, else idle. Step
  // [0,100): data [0,10), forward [10,40), loss (host-timed) [5,45), backward [45,80),
  // optimizer (host-timed) [60,90), all-reduce [70,95) on comm.
  void categoriesPartitionTheWindowWhenSpansOverlap() {
    const std::vector<Event> events = {
        span(EventKind::Step, Stream::Host, 0, 100),        span(EventKind::DataLoad, Stream::Compute, 0, 10),
        span(EventKind::Forward, Stream::Compute, 10, 40), span(EventKind::Loss, Stream::Compute, 5, 45),
        span(EventKind::Backward, Stream::Compute, 45, 80), span(EventKind::Optimizer, Stream::Compute, 60, 90),
        span(EventKind::AllReduce, Stream::Comm, 70, 95),
    };
    const RankBreakdown b = loom::analysis::breakdown_rank(0, events);
    QCOMPARE(b.compute_s, 0.075);   // [5,80)
    QCOMPARE(b.optimizer_s, 0.010);  // [80,90)
    QCOMPARE(b.data_s, 0.005);       // [0,5)
    QCOMPARE(b.comm_s, 0.025);
    QCOMPARE(b.exposed_comm_s, 0.005);  // [90,95)
    QCOMPARE(b.idle_s, 0.005);          // [95,100)
    QCOMPARE(b.compute_s + b.optimizer_s + b.data_s + b.exposed_comm_s + b.idle_s + b.descheduled_s, b.window_s);
  }

  // A communication thread waiting for a core while the rank computes cost the rank
  // nothing: only descheduling inside exposed communication (or waits) is descheduled time.
  void descheduledHiddenCommunicationIsNotLostTime() {
    std::vector<Event> events = rank0_events();
    events[7].descheduled_us = 20'000;  // the all-reduce [60,85): 15 ms hidden, 10 exposed
    const RankBreakdown b = loom::analysis::breakdown_rank(0, events);
    QCOMPARE(b.descheduled_s, 0.010);   // no more than was exposed
    QCOMPARE(b.exposed_comm_s, 0.0);
    QCOMPARE(b.comm_s, 0.005);          // 25 ms of communication less the 20 descheduled
    QCOMPARE(b.compute_s + b.optimizer_s + b.data_s + b.exposed_comm_s + b.idle_s + b.descheduled_s, b.window_s);
  }

  // A stage blocked in a receive it marked Idle waits for its neighbour: bubble, not comm.
  void pipelineReceiveWaitIsIdle() {
    std::vector<Event> events = {
        span(EventKind::Forward, Stream::Compute, 0, 10), span(EventKind::Idle, Stream::Compute, 10, 30),
        span(EventKind::Recv, Stream::Host, 10, 30),      span(EventKind::Send, Stream::Host, 30, 32),
        span(EventKind::Backward, Stream::Compute, 32, 40),
    };
    RankBreakdown b = loom::analysis::breakdown_rank(0, events);
    QCOMPARE(b.comm_s, 0.002);  // the send only
    QCOMPARE(b.idle_s, 0.020);
    QCOMPARE(b.exposed_comm_s, 0.002);
  }

  // Messages counted per steady step: the warm-up step's and setup's are left out.
  void sendsAreCountedPerSteadyStep() {
    std::vector<Event> events = {span(EventKind::Send, Stream::Host, 0, 1, -1)};  // a probe before training
    for (int step = 0; step < 4; ++step) {
      const std::int64_t t = 10 + 10 * step;
      events.push_back(span(EventKind::Step, Stream::Host, t, t + 10, step));
      events.push_back(span(EventKind::Send, Stream::Host, t + 2, t + 3, step));
      events.push_back(span(EventKind::Send, Stream::Host, t + 6, t + 7, step));
    }
    const RankBreakdown b = loom::analysis::breakdown_rank(0, events);
    QCOMPARE(b.steady_steps, std::int64_t(3));
    QCOMPARE(b.sends_per_step, 2.0);
  }

  void overlapOfIntervalSets() {
    std::vector<std::pair<std::int64_t, std::int64_t>> a = {{0, 30}, {20, 50}, {70, 80}};
    std::vector<std::pair<std::int64_t, std::int64_t>> b = {{5, 10}, {40, 45}, {48, 75}, {44, 46}};
    // union a = [0,50) [70,80); union b = [5,10) [40,46) [48,75): 5 + 6 + 2 + 5.
    QCOMPARE(loom::analysis::overlap_length_ns(a, b), std::int64_t(18));
    std::vector<std::pair<std::int64_t, std::int64_t>> none;
    QCOMPARE(loom::analysis::overlap_length_ns(a, none), std::int64_t(0));
  }

  void exposedCommIsCommWithoutWork() {
    // comm [0,30) [20,50) (union 50 ms); work: data [5,10), compute [40,45), optimizer
    // [48,60). A Forward on the comm stream [10,20) and a Wait [20,30) are not work.
    std::vector<Event> events = {
        span(EventKind::AllReduce, Stream::Comm, 0, 30),  span(EventKind::Send, Stream::Comm, 20, 50),
        span(EventKind::DataLoad, Stream::Host, 5, 10),   span(EventKind::Backward, Stream::Compute, 40, 45),
        span(EventKind::Optimizer, Stream::Compute, 48, 60), span(EventKind::Forward, Stream::Comm, 10, 20),
        span(EventKind::Wait, Stream::Compute, 20, 30),
    };
    RankBreakdown b = loom::analysis::breakdown_rank(0, events);
    QCOMPARE(b.comm_s, 0.050);
    QCOMPARE(b.exposed_comm_s, 0.038);  // 50 - (5 + 5 + 2)
    // No communication at all: nothing exposed.
    QCOMPARE(loom::analysis::breakdown_rank(1, rank1_events()).exposed_comm_s, 0.0);
  }

  void samePlanButParallelism() {
    using loom::analysis::same_plan_but_parallelism;
    QVERIFY(same_plan_but_parallelism(R"({"name": "a", "model": {"x": 1}, "parallel": {"data_parallel": 4}})",
                                      R"({"model": {"x": 1}, "name": "b"})"));
    QVERIFY(!same_plan_but_parallelism(R"({"model": {"x": 1}})", R"({"model": {"x": 2}})"));
    QVERIFY(!same_plan_but_parallelism("not json", "not json"));
  }

  void allReduceClockAndScaling() {
    TempStore store;
    const std::string single = R"({"name": "mlp", "model": "mlp", "training": {"batch": 32}, "parallel": {}})";
    const std::string dp4 = R"({"name": "mlp-dp4", "model": "mlp", "training": {"batch": 32},
                                "parallel": {"data_parallel": 4}})";
    const std::string other = R"({"name": "mlp", "model": "mlp", "training": {"batch": 64}})";
    auto add_run = [&](const std::string& plan, int world, loom::trace::RunStatus status, std::int64_t started,
                       std::int64_t samples) {
      loom::trace::RunRecord r;
      r.plan_json = plan;
      r.world_size = world;
      r.started_unix_ms = started;
      std::int64_t id = must(store.create_run(r));
      must_ok(store.finish_run(id, status, 2.0, samples, ""));
      return id;
    };
    add_run(single, 1, loom::trace::RunStatus::Completed, 1000, 100);                   // older reference: not used
    const std::int64_t reference = add_run(single, 1, loom::trace::RunStatus::Completed, 2000, 400);  // 200 samples/s
    add_run(single, 1, loom::trace::RunStatus::Failed, 3000, 50);                       // newer but failed
    add_run(other, 1, loom::trace::RunStatus::Completed, 4000, 1000);                   // newer, different training
    const std::int64_t id = add_run(dp4, 4, loom::trace::RunStatus::Completed, 5000, 1000);  // 500 samples/s

    auto e0 = rank0_events();
    e0[7].bytes = 50'000'000;  // the [60,85) all-reduce: 2 GB/s
    auto e1 = rank1_with_allreduce();
    QVERIFY(store.append_events(id, 0, e0.data(), e0.size()).ok());
    QVERIFY(store.append_events(id, 1, e1.data(), e1.size()).ok());
    loom::trace::RankRecord r1{1, "h1", "cpu", 1'000'000, 2'000, 0, 5};
    r1.sync_start_ns = 0;
    r1.sync_end_ns = 10'000'000'000;
    r1.offset_end_ns = 1'000'500;  // 500 ns over 10 s: 0.05 ppm
    QVERIFY(store.upsert_rank(id, {0, "h0", "cpu", 0, 0, 0, 11}).ok());
    QVERIFY(store.upsert_rank(id, r1).ok());
    QVERIFY(store.upsert_rank(id, {2, "h2", "cpu", 7, 1, 0, 0}).ok());  // no end estimate
    QVERIFY(store.append_metrics(id, {{0, 0, 1, "p2p_gbs", 3.0}, {0, 0, 2, "p2p_gbs", 4.5}}).ok());

    auto s = must(loom::analysis::summarize_run(store, id));
    QCOMPARE(s.ranks[1].comm_s, 0.020);
    QCOMPARE(s.ranks[1].exposed_comm_s, 0.010);
    QCOMPARE(s.allreduce.count, std::int64_t(3));
    QCOMPARE(s.allreduce.bytes, std::int64_t(70'000'000));
    QVERIFY(qFuzzyCompare(s.allreduce.seconds, 0.045));
    QVERIFY(qFuzzyCompare(s.allreduce.algbw_gbs, 1.5));  // mean of 2 and 1; ranks 2, 3 ran none
    QVERIFY(qFuzzyCompare(s.allreduce.busbw_gbs, 2.25));  // 1.5 * 2 * 3 / 4
    QCOMPARE(s.allreduce.p2p_gbs, 4.5);                  // the last probe
    QVERIFY(qFuzzyCompare(s.allreduce.hidden_fraction, 1.0 - 0.020 / 0.045));

    QCOMPARE(s.clock.size(), std::size_t(3));
    QCOMPARE(s.clock[1].offset_ns, std::int64_t(1'000'000));
    QCOMPARE(s.clock[1].offset_end_ns, std::int64_t(1'000'500));
    QCOMPARE(s.clock[1].uncertainty_ns, std::int64_t(2'000));
    QVERIFY(qFuzzyCompare(s.clock[1].drift_ppm, 0.05));
    QCOMPARE(s.clock[2].offset_end_ns, std::int64_t(7));  // constant without an end estimate
    QCOMPARE(s.clock[2].drift_ppm, 0.0);

    QVERIFY(s.scaling.has_value());
    QCOMPARE(s.scaling->reference_run_id, reference);
    QCOMPARE(s.scaling->reference_samples_per_s, 200.0);
    QCOMPARE(s.scaling->efficiency, 0.625);  // 500 / (4 * 200)

    nlohmann::json j = loom::analysis::summary_to_json(s);
    for (const char* key : {"bytes", "count", "seconds", "algbw_gbs", "busbw_gbs", "p2p_gbs", "hidden_fraction"})
      QVERIFY2(j["allreduce"].contains(key), key);
    QVERIFY(qFuzzyCompare(j["allreduce"]["busbw_gbs"].get<double>(), 2.25));
    QCOMPARE(j["clock"].size(), std::size_t(3));
    for (const char* key : {"rank", "offset_ns", "offset_end_ns", "uncertainty_ns", "drift_ppm"})
      QVERIFY2(j["clock"][1].contains(key), key);
    QCOMPARE(j["scaling"]["reference_run_id"].get<std::int64_t>(), reference);
    QCOMPARE(j["scaling"]["efficiency"].get<double>(), 0.625);
    QCOMPARE(j["ranks"][1]["exposed_comm_s"].get<double>(), 0.010);

    const std::string text = loom::text::format_summary(s);
    for (const char* part : {"busbw 2.25 GB/s", "p2p probe 4.50 GB/s", "hidden 56 %", "clock rank 1",
                             "62.5 % efficiency", "exposed_s"})
      QVERIFY2(text.find(part) != std::string::npos, (std::string(part) + " missing in:\n" + text).c_str());
  }

  void summaryFromStore() {
    TempStore store;
    loom::trace::RunRecord run;
    run.name = "dp2";
    run.plan_json = R"({"replicas": 2, "model": "mlp"})";
    run.world_size = 2;
    std::int64_t id = must(store.create_run(run));
    auto e0 = rank0_events(), e1 = rank1_events();
    QVERIFY(store.append_events(id, 0, e0.data(), e0.size()).ok());
    QVERIFY(store.append_events(id, 1, e1.data(), e1.size()).ok());
    QVERIFY(store.upsert_rank(id, {0, "h", "cpu", 0, 0, 0, 12}).ok());  // one event dropped
    QVERIFY(store.upsert_rank(id, {1, "h", "cpu", 0, 0, 0, 2}).ok());
    QVERIFY(store.append_metrics(id, {{0, 0, 1, "loss", 2.0},
                                      {0, 1, 2, "loss", 1.5},
                                      {0, 2, 3, "loss", 0.75},
                                      {1, 2, 3, "loss", 0.80},  // same step from rank 1
                                      {0, 2, 4, "test_accuracy", 0.875}})
                .ok());
    QVERIFY(store.finish_run(id, loom::trace::RunStatus::Completed, 2.0, 1000, "").ok());

    auto s = must(loom::analysis::summarize_run(store, id));
    QCOMPARE(s.world_size, 2);
    QCOMPARE(s.steps, std::int64_t(3));
    QCOMPARE(s.wall_s, 2.0);
    QCOMPARE(s.samples_per_s, 500.0);
    QCOMPARE(s.final_loss, 0.80);
    QCOMPARE(s.test_accuracy, 0.875);
    QCOMPARE(s.ranks.size(), std::size_t(2));
    QCOMPARE(s.ranks[0].compute_s, 0.065);
    QCOMPARE(s.ranks[0].idle_s, 0.010);
    QCOMPARE(s.ranks[0].events_recorded, std::int64_t(12));
    QCOMPARE(s.ranks[0].events_stored, std::int64_t(11));
    QCOMPARE(s.ranks[1].compute_s, 0.020);
    QCOMPARE(s.ranks[1].idle_s, 0.030);

    nlohmann::json j = loom::analysis::summary_to_json(s);
    for (const char* key : {"id", "status", "plan", "world_size", "steps", "wall_s", "samples_per_s",
                            "final_loss", "test_accuracy", "ranks"})
      QVERIFY2(j.contains(key), key);
    QCOMPARE(j["id"].get<std::int64_t>(), id);
    QCOMPARE(j["status"].get<std::string>(), std::string("completed"));
    QVERIFY(j["plan"].is_object());
    QCOMPARE(j["plan"]["replicas"].get<int>(), 2);
    QCOMPARE(j["test_accuracy"].get<double>(), 0.875);
    QCOMPARE(j["ranks"].size(), std::size_t(2));
    for (const char* key : {"rank", "compute_s", "comm_s", "optimizer_s", "data_s", "idle_s", "events_recorded",
                            "events_stored"})
      QVERIFY2(j["ranks"][0].contains(key), key);
    QCOMPARE(j["ranks"][0]["comm_s"].get<double>(), 0.025);

    std::string text = loom::text::format_summary(s);
    QVERIFY(text.find("dp2") != std::string::npos);
    QVERIFY(text.find("completed") != std::string::npos);
    QVERIFY(text.find("500.0 samples/s") != std::string::npos);
  }

  void pipelineGpipe() {
    const loom::Plan plan = pipeline_plan(2, 1, 4, loom::Schedule::GPipe);
    QVERIFY(loom::validate_plan(plan).empty());
    const auto p = loom::analysis::pipeline_stats(plan, {stage0_events(), stage1_events()}, kPipelineMetrics);
    QCOMPARE(p.schedule, std::string("gpipe"));
    QCOMPARE(p.stages, 2);
    QCOMPARE(p.microbatches, 4);
    QCOMPARE(p.bubble_convention, std::string("of stage step time"));
    QCOMPARE(p.stages_stats.size(), std::size_t(2));
    const auto& s0 = p.stages_stats[0];
    const auto& s1 = p.stages_stats[1];
    QCOMPARE(s0.stage, 0);
    QCOMPARE(s0.ranks, std::vector<int>{0});
    QCOMPARE(s1.ranks, std::vector<int>{1});
    QCOMPARE(s0.busy_s, 0.075);
    QCOMPARE(s0.bubble_s, 0.025);
    QCOMPARE(s0.bubble_fraction, 0.25);  // 25 / 100 of the window
    QCOMPARE(s0.bubble_textbook, 0.2);   // (2-1) / (4+2-1)
    QCOMPARE(s0.forward_ms, 12.5);       // data + two forwards = 50 ms over 4 micro-batches
    QCOMPARE(s0.backward_ms, 5.0);
    QVERIFY(s0.bubble_theory >= 0 && s0.bubble_theory < 1);  // replayed: replay tests check values
    QCOMPARE(s1.busy_s, 0.045);
    QCOMPARE(s1.bubble_s, 0.055);
    QCOMPARE(s1.bubble_fraction, 0.55);
    QCOMPARE(s1.bubble_textbook, 0.2);
    QCOMPARE(s1.forward_ms, 6.25);  // forward and loss, 25 ms over 4
    QCOMPARE(s0.max_in_flight, std::int64_t(2));
    QCOMPARE(s1.max_in_flight, std::int64_t(1));
    QCOMPARE(s0.peak_activation_bytes, std::int64_t(1048576));
    QCOMPARE(s1.peak_activation_bytes, std::int64_t(4096));
  }

  void pipeline1f1b() {
    const loom::Plan plan = pipeline_plan(2, 1, 4, loom::Schedule::OneFOneB);
    QVERIFY(loom::validate_plan(plan).empty());
    const auto p = loom::analysis::pipeline_stats(plan, {stage0_events(), stage1_events()}, {});
    QCOMPARE(p.schedule, std::string("1f1b"));
    // One convention for every schedule: of the stage's step time, never above 100 %.
    QCOMPARE(p.bubble_convention, std::string("of stage step time"));
    QCOMPARE(p.stages_stats[0].bubble_fraction, 0.25);
    QCOMPARE(p.stages_stats[0].bubble_textbook, 0.2);  // same bubble as GPipe: (2-1) / (4+2-1)
    QCOMPARE(p.stages_stats[1].bubble_fraction, 0.55);
    QCOMPARE(p.stages_stats[1].max_in_flight, std::int64_t(0));  // no metrics: 0
    QCOMPARE(p.stages_stats[1].peak_activation_bytes, std::int64_t(0));
  }

  // Replicas of a stage are averaged, skipping ranks without events; a rank without
  // Step spans has no window, so nothing to call a bubble.
  void pipelineReplicasAndNoSteps() {
    const loom::Plan dp = pipeline_plan(1, 4, 1, loom::Schedule::GPipe);
    QVERIFY(loom::validate_plan(dp).empty());
    auto p = loom::analysis::pipeline_stats(dp, {stage0_events(), stage1_events()}, kPipelineMetrics);
    QCOMPARE(p.stages_stats.size(), std::size_t(1));
    QCOMPARE(p.stages_stats[0].ranks, (std::vector<int>{0, 1, 2, 3}));
    QCOMPARE(p.stages_stats[0].busy_s, 0.060);  // (75 + 45) / 2: ranks 2 and 3 have no events
    QCOMPARE(p.stages_stats[0].bubble_s, 0.040);
    QCOMPARE(p.stages_stats[0].bubble_fraction, 0.4);
    QCOMPARE(p.stages_stats[0].bubble_textbook, 0.0);
    QCOMPARE(p.stages_stats[0].bubble_theory, 0.0);  // one stage: the replay has no bubble
    QCOMPARE(p.stages_stats[0].max_in_flight, std::int64_t(2));

    const loom::Plan plan = pipeline_plan(2, 1, 4, loom::Schedule::OneFOneB);
    p = loom::analysis::pipeline_stats(plan, {{span(EventKind::Forward, Stream::Compute, 0, 10)}}, {});
    QCOMPARE(p.stages_stats[0].busy_s, 0.0);
    QCOMPARE(p.stages_stats[0].bubble_s, 0.0);
    QVERIFY(std::isnan(p.stages_stats[0].bubble_fraction));
    QVERIFY(std::isnan(p.stages_stats[1].bubble_fraction));
  }

  void pipelineInSummary() {
    TempStore store;
    loom::trace::RunRecord run;
    run.plan_json = loom::plan_to_json(pipeline_plan(2, 1, 4, loom::Schedule::GPipe));
    run.world_size = 2;
    const std::int64_t id = must(store.create_run(run));
    auto e0 = stage0_events(), e1 = stage1_events();
    QVERIFY(store.append_events(id, 0, e0.data(), e0.size()).ok());
    QVERIFY(store.append_events(id, 1, e1.data(), e1.size()).ok());
    QVERIFY(store.append_metrics(id, kPipelineMetrics).ok());
    auto s = must(loom::analysis::summarize_run(store, id));
    QVERIFY(s.pipeline.has_value());
    QCOMPARE(s.pipeline->stages_stats[1].bubble_fraction, 0.55);
    QCOMPARE(s.pipeline->stages_stats[0].peak_activation_bytes, std::int64_t(1048576));

    nlohmann::json j = loom::analysis::summary_to_json(s);
    QCOMPARE(j["schedule"].get<std::string>(), std::string("gpipe"));
    QCOMPARE(j["microbatches"].get<int>(), 4);
    QCOMPARE(j["bubble_convention"].get<std::string>(), std::string("of stage step time"));
    QCOMPARE(j["stages"].size(), std::size_t(2));
    for (const char* key : {"stage", "ranks", "busy_s", "bubble_s", "bubble_fraction", "bubble_theory",
                            "max_in_flight", "peak_activation_bytes"})
      QVERIFY2(j["stages"][1].contains(key), key);
    QCOMPARE(j["stages"][1]["ranks"], nlohmann::json::array({1}));
    QCOMPARE(j["stages"][0]["bubble_fraction"].get<double>(), 0.25);
    QCOMPARE(j["stages"][0]["max_in_flight"].get<std::int64_t>(), std::int64_t(2));

    const std::string text = loom::text::format_summary(s);
    for (const char* part : {"gpipe, 2 stages, 4 micro-batch(es); bubble = idle of stage step time", "55.0", "20.0",
                             "stages are unbalanced",
                             "1.0 MiB"})
      QVERIFY2(text.find(part) != std::string::npos, (std::string(part) + " missing in:\n" + text).c_str());
  }

  // A bandwidth probe far below this host's usual rate is flagged, not silently used: three
  // earlier runs on the host measured about 5 GB/s; 0.5 GB/s is flagged, 3 GB/s is not, and
  // runs on another host or with another world size are no history. Nor are runs whose
  // probe crossed to another host (rank 1 on "far"): 0.11 GB/s across is not flagged
  // against the 5 GB/s on one host, and the probes across are no history for one on it.
  void unusualProbeIsFlagged() {
    TempStore store;
    auto probed_run = [&](const std::string& host, int world, double gbs, const std::string& rank1_host = "") {
      loom::trace::RunRecord run;
      run.host = host;
      run.world_size = world;
      const std::int64_t id = must(store.create_run(run));
      must_ok(store.append_metrics(id, {{0, -1, 1, "p2p_gbs", gbs}}));
      if (!rank1_host.empty()) {
        loom::trace::RankRecord zero, one;
        zero.rank = 0, zero.host = host;
        one.rank = 1, one.host = rank1_host;
        must_ok(store.upsert_rank(id, zero));
        must_ok(store.upsert_rank(id, one));
      }
      return id;
    };
    for (double gbs : {4.8, 5.0, 5.3}) probed_run("h", 2, gbs);
    probed_run("other", 2, 50.0);
    probed_run("h", 4, 50.0);
    const auto slow = must(loom::analysis::summarize_run(store, probed_run("h", 2, 0.5)));
    QCOMPARE(slow.warnings.size(), std::size_t(1));
    QVERIFY2(slow.warnings[0].find("bandwidth probe measured 0.50 GB/s") != std::string::npos, slow.warnings[0].c_str());
    QVERIFY(slow.warnings[0].find("usual 5.00 GB/s") != std::string::npos);
    const auto fine = must(loom::analysis::summarize_run(store, probed_run("h", 2, 3.0)));
    QVERIFY(fine.warnings.empty());
    const auto across = must(loom::analysis::summarize_run(store, probed_run("h", 2, 0.11, "far")));
    QVERIFY2(across.warnings.empty(), across.warnings.empty() ? "" : across.warnings[0].c_str());
    for (double gbs : {0.01, 0.01, 0.01}) probed_run("h", 2, gbs, "far");
    const auto still = must(loom::analysis::summarize_run(store, probed_run("h", 2, 0.5)));
    QCOMPARE(still.warnings.size(), std::size_t(1));
    QVERIFY2(still.warnings[0].find("usual 4.80 GB/s (median of 5 earlier runs)") != std::string::npos,
             still.warnings[0].c_str());  // 4.8, 5.0, 5.3, 3.0 and 0.5 on h alone
  }

  void stalenessPercentilesAndWorkers() {
    const auto ps = loom::analysis::staleness_stats(known_updates(), waiting_ranks(),
                                                     async_plan(loom::SyncMode::ParameterServer, 2, 3));
    check_known_staleness(ps);
    QCOMPARE(ps.mode, std::string("parameter_server"));
    QCOMPARE(ps.bound, -1);  // the plan's bound means nothing outside ssp
    const auto ssp = loom::analysis::staleness_stats(known_updates(), waiting_ranks(),
                                                      async_plan(loom::SyncMode::Ssp, 2, 3));
    check_known_staleness(ssp);
    QCOMPARE(ssp.mode, std::string("ssp"));
    QCOMPARE(ssp.bound, 3);

    // One value: every percentile is that value. None: not present, workers still listed.
    const auto one = loom::analysis::staleness_stats({{1, 0, 0, 4, 11, 7, 0}}, {},
                                                      async_plan(loom::SyncMode::Ssp, 2, 3));
    QCOMPARE(one.p50, 7.0);
    QCOMPARE(one.p95, 7.0);
    QCOMPARE(one.workers[0].updates, std::int64_t(0));
    QCOMPARE(one.workers[1].p95, 7.0);
    const auto none = loom::analysis::staleness_stats({}, waiting_ranks(), async_plan(loom::SyncMode::LocalSgd, 2, 0));
    QVERIFY(!none.present);
    QCOMPARE(none.mode, std::string("local_sgd"));
    QCOMPARE(none.workers.size(), std::size_t(2));
  }

  // From a real store: updates, Wait spans and param_divergence metrics through
  // summarize_run into the JSON `show --json` prints and the text `show` prints.
  void stalenessAndDivergenceInSummary() {
    TempStore store;
    loom::trace::RunRecord run;
    run.plan_json = loom::plan_to_json(async_plan(loom::SyncMode::Ssp, 2, 3));
    run.world_size = 3;
    const std::int64_t id = must(store.create_run(run));
    const auto ranks = waiting_ranks();
    for (int r = 0; r < 3; ++r)
      QVERIFY(store.append_events(id, r, ranks[std::size_t(r)].data(), ranks[std::size_t(r)].size()).ok());
    QVERIFY(store.append_updates(id, known_updates()).ok());
    QVERIFY(store.append_metrics(id, {{0, 1, 5, "param_divergence", 0.5}, {0, 2, 6, "param_divergence", 0.25},
                                      {1, 2, 7, "param_divergence", 0.75}}).ok());
    auto s = must(loom::analysis::summarize_run(store, id));
    check_known_staleness(s.staleness);
    QCOMPARE(s.staleness.bound, 3);

    const nlohmann::json j = loom::analysis::summary_to_json(s);
    QVERIFY(j.contains("staleness"));
    const nlohmann::json& st = j["staleness"];
    QCOMPARE(st["mode"].get<std::string>(), std::string("ssp"));
    QCOMPARE(st["bound"].get<int>(), 3);
    QCOMPARE(st["overall"]["mean"].get<double>(), 310.0 / 22.0);
    QCOMPARE(st["overall"]["p50"].get<double>(), 10.0);
    QCOMPARE(st["overall"]["p95"].get<double>(), 20.0);
    QCOMPARE(st["overall"]["max"].get<std::int64_t>(), std::int64_t(100));
    QCOMPARE(st["workers"].size(), std::size_t(2));
    const nlohmann::json& w0 = st["workers"][0];
    QCOMPARE(w0["rank"].get<int>(), 0);
    QCOMPARE(w0["updates"].get<std::int64_t>(), std::int64_t(20));
    QCOMPARE(w0["mean"].get<double>(), 10.5);
    QCOMPARE(w0["p50"].get<double>(), 10.0);
    QCOMPARE(w0["p95"].get<double>(), 19.0);
    QCOMPARE(w0["max"].get<std::int64_t>(), std::int64_t(20));
    QCOMPARE(w0["wait_s"].get<double>(), 0.015);
    QCOMPARE(st["workers"][1]["p95"].get<double>(), 100.0);
    QCOMPARE(j["divergence"]["count"].get<std::int64_t>(), std::int64_t(3));
    QCOMPARE(j["divergence"]["mean"].get<double>(), 0.5);
    QCOMPARE(j["divergence"]["last"].get<double>(), 0.75);  // step 2, latest time

    const std::string text = loom::text::format_summary(s);
    for (const char* part : {"Staleness (ssp): mean 14.09, p50 10, p95 20, max 100 (bound 3)", "wait_s", "0.0150",
                             "divergence:    3 samples, last 0.75, mean 0.5"})
      QVERIFY2(text.find(part) != std::string::npos, (std::string(part) + " missing in:\n" + text).c_str());

    // parameter_server: no bound key.
    run.plan_json = loom::plan_to_json(async_plan(loom::SyncMode::ParameterServer, 2, 3));
    const std::int64_t ps = must(store.create_run(run));
    QVERIFY(store.append_updates(ps, known_updates()).ok());
    const nlohmann::json jp = loom::analysis::summary_to_json(must(loom::analysis::summarize_run(store, ps)));
    QCOMPARE(jp["staleness"]["mode"].get<std::string>(), std::string("parameter_server"));
    QVERIFY(!jp["staleness"].contains("bound"));
    QVERIFY(!jp.contains("divergence"));
  }

  void unknownValuesAreNull() {
    TempStore store;
    std::int64_t id = must(store.create_run({}));
    auto e1 = rank1_events();  // steps up to 1, no metrics
    QVERIFY(store.append_events(id, 0, e1.data(), e1.size()).ok());
    auto s = must(loom::analysis::summarize_run(store, id));
    QCOMPARE(s.steps, std::int64_t(1));  // without a loss metric: its one Step span (step 1)
    QVERIFY(std::isnan(s.final_loss));
    nlohmann::json j = loom::analysis::summary_to_json(s);
    QVERIFY(j["final_loss"].is_null());
    QVERIFY(j["test_accuracy"].is_null());
    QVERIFY(j["plan"].is_null());
    QCOMPARE(j["samples_per_s"].get<double>(), 0.0);
    // One rank, no communication: bandwidths and hidden fraction unknown, no scaling.
    for (const char* key : {"algbw_gbs", "busbw_gbs", "p2p_gbs", "hidden_fraction"})
      QVERIFY2(j["allreduce"][key].is_null(), key);
    QCOMPARE(j["allreduce"]["count"].get<std::int64_t>(), std::int64_t(0));
    QVERIFY(j["clock"].is_array());
    QVERIFY(j["scaling"].is_null());
    QCOMPARE(j["ranks"][0]["exposed_comm_s"].get<double>(), 0.0);
    QVERIFY(j["schedule"].is_null());  // no plan: no stages
    QVERIFY(j["stages"].is_array() && j["stages"].empty());
    QVERIFY(!j.contains("staleness"));  // no updates: absent, not null
    QVERIFY(!j.contains("divergence"));
    QCOMPARE(loom::analysis::summarize_run(store, id + 1).error().code, loom::ErrorCode::NotFound);
  }
};

QTEST_GUILESS_MAIN(TestAnalysis)
#include "test_analysis.moc"
