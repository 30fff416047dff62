// Engine behaviour that needs no MPI: deterministic model construction, training that
// learns, gradient accumulation equal to one full batch.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <thread>

#include "loom/comm/threads.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/data_parallel_trainer.h"
#include "loom/trace/recorder.h"

using namespace loom;

namespace {

Plan spirals_plan(std::int64_t steps, OptimizerKind optimizer, double lr) {
  Plan plan;
  plan.name = "spirals-test";
  plan.model.input = {2};
  LayerSpec hidden;
  hidden.kind = LayerKind::Linear;
  hidden.out = 64;
  LayerSpec act;
  act.kind = LayerKind::Relu;
  LayerSpec output;
  output.kind = LayerKind::Linear;
  output.out = 3;
  plan.model.layers = {hidden, act, hidden, act, output};
  plan.data.source = DataSource::Synthetic;
  plan.data.synthetic = SyntheticKind::Spirals;
  plan.data.classes = 3;
  plan.data.train_samples = 1536;
  plan.data.test_samples = 300;
  plan.data.noise = 0.1;
  plan.training.batch = 64;
  plan.training.steps = steps;
  plan.training.optimizer.kind = optimizer;
  plan.training.optimizer.lr = lr;
  plan.training.threads = 1;
  return plan;
}

ModelInfo infer_or_fail(const Plan& plan) {
  std::vector<PlanError> errors;
  ModelInfo info = infer_model(plan, &errors);
  if (!errors.empty()) qFatal("plan does not infer: %s: %s", errors[0].path.c_str(), errors[0].reason.c_str());
  return info;
}

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, double(std::fabs(a[i] - b[i])));
    den = std::max(den, double(std::fabs(a[i])));
  }
  return den > 0 ? num / den : num;
}

}  // namespace

class EngineTest : public QObject {
  Q_OBJECT
 private slots:
  void modelConstructionIsDeterministic() {
    const Plan plan = spirals_plan(1, OptimizerKind::Sgd, 0.1);
    const ModelInfo info = infer_or_fail(plan);
    engine::Model a = engine::Model::build(plan, info);
    engine::Model b = engine::Model::build(plan, info);
    QCOMPARE(a.parameter_count(), info.total_params);
    QCOMPARE(a.params().size(), b.params().size());
    for (std::size_t i = 0; i < a.params().size(); ++i) QVERIFY(a.params()[i]->value.to_host() == b.params()[i]->value.to_host());
    // Different tensors get different values (seeds are per layer and tensor).
    QVERIFY(a.params()[0]->value.to_host()[0] != a.params()[2]->value.to_host()[0]);
  }

  void trainingLearnsSpirals() {
    const Plan plan = spirals_plan(400, OptimizerKind::Adam, 0.01);
    auto data = data::load_dataset(plan.data);
    QVERIFY(data.ok());
    engine::Trainer trainer(plan, infer_or_fail(plan), *data, nullptr);
    const double before = trainer.evaluate().accuracy;
    const engine::TrainResult result = trainer.run({});
    QCOMPARE(result.steps, 400);
    QVERIFY2(result.test.accuracy > 0.9, qPrintable(QString("accuracy %1 (before %2)").arg(result.test.accuracy).arg(before)));
    QVERIFY(result.test.accuracy > before + 0.3);
  }

  // A loss that becomes NaN or infinite (SGD at lr 1e6) stops the run there by default,
  // saying where; every loss up to then, the bad one included, was reported. With
  // on_divergence "continue" the run trains on to its last step.
  void aDivergingRunSaysWhere() {
    Plan plan = spirals_plan(40, OptimizerKind::Sgd, 1e6);
    auto data = data::load_dataset(plan.data);
    QVERIFY(data.ok());
    std::vector<double> losses;
    engine::TrainerHooks hooks;
    hooks.on_step = [&](const engine::StepProgress& p) { losses.push_back(p.loss); };
    engine::Trainer stopping(plan, infer_or_fail(plan), *data, nullptr);
    const engine::TrainResult stopped = stopping.run(hooks);
    QVERIFY(!losses.empty());
    QVERIFY2(!std::isfinite(losses.back()), "the run went on past a non-finite loss");
    QVERIFY(std::all_of(losses.begin(), losses.end() - 1, [](double l) { return std::isfinite(l); }));
    const std::string where = "the loss diverged at step " + std::to_string(losses.size() - 1);
    QVERIFY2(stopped.error.find(where) == 0, stopped.error.c_str());
    QVERIFY(stopped.steps < 40);
    plan.training.on_divergence = DivergencePolicy::Continue;
    engine::Trainer going_on(plan, infer_or_fail(plan), *data, nullptr);
    const engine::TrainResult continued = going_on.run({});
    QVERIFY2(continued.error.empty(), continued.error.c_str());
    QCOMPARE(continued.steps, 40);
  }

