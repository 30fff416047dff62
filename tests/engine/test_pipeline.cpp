// Pipeline machinery without MPI: the schedules' order and in-flight counts, the stage
// graph's cut of a model, and pipeline / branch / hybrid training on ranks as threads
// ending with the same parameters as one process (same seed and global batch, 1e-5
// relative difference per tensor). The same runs under real mpiexec are in
// test_pipeline_equivalence.
#include <QtTest>

#include <thread>

#include "loom/comm/threads.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/checkpoint.h"
#include "loom/engine/data_parallel_trainer.h"
#include "loom/engine/pipeline_trainer.h"
#include "loom/core/stage_graph.h"
#include "loom/test/plans.h"

using namespace loom;
using engine::PipelineOp;
using loom::testing::layer;

namespace {

// An MLP on spirals with its hidden blocks spread over `stages` stages.
Plan chain_plan(int stages, int microbatches, Schedule schedule) {
  Plan plan;
  plan.name = "pipeline-test";
  plan.model.input = {2};
  const int last = stages - 1;
  plan.model.layers = {layer(LayerKind::Linear, 32, 0), layer(LayerKind::Tanh, 0, 0),
                       layer(LayerKind::Linear, 32, std::min(1, last)), layer(LayerKind::Tanh, 0, std::min(1, last)),
                       layer(LayerKind::Linear, 32, last), layer(LayerKind::Relu, 0, last),
                       layer(LayerKind::Linear, 3, last)};
  plan.data.source = DataSource::Synthetic;
  plan.data.synthetic = SyntheticKind::Spirals;
  plan.data.train_samples = 640;
  plan.data.test_samples = 100;
  plan.training.batch = 32;
  plan.training.steps = 10;
  plan.training.threads = 1;
  plan.training.optimizer.kind = OptimizerKind::Momentum;
  plan.training.optimizer.lr = 0.05;
  plan.parallel.stages = stages;
  plan.parallel.microbatches = microbatches;
  plan.parallel.schedule = schedule;
  plan.parallel.devices.assign(std::size_t(stages), DeviceSpec{});
  assign_default_layer_names(plan.model);
  return plan;
}

// Two branches of a parallel block on two ranks, concatenated on the second.
Plan branch_plan() {
  Plan plan = chain_plan(2, 2, Schedule::GPipe);
  LayerSpec block = layer(LayerKind::Parallel, 0, 0);
  block.branches.resize(2);
  block.branches[0].layers = {layer(LayerKind::Linear, 16, 0), layer(LayerKind::Tanh, 0, 0)};
  block.branches[1].stage = 1;
  block.branches[1].layers = {layer(LayerKind::Linear, 8, 1), layer(LayerKind::Relu, 0, 1)};
  plan.model.layers = {layer(LayerKind::Linear, 16, 0), block, layer(LayerKind::Linear, 32, 1),
                       layer(LayerKind::Tanh, 0, 1), layer(LayerKind::Linear, 3, 1)};
  for (auto& l : plan.model.layers) l.name.clear();
  assign_default_layer_names(plan.model);
  return plan;
}

Plan single_process(Plan plan) {
  plan.parallel = ParallelSpec{};
  plan.parallel.devices.assign(1, DeviceSpec{});
  return plan;
}

ModelInfo infer(const Plan& plan) {
  std::vector<PlanError> errors;
  return infer_model(plan, &errors);
}

struct ThreadedRun {
  std::vector<engine::NamedTensor> params;  // rank 0's gathered parameters
  std::vector<int> max_in_flight;           // by rank
  std::vector<std::int64_t> peak_activation_bytes;
  QString error;
};

ThreadedRun run_on_threads(const Plan& plan) {
  auto data = data::load_dataset(plan.data);
  if (!data.ok()) qFatal("%s", data.error().describe().c_str());
  const ModelInfo info = infer(plan);
  const int world = world_size(plan);
  auto comms = comm::make_thread_group(world);
  ThreadedRun run;
  run.max_in_flight.resize(std::size_t(world));
  run.peak_activation_bytes.resize(std::size_t(world));
  std::mutex mutex;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        engine::PipelineTrainer trainer(plan, info, *data, nullptr, comms[std::size_t(r)].get());
        const engine::TrainResult result = trainer.run({});
        auto params = trainer.gather_params();
        std::lock_guard lock(mutex);
        if (!result.error.empty()) run.error += QString::fromStdString(result.error);
        if (!params.ok()) run.error += QString::fromStdString(params.error().describe());
        if (r == 0 && params.ok()) run.params = *params;
        run.max_in_flight[std::size_t(r)] = trainer.max_in_flight();
        run.peak_activation_bytes[std::size_t(r)] = trainer.peak_activation_bytes();
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        run.error += e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return run;
}

std::vector<engine::NamedTensor> reference_params(const Plan& plan) {
  auto data = data::load_dataset(plan.data);
  if (!data.ok()) qFatal("%s", data.error().describe().c_str());
  const Plan single = single_process(plan);
  engine::Trainer trainer(single, infer(single), *data, nullptr);
  trainer.run({});
  return engine::named_copies(trainer.params());
}

void compare_with_single_process(const Plan& plan) {
  const ThreadedRun run = run_on_threads(plan);
  QVERIFY2(run.error.isEmpty(), qPrintable(run.error));
  const auto reference = reference_params(plan);
  QCOMPARE(run.params.size(), reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i) {
    QCOMPARE(run.params[i].name, reference[i].name);
    const double diff = engine::relative_difference(reference[i].values, run.params[i].values);
    QVERIFY2(diff <= 1e-5, qPrintable(QString("%1 differs by %2").arg(reference[i].name.c_str()).arg(diff)));
  }
}

}  // namespace

