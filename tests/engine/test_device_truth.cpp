// What a gpu rank's timeline and breakdown say is true. Proven here on the CUDA backend's
// code run asynchronously on the host (cuda::make_host_body_backend with a worker thread
// that runs every operation in stream order, trailing the host by a set lag, as a GPU
// does), and on GPU 0 where there is one (test_device_truth_cuda, label gpu):
//  - asynchrony changes nothing but timing: every example trains bit for bit as on the
//    synchronous executor (the same operations in the same order), so every result the
//    engine reads it waited for; a missing wait reads a result before it exists, or
//    rewrites staging memory an upload has yet to read, and the numbers differ;
//  - on the compute lane no two spans overlap (one may hold others: a parallel block's
//    span its branches'), on every rank of every example plan, and host waits are on the
//    host lane: the compute lane is the device's time;
//  - every rank's breakdown categories add up to its training window, and no POP
//    efficiency exceeds 100%, on the device path and on the CPU backend alike.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <thread>

#include "device_under_test.h"
#include "loom/analysis/analysis.h"
#include "loom/analysis/compare.h"
#include "loom/comm/threads.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/parameter_server.h"
#include "loom/engine/training_loops.h"
#include "loom/kernels/cpu_backend.h"

using namespace loom;

namespace {

using BackendFactory = std::function<std::unique_ptr<kernels::Backend>()>;

constexpr std::int64_t kSteps = 8;

Plan example(const QString& file, std::int64_t steps) {
  PlanResult parsed = load_plan_file(std::string(LOOM_PLANS_DIR) + "/" + file.toStdString());
  if (!parsed.plan) qFatal("%s does not load", qPrintable(file));
  Plan plan = *parsed.plan;
  plan.training.steps = steps;
  plan.training.eval_every = steps;
  plan.training.threads = 1;
  plan.data.test_limit = 512;  // evaluation through the host executor's plain loops is slow
  return plan;
}

struct Outcome {
  std::vector<std::vector<trace::Event>> events;  // per rank (empty when untraced)
  std::vector<double> losses;                     // per step, rank 0
  std::vector<engine::NamedTensor> params;        // gathered on rank 0 (synchronous modes)
  QString error;
};

// One rank, by its role: a parameter server serves, every other rank trains.
void run_rank(const Plan& plan, const ModelInfo& info, const data::TrainTest& data, comm::Communicator* comm,
              kernels::Backend& backend, trace::Recorder* recorder, Outcome& out, std::mutex& mutex) {
  const int rank = comm ? comm->rank() : 0;
  if (comm && rank_role(plan, rank).kind == RankKind::Server) {
    engine::ParameterServer server(plan, info, recorder, comm, backend);
    const Status served = server.serve({});
    std::lock_guard lock(mutex);
    if (!served.ok()) out.error += QString::fromStdString(served.error().describe());
    return;
  }
  auto loop = engine::make_training_loop(plan, info, data, recorder, comm, backend);
  engine::TrainerHooks hooks;
  std::vector<double> losses;
  hooks.on_step = [&](const engine::StepProgress& p) { losses.push_back(p.loss); };
  const engine::TrainResult result = loop->run(hooks);
  auto params = engine::uses_parameter_server(plan) ? Expected<std::vector<engine::NamedTensor>>(
                                                          std::vector<engine::NamedTensor>{})
                                                    : loop->gather_params();
  std::lock_guard lock(mutex);
  if (!result.error.empty()) out.error += QString::fromStdString(result.error);
  if (!backend.status().ok()) out.error += QString::fromStdString(backend.status().error().describe());
  if (rank == 0) {
    out.losses = losses;
    if (params.ok()) out.params = *params;
  }
}

// Trains `plan` with ranks as threads, each on a backend of its own from `make`.
Outcome train(const Plan& plan, const BackendFactory& make, bool traced) {
  auto data = data::load_dataset(plan.data);
  if (!data.ok()) qFatal("%s", data.error().describe().c_str());
  std::vector<PlanError> errors;
  const ModelInfo info = infer_model(plan, &errors);
  const int world = world_size(plan);
  auto comms = comm::make_thread_group(world);
  Outcome out;
  out.events.resize(std::size_t(world));
  std::mutex mutex;
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      auto backend = make();
      trace::Recorder recorder;
      run_rank(plan, info, *data, world > 1 ? comms[std::size_t(r)].get() : nullptr, *backend,
               traced ? &recorder : nullptr, out, mutex);
      std::vector<trace::Event> events;
      recorder.drain(events);
      std::lock_guard lock(mutex);
      out.events[std::size_t(r)] = std::move(events);
    });
  }
  for (auto& t : ranks) t.join();
  return out;
}

