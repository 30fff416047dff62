// The captured training step (training.graph, docs/plan-format.md): a one-process run on
// a device captures its second step and replays it from then on. Proven on the CUDA
// backend's code run asynchronously on the host, whose capture records the queued work
// with its arguments frozen and whose replay runs that record, as a CUDA graph does
// (test_step_graph_cuda runs the same on GPU 0, label gpu):
//  - a captured run trains bit for bit as an uncaptured one, and really replays;
//  - the plan decides where capture is allowed (one rank, no accumulation, no straggler,
//    a device, the switch on; dropout is captured, its masks keyed in device memory);
//  - traced, a replayed step records the spans an eager step does;
//  - the executor refuses what a GPU refuses inside a capture (a wait for the device),
//    and replays run what was captured with the arguments it had.
#include <QtTest>

#include <algorithm>

#include "device_under_test.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/data_parallel_trainer.h"
#include "loom/engine/training_loops.h"
#include "loom/kernels/cpu_backend.h"

using namespace loom;

namespace {

constexpr std::int64_t kSteps = 10;

Plan example(const char* file) {
  PlanResult parsed = load_plan_file(std::string(LOOM_PLANS_DIR) + "/" + file);
  if (!parsed.plan) qFatal("%s does not load", file);
  Plan plan = *parsed.plan;
  plan.training.steps = kSteps;
  plan.training.eval_every = 5;  // an evaluation between replays must not disturb them
  plan.training.threads = 1;
  plan.data.test_limit = 512;  // evaluation through the host executor's plain loops is slow
  return plan;
}

struct Run {
  engine::TrainResult result;
  std::vector<double> losses;
  std::vector<engine::NamedTensor> params;
  std::vector<trace::Event> events;
};

Run train(const Plan& plan, kernels::Backend& backend, bool traced) {
  auto data = data::load_dataset(plan.data);
  if (!data.ok()) qFatal("%s", data.error().describe().c_str());
  std::vector<PlanError> errors;
  trace::Recorder recorder;
  auto loop = engine::make_training_loop(plan, infer_model(plan, &errors), *data, traced ? &recorder : nullptr,
                                         nullptr, backend);
  Run run;
  engine::TrainerHooks hooks;
  hooks.on_step = [&](const engine::StepProgress& p) { run.losses.push_back(p.loss); };
  run.result = loop->run(hooks);
  auto params = loop->gather_params();
  if (params.ok()) run.params = *params;
  recorder.drain(run.events);
  return run;
}

std::unique_ptr<kernels::Backend> device() {
  std::string skip;
  return test::make_async_device_under_test(skip);
}

// (kind, step, layer) of every span on the compute and copy lanes, in start order.
std::vector<std::tuple<int, int, int>> lane_spans(std::vector<trace::Event> events) {
  std::erase_if(events, [](const trace::Event& e) {
    return e.stream != trace::Stream::Compute && e.stream != trace::Stream::Copy;
  });
  std::stable_sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
    return std::tie(a.stream, a.start_ns) < std::tie(b.stream, b.start_ns);
  });
  std::vector<std::tuple<int, int, int>> out;
  for (const trace::Event& e : events) out.emplace_back(int(e.kind), e.step, e.layer);
  return out;
}

}  // namespace