class PipelineTest : public QObject {
  Q_OBJECT
 private slots:
  void gpipeRunsAllForwardsThenAllBackwards() {
    const auto ops = engine::stage_schedule(Schedule::GPipe, 3, 1, 3);
    const std::vector<PipelineOp> expected{{true, 0}, {true, 1}, {true, 2}, {false, 2}, {false, 1}, {false, 0}};
    QVERIFY(ops == expected);
    QCOMPARE(engine::max_in_flight(ops), 3);
  }

  void oneFOneBWarmsUpThenAlternates() {
    // Stage 0 of 3 with 4 micro-batches: 2 warm-up forwards, then F/B pairs, then cool-down.
    const auto ops = engine::stage_schedule(Schedule::OneFOneB, 3, 0, 4);
    const std::vector<PipelineOp> expected{{true, 0},  {true, 1},  {true, 2},  {false, 0},
                                           {true, 3},  {false, 1}, {false, 2}, {false, 3}};
    QVERIFY(ops == expected);
    QCOMPARE(engine::max_in_flight(ops), 3);
    QCOMPARE(engine::max_in_flight(engine::stage_schedule(Schedule::OneFOneB, 3, 2, 4)), 1);
    QCOMPARE(engine::max_in_flight(engine::stage_schedule(Schedule::OneFOneB, 4, 0, 2)), 2);  // M < p
  }

  void everyMicroBatchRunsForwardAndBackwardOnce() {
    for (Schedule schedule : {Schedule::GPipe, Schedule::OneFOneB}) {
      for (int stage = 0; stage < 3; ++stage) {
        const auto ops = engine::stage_schedule(schedule, 3, stage, 8);
        QCOMPARE(int(ops.size()), 16);
        for (int m = 0; m < 8; ++m) {
          const auto f = std::find(ops.begin(), ops.end(), PipelineOp{true, m});
          const auto b = std::find(ops.begin(), ops.end(), PipelineOp{false, m});
          QVERIFY(f != ops.end() && b != ops.end() && f < b);
        }
      }
    }
  }

  void chainCutsIntoOneUnitPerStage() {
    const Plan plan = chain_plan(3, 1, Schedule::GPipe);
    auto graph = loom::build_stage_graph(plan, infer(plan));
    QVERIFY(graph.ok());
    QCOMPARE(int(graph->units.size()), 3);
    QCOMPARE(int(graph->units[1].layers.size()), 2);
    QCOMPARE(graph->units[1].first_row, std::size_t(2));
    QCOMPARE(graph->loss_stage(), 2);
    QVERIFY(graph->remote_consumer_stages(graph->units[0].output) == std::vector<int>{1});
  }