  // K micro-steps with gradients summed equal one step on the whole batch: the loss is
  // scaled by 1/global_batch in both cases. Tolerance 1e-5 relative per tensor (float
  // summation order differs).
  void gradientAccumulationEqualsFullBatch() {
    Plan full = spirals_plan(20, OptimizerKind::Sgd, 0.5);
    Plan accumulated = full;
    accumulated.parallel.grad_accumulation = 4;
    auto data = data::load_dataset(full.data);
    QVERIFY(data.ok());
    engine::Trainer a(full, infer_or_fail(full), *data, nullptr);
    engine::Trainer b(accumulated, infer_or_fail(accumulated), *data, nullptr);
    a.run({});
    b.run({});
    for (std::size_t i = 0; i < a.model().params().size(); ++i) {
      const double diff = max_relative_difference(a.model().params()[i]->value.to_host(), b.model().params()[i]->value.to_host());
      QVERIFY2(diff <= 1e-5, qPrintable(QString("tensor %1 differs by %2").arg(i).arg(diff)));
    }
    // And training changed the weights at all (the comparison is not vacuous).
    engine::Model fresh = engine::Model::build(full, infer_or_fail(full));
    QVERIFY(max_relative_difference(fresh.params()[0]->value.to_host(), a.model().params()[0]->value.to_host()) > 1e-2);
  }

  // Two data-parallel replicas on threads, rank 1 delayed 30 ms after every step's compute:
  // rank 0 waits for it at the replicas' meeting before the optimizer, and that wait is a
  // traced Wait span (it was untraced time), while the straggler itself hardly waits.
  void aStragglersPeerWaitsInTracedWaitSpans() {
    Plan plan = spirals_plan(6, OptimizerKind::Sgd, 0.1);
    plan.parallel.data_parallel = 2;
    plan.parallel.devices.resize(2);
    StragglerSpec straggler;
    straggler.rank = 1;
    straggler.delay = DelayDistribution::Constant;
    straggler.delay_ms = 30;
    plan.parallel.stragglers = {straggler};
    auto data = data::load_dataset(plan.data);
    QVERIFY(data.ok());
    const ModelInfo info = infer_or_fail(plan);
    auto comms = comm::make_thread_group(2);
    trace::Recorder recorders[2];
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.emplace_back([&, r] {
        engine::Trainer trainer(plan, info, *data, &recorders[r], comms[std::size_t(r)].get());
        trainer.run({});
      });
    }
    for (auto& t : ranks) t.join();
    double wait_ms[2] = {0, 0};
    for (int r = 0; r < 2; ++r) {
      std::vector<trace::Event> events;
      recorders[r].drain(events);
      for (const auto& e : events)
        if (e.kind == trace::EventKind::Wait) wait_ms[r] += double(e.end_ns - e.start_ns) / 1e6;
    }
    qInfo("waited: rank 0 %.1f ms, rank 1 (the straggler) %.1f ms", wait_ms[0], wait_ms[1]);
    QVERIFY2(wait_ms[0] >= 0.8 * 6 * 30, qPrintable(QString("rank 0 waited %1 ms in Wait spans").arg(wait_ms[0])));
    QVERIFY2(wait_ms[1] < wait_ms[0] / 4, qPrintable(QString("the straggler waited %1 ms").arg(wait_ms[1])));
  }

  void tracesEveryLayerForwardAndBackward() {
    const Plan plan = spirals_plan(3, OptimizerKind::Sgd, 0.1);
    auto data = data::load_dataset(plan.data);
    trace::Recorder recorder;
    engine::Trainer trainer(plan, infer_or_fail(plan), *data, &recorder);
    trainer.run({});
    std::vector<trace::Event> events;
    recorder.drain(events);
    int forward = 0, backward = 0, optimizer = 0, data_loads = 0, evaluations = 0, parts = 0;
    for (const auto& e : events) {
      QVERIFY(e.end_ns >= e.start_ns);
      forward += e.kind == trace::EventKind::Forward;
      backward += e.kind == trace::EventKind::Backward;
      optimizer += e.kind == trace::EventKind::Optimizer;
      data_loads += e.kind == trace::EventKind::DataLoad;
      evaluations += e.kind == trace::EventKind::Evaluate && e.stream == trace::Stream::Compute;
      parts += e.kind == trace::EventKind::Evaluate && e.stream == trace::Stream::Host;
    }
    QCOMPARE(forward, 5 * 3);  // 5 layers x 3 steps
    QCOMPARE(backward, 5 * 3);
    QCOMPARE(optimizer, 3);
    QCOMPARE(data_loads, 3);
    QCOMPARE(evaluations, 1);
    QCOMPARE(parts, 1);  // the rank's part in it, on the host lane (Trainer::evaluate_due)
  }
};

QTEST_GUILESS_MAIN(EngineTest)
#include "test_engine.moc"