// The examples ranks as threads can run: every training plan (serving is inference).
// Asynchronous ones (a parameter server, SSP) train differently whenever timing differs,
// on any backend, so they are left out where results are compared bit for bit.
void add_example_rows(bool asynchronous_too = true) {
  QTest::addColumn<QString>("file");
  for (const char* file : {"mlp_fashion.json", "cnn_fashion.json", "branches_example.json", "spirals_synthetic.json",
                           "dp4_mlp_fashion.json", "local_sgd_mlp.json", "gpipe_mlp.json", "onefoneb_mlp.json",
                           "layer_split_mlp.json", "pipeline_unbalanced_mlp.json", "branches_two_devices.json",
                           "hybrid_mlp.json"})
    QTest::newRow(file) << QString(file);
  if (!asynchronous_too) return;
  for (const char* file : {"parameter_server_mlp.json", "ssp_straggler_mlp.json"}) QTest::newRow(file) << QString(file);
}

// The first pair of compute-lane spans of `events` that overlap, unless one is a parallel
// block's layer span holding its branches' layer spans, as text; empty if none.
QString overlapping_compute_spans(std::vector<trace::Event> events) {
  std::erase_if(events, [](const trace::Event& e) { return e.stream != trace::Stream::Compute; });
  std::stable_sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  std::vector<const trace::Event*> open;  // the spans holding the current one, outermost first
  for (const trace::Event& b : events) {
    while (!open.empty() && open.back()->end_ns <= b.start_ns) open.pop_back();
    // Only a parallel block's layer span holds others: its branches' layers, of its kind.
    const bool held = !open.empty() && b.end_ns <= open.back()->end_ns && open.back()->kind == b.kind &&
                      (b.kind == trace::EventKind::Forward || b.kind == trace::EventKind::Backward);
    if (!open.empty() && !held) {
      const trace::Event& a = *open.back();
      return QString("%1 (step %2 layer %3) ends %4 ns after %5 (step %6 layer %7) starts")
          .arg(QString::fromUtf8(trace::event_kind_name(a.kind).data())).arg(a.step).arg(a.layer)
          .arg(a.end_ns - b.start_ns)
          .arg(QString::fromUtf8(trace::event_kind_name(b.kind).data())).arg(b.step).arg(b.layer);
    }
    open.push_back(&b);
  }
  return {};
}

// Every rank's categories add up to its window, and the POP efficiencies are fractions.
void verify_breakdowns_add_up(const Outcome& out) {
  std::vector<analysis::RankBreakdown> ranks;
  for (std::size_t r = 0; r < out.events.size(); ++r) {
    const analysis::RankBreakdown b = analysis::breakdown_rank(int(r), out.events[r]);
    const double sum = b.compute_s + b.exposed_comm_s + b.optimizer_s + b.data_s + b.idle_s + b.descheduled_s;
    // Each category is a whole number of nanoseconds divided by 1e9: rounding only.
    QVERIFY2(std::abs(sum - b.window_s) <= 1e-9 * std::max(1.0, b.window_s),
             qPrintable(QString("rank %1: categories add up to %2 s in a %3 s window").arg(r).arg(sum, 0, 'g', 12)
                            .arg(b.window_s, 0, 'g', 12)));
    QVERIFY2(b.exposed_comm_s <= b.comm_s + 1e-12, qPrintable(QString("rank %1: more exposed than all communication").arg(r)));
    ranks.push_back(b);
  }
  const analysis::Efficiency e = analysis::pop_efficiency(ranks);
  for (double value : {e.load_balance, e.communication_efficiency, e.parallel_efficiency})
    QVERIFY2(!(value > 1.0 + 1e-12), qPrintable(QString("a POP efficiency of %1").arg(value)));
}

}  // namespace