class StepGraph : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    auto backend = device();
    if (!backend) QSKIP("no device");
    if (!backend->capture_begin()) QSKIP("this backend does not capture");
    QVERIFY(backend->capture_end().ok());
  }

  void capturedRunTrainsLikeAnUncapturedOne_data() {
    QTest::addColumn<QString>("file");
    QTest::newRow("MLP, Adam") << "mlp_fashion.json";
    QTest::newRow("CNN, Adam") << "cnn_fashion.json";
    QTest::newRow("spirals, synthetic data") << "spirals_synthetic.json";
    // Dropout draws each step's masks from the batch's first sample, which a replay reads
    // from device memory: captured, the same masks as eager, step after step.
    QTest::newRow("branches, dropout") << "branches_example.json";
  }
  void capturedRunTrainsLikeAnUncapturedOne() {
    QFETCH(QString, file);
    Plan plan = example(qPrintable(file));
    auto a = device(), b = device();
    QVERIFY(engine::step_graph_allowed(plan, 1, *a));
    const Run captured = train(plan, *a, false);
    plan.training.graph = false;
    const Run eager = train(plan, *b, false);
    QVERIFY2(captured.result.error.empty(), captured.result.error.c_str());
    QVERIFY2(eager.result.error.empty(), eager.result.error.c_str());
    QVERIFY2(captured.result.graph_note.empty(), captured.result.graph_note.c_str());
    // Step 0 sizes the buffers and ends capturing the step; every later step is a replay.
    QCOMPARE(captured.result.replayed_steps, kSteps - 1);
    QCOMPARE(eager.result.replayed_steps, std::int64_t(0));
    QCOMPARE(captured.losses.size(), std::size_t(kSteps));
    QCOMPARE(captured.losses, eager.losses);
    QCOMPARE(captured.params.size(), eager.params.size());
    for (std::size_t i = 0; i < eager.params.size(); ++i)
      QVERIFY2(captured.params[i].values == eager.params[i].values, eager.params[i].name.c_str());
    QVERIFY(a->status().ok());
  }

  void planDecidesWhereCaptureIsAllowed() {
    auto backend = device();
    const Plan mlp = example("mlp_fashion.json");
    QVERIFY(engine::step_graph_allowed(mlp, 1, *backend));
    QVERIFY2(!engine::step_graph_allowed(mlp, 2, *backend), "two ranks");
    QVERIFY2(!engine::step_graph_allowed(mlp, 1, *cpu::make_cpu_backend()), "the CPU has no launches to save");
    Plan off = mlp;
    off.training.graph = false;
    QVERIFY2(!engine::step_graph_allowed(off, 1, *backend), "switched off");
    Plan accumulating = mlp;
    accumulating.parallel.grad_accumulation = 2;
    QVERIFY2(!engine::step_graph_allowed(accumulating, 1, *backend), "accumulation");
    QVERIFY2(engine::step_graph_allowed(example("branches_example.json"), 1, *backend), "dropout in a branch");
    Plan straggling = mlp;
    straggling.parallel.stragglers.push_back({});
    QVERIFY2(!engine::step_graph_allowed(straggling, 1, *backend), "a straggler");
  }

  // A replay records what an eager step records: the same spans on the compute and copy
  // lanes (kinds, steps, layers, in order), whose stamps the replay took.
  void replayedStepsTraceLikeEagerOnes() {
    Plan plan = example("cnn_fashion.json");
    auto a = device(), b = device();
    const Run captured = train(plan, *a, true);
    plan.training.graph = false;
    const Run eager = train(plan, *b, true);
    QCOMPARE(captured.result.replayed_steps, kSteps - 1);
    const auto want = lane_spans(eager.events), got = lane_spans(captured.events);
    QVERIFY(!want.empty());
    QCOMPARE(got.size(), want.size());
    QVERIFY(got == want);
  }

  // What a GPU refuses inside a capture, the executor refuses: the capture fails and
  // nothing ran. A replay runs the captured work with the arguments it was captured with.
  void captureIsFaithful() {
    auto backend = device();
    auto* x = static_cast<float*>(backend->allocate(4 * sizeof(float)));
    backend->fill(x, 1.0f, 4);
    QVERIFY(backend->capture_begin());
    float host[4] = {};
    backend->download(host, x, sizeof host);
    const Status refused = backend->capture_end();
    QVERIFY(!refused.ok());
    QVERIFY2(refused.error().message.find("download inside a capture") != std::string::npos,
             refused.error().message.c_str());
    QVERIFY(backend->status().ok());  // not sticky: the caller runs the step itself
    QVERIFY(backend->capture_begin());
    backend->accumulate(x, x, 4);  // x += x, captured: nothing runs yet
    QVERIFY(backend->capture_end().ok());
    backend->download(host, x, sizeof host);
    QCOMPARE(host[0], 1.0f);
    backend->replay();
    backend->replay();
    backend->download(host, x, sizeof host);
    QCOMPARE(host[3], 4.0f);
    backend->release(x);
  }
};

QTEST_GUILESS_MAIN(StepGraph)
#include "test_step_graph.moc"