  void branchesOnTwoStagesMeetInAConcat() {
    const Plan plan = branch_plan();
    auto graph = loom::build_stage_graph(plan, infer(plan));
    QVERIFY2(graph.ok(), graph.ok() ? "" : graph.error().message.c_str());
    // linear (s0) | branch 0 (s0) | branch 1 (s1) | concat + the rest (s1)
    QCOMPARE(int(graph->units.size()), 5);
    QCOMPARE(graph->units[1].stage, 0);
    QCOMPARE(graph->units[2].stage, 1);
    QVERIFY(graph->units[3].kind == loom::UnitKind::Concat);
    QCOMPARE(graph->units[3].stage, 1);
    QVERIFY((graph->units[3].widths == std::vector<std::int64_t>{16, 8}));
    // The block's input feeds both branches: it crosses to stage 1.
    QVERIFY(graph->remote_consumer_stages(graph->units[0].output) == std::vector<int>{1});
  }

  void pipelineMatchesOneProcess_data() {
    QTest::addColumn<int>("stages");
    QTest::addColumn<int>("microbatches");
    QTest::addColumn<int>("schedule");
    for (int p : {2, 3}) {
      for (int m : {1, 2, 4}) {
        QTest::addRow("gpipe p%d m%d", p, m) << p << m << int(Schedule::GPipe);
        QTest::addRow("1f1b p%d m%d", p, m) << p << m << int(Schedule::OneFOneB);
      }
    }
    QTest::addRow("one stage, 4 micro-batches") << 1 << 4 << int(Schedule::GPipe);
  }

  void pipelineMatchesOneProcess() {
    QFETCH(int, stages);
    QFETCH(int, microbatches);
    QFETCH(int, schedule);
    compare_with_single_process(chain_plan(stages, microbatches, Schedule(schedule)));
  }

  void branchesOnTwoRanksMatchOneProcess() { compare_with_single_process(branch_plan()); }

  void hybridTwoByTwoMatchesOneProcess() {
    Plan plan = chain_plan(2, 2, Schedule::OneFOneB);
    plan.parallel.data_parallel = 2;
    plan.parallel.bucket_mb = 0.001;  // several buckets
    plan.parallel.devices.assign(4, DeviceSpec{});
    compare_with_single_process(plan);
  }

  void accumulationWithPipelineMatchesOneProcess() {
    Plan plan = chain_plan(2, 2, Schedule::GPipe);
    plan.parallel.grad_accumulation = 2;
    compare_with_single_process(plan);
  }

  // GPipe holds every micro-batch at once; 1F1B at most p - stage of them.
  void inFlightFollowsTheSchedule() {
    const ThreadedRun gpipe = run_on_threads(chain_plan(2, 4, Schedule::GPipe));
    QVERIFY2(gpipe.error.isEmpty(), qPrintable(gpipe.error));
    QVERIFY((gpipe.max_in_flight == std::vector<int>{4, 4}));
    const ThreadedRun one_f_one_b = run_on_threads(chain_plan(2, 4, Schedule::OneFOneB));
    QVERIFY((one_f_one_b.max_in_flight == std::vector<int>{2, 1}));
    QCOMPARE(gpipe.peak_activation_bytes[0], 2 * one_f_one_b.peak_activation_bytes[0]);
    QVERIFY(one_f_one_b.peak_activation_bytes[1] > 0);
  }

  // The comparison is not vacuous: a plan whose stages do not split the batch the same
  // way (another global batch) ends elsewhere.
  void differentBatchDiffers() {
    Plan plan = chain_plan(2, 2, Schedule::GPipe);
    const auto a = reference_params(plan);
    plan.training.batch = 16;
    const auto b = reference_params(plan);
    QVERIFY(engine::relative_difference(a[0].values, b[0].values) > 1e-3);
  }
};

QTEST_GUILESS_MAIN(PipelineTest)
#include "test_pipeline.moc"