class DeviceTruth : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    std::string skip;
    auto device = test::make_async_device_under_test(skip);
    if (!device) QSKIP(skip.c_str());
    qInfo("asynchronous backend under test: %s", device->name());
    on_host_ = std::string(device->name()) == "cuda-bodies-on-host";
  }

  // Bit for bit, losses and parameters: the same operations in the same order.
  void asynchronyChangesOnlyTiming_data() { add_example_rows(false); }
  void asynchronyChangesOnlyTiming() {
    if (!on_host_) QSKIP("compared with the synchronous host executor: a host-only check");
    QFETCH(QString, file);
    const Plan plan = example(file, kSteps);
    const Outcome sync = train(plan, [] { return cuda_sync(); }, false);
    const Outcome async = train(plan, [] { return async_device(); }, false);
    QVERIFY2(sync.error.isEmpty(), qPrintable(sync.error));
    QVERIFY2(async.error.isEmpty(), qPrintable(async.error));
    QCOMPARE(async.losses.size(), std::size_t(kSteps));
    QCOMPARE(async.losses, sync.losses);
    QCOMPARE(async.params.size(), sync.params.size());
    for (std::size_t i = 0; i < sync.params.size(); ++i)
      QVERIFY2(async.params[i].values == sync.params[i].values, qPrintable(QString::fromStdString(sync.params[i].name)));
  }

  // Traced on the asynchronous device: the compute lane is the device's, with no overlap,
  // and the breakdown partitions every rank's window.
  void deviceSpansTellTheTruth_data() { add_example_rows(); }
  void deviceSpansTellTheTruth() {
    QFETCH(QString, file);
    const Outcome out = train(example(file, kSteps), [] { return async_device(); }, true);
    QVERIFY2(out.error.isEmpty(), qPrintable(out.error));
    for (std::size_t r = 0; r < out.events.size(); ++r) {
      QVERIFY2(!out.events[r].empty(), qPrintable(QString("rank %1 recorded nothing").arg(r)));
      const QString overlap = overlapping_compute_spans(out.events[r]);
      QVERIFY2(overlap.isEmpty(), qPrintable(QString("rank %1: %2").arg(r).arg(overlap)));
      for (const trace::Event& e : out.events[r])
        QVERIFY2(e.kind != trace::EventKind::Wait || e.stream != trace::Stream::Compute,
                 qPrintable(QString("rank %1: a host wait on the device's compute lane").arg(r)));
    }
    verify_breakdowns_add_up(out);
  }

  // The CPU backend's host-timed spans meet the same invariants.
  void cpuSpansTellTheTruth_data() { add_example_rows(); }
  void cpuSpansTellTheTruth() {
    if (!on_host_) QSKIP("the CPU backend is checked in the host build");
    QFETCH(QString, file);
    const Outcome out = train(example(file, kSteps), [] { return cpu::make_cpu_backend(); }, true);
    QVERIFY2(out.error.isEmpty(), qPrintable(out.error));
    for (std::size_t r = 0; r < out.events.size(); ++r) {
      const QString overlap = overlapping_compute_spans(out.events[r]);
      QVERIFY2(overlap.isEmpty(), qPrintable(QString("rank %1: %2").arg(r).arg(overlap)));
    }
    verify_breakdowns_add_up(out);
  }

 private:
  static std::unique_ptr<kernels::Backend> cuda_sync() {
    std::string skip;
    return test::make_device_under_test(false, skip);
  }
  static std::unique_ptr<kernels::Backend> async_device() {
    std::string skip;
    return test::make_async_device_under_test(skip);
  }
  bool on_host_ = false;
};

QTEST_GUILESS_MAIN(DeviceTruth)
#include "test_device_truth.moc"
