// The predictor on clusters it has never run on (cluster files, a roofline device, links
// as latency + size / bandwidth and the all-reduce algorithms), the memory it predicts per
// rank, and the layouts of one plan: re-laying, the search and the scaling curve. Every
// expected figure is worked out by hand in the comment above its test.
#include <QtTest>

#include <cmath>

#include "loom/predict/cluster.h"
#include "loom/predict/layouts.h"
#include "predict_fixtures.h"

using loom::predict::Cluster;
using loom::predict::Link;

namespace {

Cluster must_cluster(const std::string& json) { return must(loom::predict::cluster_from_json(json)); }

// A device so slow that compute outweighs everything: 1e-6 TFLOP/s at half its peak is
// 500 FLOP per ms; memory and host link effectively free; no launch cost.
const char* kSlowDevice =
    "\"device\": {\"name\": \"slow\", \"peak_tflops\": 1e-6, \"efficiency\": 0.5, \"memory_bandwidth_gbs\": 1e9, "
    "\"host_link_gbs\": 1e9, \"launch_us\": 0}";

bool near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

}  // namespace

class TestPredictCluster : public QObject {
  Q_OBJECT

 private slots:
  void clusterFileErrorsNameTheField() {
    auto missing = loom::predict::cluster_from_json(R"({"hosts": 2, "device": {"memory_bandwidth_gbs": 10},)"
                                                        R"("links": {"between_hosts": {"bandwidth_gbs": 1}}})");
    QVERIFY(!missing.ok());
    QVERIFY2(missing.error().message.find("device.peak_tflops is missing") != std::string::npos, missing.error().message.c_str());
    auto negative = loom::predict::cluster_from_json(R"({"hosts": 2, "links": {"between_hosts": {"bandwidth_gbs": -1}}})");
    QVERIFY(!negative.ok());
    QVERIFY(negative.error().message.find("between_hosts.bandwidth_gbs must be more than 0") != std::string::npos);
    auto no_link = loom::predict::cluster_from_json(R"({"hosts": 2})");
    QVERIFY(!no_link.ok() && no_link.error().message.find("between_hosts is missing") != std::string::npos);
    QVERIFY(!loom::predict::cluster_from_json(R"({"hosts": 0})").ok());
    QVERIFY(!loom::predict::cluster_from_json("{").ok());
    QCOMPARE(must_cluster(R"({"hosts": 1, "devices_per_host": 4})").devices(), 4);  // this machine, measured links
  }

  // Ring: 2 (p - 1) steps of latency + bytes / p. 4 ranks, 4 MB, 1 GB/s, 10 us:
  // 6 x (0.01 + 1) = 6.06 ms. Tree: 2 log2(4) latencies + the message twice: 8.04 ms. On
  // 3 ranks the tree is one deep (both leaves send to the root at once): 2 latencies and
  // 12 bytes twice, 0.020024 ms, where the ring takes 4 latencies; on 5, two deep.
  // Hierarchical on 2 hosts x 2 (inside 100 GB/s, 1 us): 2 x (0.001 + 0.02) inside, and
  // the 2 MB shard over the 2 hosts (ring 2 x (0.01 + 1) = 2.02): 2.062 ms, the fastest.
  void allreduceAlgorithmsFollowAlphaBeta() {
    const Link slow{false, 1, 10};
    QVERIFY(near(loom::predict::ring_allreduce_ms(slow, 4, 4e6), 6.06));
    QVERIFY(near(loom::predict::tree_allreduce_ms(slow, 4, 4e6), 8.04));
    QVERIFY(near(loom::predict::tree_allreduce_ms(slow, 3, 12), 0.020024));
    QVERIFY(near(loom::predict::tree_allreduce_ms(slow, 5, 12), 0.040024));
    const Cluster c = must_cluster(R"({"hosts": 2, "devices_per_host": 2, )" + std::string(kSlowDevice) + R"(,)"
        R"("links": {"inside_host": {"bandwidth_gbs": 100, "latency_us": 1}, "between_hosts": {"bandwidth_gbs": 1, "latency_us": 10}}})");
    std::string algorithm;
    QVERIFY(near(loom::predict::allreduce_ms(c, {0, 1, 2, 3}, 4e6, &algorithm), 2.062));
    QCOMPARE(algorithm, std::string("hierarchical"));
    QVERIFY(near(loom::predict::allreduce_ms(c, {0, 1}, 4e6, &algorithm), 2 * (0.001 + 0.02)));  // one host: its own link
    QCOMPARE(algorithm, std::string("ring"));
  }

  // What Loom's MPI communicator runs between hosts (1 GB/s, 10 us), not the fastest: up
  // to 64 KiB Open MPI's tree (3 ranks: one deep, 2 x 0.01 ms + 12 bytes twice); above
  // it the ring, and recursive doubling on 4 ranks (2 x (0.01 + 4)). On hosts 2 ms and
  // 0.1 GB/s apart a 137768-byte bucket over 3 ranks still takes the ring, 4 x (2 +
  // 45922.67 / 1e5) = 9.837 ms, where the fastest would be the tree's 6.755 (measured on
  // three simulated hosts: 8-13 ms).
  // A ring whose hops differ: a chunk's latency delays its arrival but does not hold the
  // link. Worked by hand: three ranks, each chunk 313,200 bytes (939,600 / 3) at 0.108
  // GB/s, 2.9 ms on the link; latencies 0.05 ms (rank 0 to 1), 2 and 2 ms. Step 0 arrives
  // at 2.95, 4.9, 4.9 ms; rank 0 forwards at 4.9 (its input from rank 2), ranks 1 and 2 at
  // 2.95 and 4.9; ...; the fourth chunks arrive at 15.7, 17.65 and 17.65. The slowest
  // hop's ring, 4 x (2 + 2.9) = 19.6 ms, is longer; on equal hops the two agree.
  void ringOverUnequalHops() {
    const Link fast{false, 0.108, 50}, slow{false, 0.108, 2000};
    QVERIFY(near(loom::predict::ring_allreduce_ms(std::vector<Link>{fast, slow, slow}, 939600), 17.65));
    QVERIFY(near(loom::predict::ring_allreduce_ms(slow, 3, 939600), 19.6));
    const Link even{false, 1.0, 100};
    QVERIFY(near(loom::predict::ring_allreduce_ms(std::vector<Link>(4, even), 4e6), loom::predict::ring_allreduce_ms(even, 4, 4e6)));
    // Three hosts whose pair 0-1 has its own link: Loom's MPI ring over them (234,900
    // floats: a ring on three ranks) takes the hops' ring.
    Cluster c;
    c.hosts = 3;
    c.between_hosts = slow;
    c.host_pairs[{0, 1}] = fast;
    std::string algorithm;
    QVERIFY(near(loom::predict::mpi_allreduce_ms(c, {0, 1, 2}, 939600, &algorithm), 17.65));
    QCOMPARE(algorithm, std::string("ring"));
  }

  void mpiRanksRunLoomsOwnAlgorithm() {
    const Cluster c = must_cluster(R"({"hosts": 4, )" + std::string(kSlowDevice) +
                                   R"(, "links": {"between_hosts": {"bandwidth_gbs": 1, "latency_us": 10}}})");
    std::string algorithm;
    QVERIFY(near(loom::predict::mpi_allreduce_ms(c, {0, 1, 2}, 12, &algorithm), 0.020024));
    QCOMPARE(algorithm, std::string("tree"));
    QVERIFY(near(loom::predict::mpi_allreduce_ms(c, {0, 1, 2, 3}, 4e6, &algorithm), 2 * (0.01 + 4)));
    QCOMPARE(algorithm, std::string("recursive doubling"));
    const Cluster far = must_cluster(R"({"hosts": 3, )" + std::string(kSlowDevice) +
                                     R"(, "links": {"between_hosts": {"bandwidth_gbs": 0.1, "latency_us": 2000}}})");
    const double bucket = 137768;
    QVERIFY(near(loom::predict::mpi_allreduce_ms(far, {0, 1, 2}, bucket, &algorithm), 4 * (2 + bucket / 3 / 1e5)));
    QCOMPARE(algorithm, std::string("ring"));
    QVERIFY(near(loom::predict::allreduce_ms(far, {0, 1, 2}, bucket, &algorithm), 4 + 2 * bucket / 1e5));
    QCOMPARE(algorithm, std::string("tree"));  // what NCCL ranks are predicted to pick
  }

  // On the roofline device each layer's forward is its FLOPs over 500 FLOP/ms, and four
  // replicas on four hosts (1 ms latency, 1 GB/s) all-reduce the 204 bytes of gradients
  // by tree, the faster here: 2 x 2 x 1 ms + 2 x 204 bytes / 1e6 bytes per ms. Then the
  // step's meeting of every rank (loss, correct answers, stop votes: 12 bytes), by the
  // same tree, is a Wait that starts as the all-reduce ends.
  void rooflineAndLinksMakeTheStep() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(4) + R"(, "data_parallel": 4})", "0, 0, 0", 256);
    const Cluster c = must_cluster(R"({"hosts": 4, )" + std::string(kSlowDevice) +
                                   R"(, "links": {"between_hosts": {"bandwidth_gbs": 1, "latency_us": 1000}}})");
    const Prediction p = must(loom::predict::predict_step(plan, Calibration{}, {2, &c}));
    const loom::ModelInfo m = loom::infer_model(plan, nullptr);
    const auto forwards = of(p, 0, EventKind::Forward);
    QCOMPARE(forwards.size(), std::size_t(3));
    QVERIFY(near(forwards[0].end_ms - forwards[0].start_ms, double(layer(m, "fc1").forward_flops) * 64 / 500));
    QVERIFY(near(forwards[2].end_ms - forwards[2].start_ms, double(layer(m, "fc2").forward_flops) * 64 / 500));
    const auto reduce = of(p, 3, EventKind::AllReduce);
    QCOMPARE(reduce.size(), std::size_t(1));
    QCOMPARE(reduce[0].bytes, std::int64_t(204));
    QVERIFY(near(reduce[0].end_ms - reduce[0].start_ms, 4.0 + 2 * 204 / 1e6));
    const auto waits = of(p, 3, EventKind::Wait);
    QVERIFY(!waits.empty());
    QVERIFY(near(waits.back().start_ms, reduce[0].end_ms));
    QVERIFY(near(waits.back().end_ms - waits.back().start_ms, 4.0 + 2 * 12 / 1e6));
    QCOMPARE(p.threads_per_rank, 0);  // a roofline device has no BLAS threads
  }

  // A cluster of one host like this one, with the links measured, predicts what this
  // machine does: the same calibrated costs, the same spans.
  void calibratedClusterOfThisMachineAgrees() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    const Cluster c = must_cluster(R"({"hosts": 1, "devices_per_host": 2, "device": "calibrated"})");
    const Prediction here = must(loom::predict::predict_step(plan, costs_for(plan), {2}));
    const Prediction there = must(loom::predict::predict_step(plan, costs_for(plan), {2, &c}));
    QVERIFY(near(here.step_ms, there.step_ms));
    QCOMPARE(here.spans.size(), there.spans.size());
    // More ranks than the cluster has devices is an error that says both numbers.
    const Cluster small = must_cluster(R"({"hosts": 1, "devices_per_host": 1})");
    auto refused = loom::predict::predict_step(plan, costs_for(plan), {2, &small});
    QVERIFY(!refused.ok() && refused.error().message.find("2 ranks") != std::string::npos);
  }

  // Two stages, four micro-batches of 16 samples, as the engine's pipeline trainer keeps
  // them per micro-batch slot. Stage 0 (fc1 2 -> 8, relu): the outputs 8 + 8, the output
  // copied out 8, its gradient received 8, the batch 2 and its labels 1: 35 floats a
  // sample, 2240 bytes a slot; once, a gradient buffer for fc1's output, 8 floats, 512
  // bytes. Stage 1 (fc2 8 -> 3, the loss): output 3, its copy 3, the received input 8, its
  // gradient 8, probabilities and their gradient 3 + 3, the batch and labels 2 + 1: 31
  // floats, 1984 bytes. GPipe holds 4 slots on stage 0, 1F1B 2 (the stages from it), and 1
  // on stage 1. Weights of fc1: 16 + 8 floats, each tensor padded to 64 in the arena.
  void memoryFollowsTheSchedule() {
    const std::string parallel = R"({"devices": )" + devices(2) + R"(, "stages": 2, "microbatches": 4)";
    const Plan gpipe = tiny_plan(parallel + R"(, "schedule": "gpipe"})", "0, 0, 1");
    const Plan onefoneb = tiny_plan(parallel + R"(, "schedule": "1f1b"})", "0, 0, 1");
    const Cluster c = must_cluster(R"({"hosts": 2, )" + std::string(kSlowDevice) +
                                   R"(, "links": {"between_hosts": {"bandwidth_gbs": 1, "latency_us": 1}}})");
    const Prediction g = must(loom::predict::predict_step(gpipe, Calibration{}, {2, &c}));
    const Prediction f = must(loom::predict::predict_step(onefoneb, Calibration{}, {2, &c}));
    QCOMPARE(g.memory.size(), std::size_t(2));
    QCOMPARE(g.memory[0].activations, std::int64_t(4 * 2240 + 512));
    QCOMPARE(f.memory[0].activations, std::int64_t(2 * 2240 + 512));
    QCOMPARE(f.memory[1].activations, std::int64_t(1 * 1984));
    QCOMPARE(f.memory[0].workspace, std::int64_t(0));  // no convolution
    QCOMPARE(g.memory[0].parameters, std::int64_t(2 * 64 * 4));
    QCOMPARE(g.memory[0].gradients, g.memory[0].parameters);
    QCOMPARE(g.memory[0].optimizer_state, std::int64_t(0));  // plain SGD keeps none
  }

  // A link carries one message at a time each way: at 100 bytes/ms each 512-byte
  // activation holds the link between the hosts 5.12 ms, longer than stage 0's forward
  // (about 1 ms), so under GPipe each waits for the one before and stage 1's forwards start
  // 5.12 ms apart (as soon as stage 0's forwards they would without the queue).
  void messagesOneWayQueueOnTheLink() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(2) + R"(, "stages": 2, "microbatches": 4, "schedule": "gpipe"})",
                                "0, 0, 1");
    const Cluster c = must_cluster(R"({"hosts": 2, )" + std::string(kSlowDevice) +
                                   R"(, "links": {"between_hosts": {"bandwidth_gbs": 0.0001, "latency_us": 1}}})");
    const Prediction p = must(loom::predict::predict_step(plan, Calibration{}, {2, &c}));
    const auto forwards = of(p, 1, EventKind::Forward);
    QCOMPARE(forwards.size(), std::size_t(4));
    for (std::size_t i = 1; i < forwards.size(); ++i)
      QVERIFY2(near(forwards[i].start_ms - forwards[i - 1].start_ms, 5.12),
               qPrintable(QString::number(forwards[i].start_ms - forwards[i - 1].start_ms)));
    const auto sends = of(p, 0, EventKind::Send);
    QCOMPARE(sends.size(), std::size_t(4));
    QVERIFY(near(sends[3].end_ms, sends[0].start_ms + 4 * 5.12 + 0.001));  // the timeline shows the wait
  }

  // One process, as engine::Sequential keeps it, per sample: the outputs 8 + 8 + 3, a
  // gradient buffer for every output but the last 8 + 8, the batch 2 and its labels 1, the
  // logits copied out, the probabilities and their gradient 3 x 3: 47 floats, 12,032 bytes
  // at 64 samples, no workspace over MPI. (The MLP example: 4657 KiB predicted and measured.)
  void memoryOfOneProcessIsWhatSequentialKeeps() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}");
    const Cluster c = must_cluster(R"({"hosts": 1, )" + std::string(kSlowDevice) + "}");
    const Prediction p = must(loom::predict::predict_step(plan, Calibration{}, {2, &c}));
    QCOMPARE(p.memory.size(), std::size_t(1));
    QCOMPARE(p.memory[0].activations, std::int64_t(47 * 64 * 4));
    QCOMPARE(p.memory[0].workspace, std::int64_t(0));
    QCOMPARE(p.memory[0].in_flight, 1);
  }

  // fc1 (32 FLOPs a sample), relu (8 outputs), fc2 (48): two stages cut after relu, the
  // largest stage's work as small as it can be; the plan re-laid is valid.
  void layoutCutsStagesForEqualWork() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}", "0, 0, 0", 128);
    auto laid = loom::predict::with_layout(plan, {2, 2, 4, loom::Schedule::OneFOneB, 25});
    QVERIFY(laid.ok());
    QCOMPARE(laid->model.layers[0].stage, 0);
    QCOMPARE(laid->model.layers[1].stage, 0);
    QCOMPARE(laid->model.layers[2].stage, 1);
    QCOMPARE(laid->parallel.devices.size(), std::size_t(4));
    QVERIFY(loom::validate_plan(*laid).empty());
    QVERIFY(!loom::predict::with_layout(plan, {1, 4, 1, loom::Schedule::GPipe, 25}).ok());  // 4 stages, 3 layers
    // Work 256 (2 -> 64), 65536 (64 -> 512), 512, 512 (relus), 3072 (512 -> 3): cutting after
    // the second layer leaves 65792 on the larger stage; cutting by count (after the third)
    // would leave 66304.
    loom::PlanResult skewed = loom::parse_plan(R"({"format": "loom-plan/1", "name": "skewed", "model": {"input": [2], "layers": [)"
                                               R"({"type": "linear", "out": 64}, {"type": "linear", "out": 512}, {"type": "relu"},)"
                                               R"({"type": "relu"}, {"type": "linear", "out": 3}]},)"
                                               R"("data": {"source": "synthetic", "kind": "spirals", "classes": 3},)"
                                               R"("training": {"batch": 64, "steps": 5}, "parallel": {"devices": [{"kind": "cpu"}]}})");
    QVERIFY(skewed.ok());
    auto cut = loom::predict::with_layout(*skewed.plan, {1, 2, 1, loom::Schedule::GPipe, 25});
    QVERIFY(cut.ok());
    std::vector<int> stages;
    for (const auto& l : cut->model.layers) stages.push_back(l.stage);
    QCOMPARE(stages, (std::vector<int>{0, 0, 1, 1, 1}));
    QVERIFY(!loom::predict::with_layout(plan, {3, 1, 1, loom::Schedule::GPipe, 25}).ok());  // 128 / 3
  }

  // Every layout that fits is ranked, fastest first, each exactly as predict_step makes
  // it; a memory limit leaves out what needs more; a pipeline loses by its idle time.
  void searchRanksWhatFits() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}", "0, 0, 0", 128);
    const Cluster c = must_cluster(R"({"hosts": 4, )" + std::string(kSlowDevice) +
                                   R"(, "links": {"between_hosts": {"bandwidth_gbs": 1, "latency_us": 1}}})");
    loom::predict::SearchSpace space;
    space.devices = 4;
    auto ranked = loom::predict::search_layouts(plan, Calibration{}, {2, &c}, space);
    QVERIFY(ranked.ok() && ranked->size() > 10);
    for (std::size_t i = 1; i < ranked->size(); ++i)
      QVERIFY((*ranked)[i - 1].prediction.samples_per_s >= (*ranked)[i].prediction.samples_per_s);
    const auto& best = ranked->front();
    const Prediction again = must(loom::predict::predict_step(*loom::predict::with_layout(plan, best.choice), Calibration{}, {2, &c}));
    QVERIFY(near(again.step_ms, best.prediction.step_ms));
    QCOMPARE(best.choice.replicas, 4);  // compute outweighs a 1 us link: split the batch
    for (const auto& other : *ranked)
      if (other.choice.stages > 1 && other.choice.replicas == 1) {
        QVERIFY2(loom::predict::why_slower(best.prediction, other.prediction).find("pipeline idle") != std::string::npos,
                 loom::predict::why_slower(best.prediction, other.prediction).c_str());
        const std::string breakdown = loom::predict::step_breakdown(other.prediction);
        QVERIFY2(breakdown.find(" ms compute, ") != std::string::npos && breakdown.find(" ms pipeline idle") != std::string::npos,
                 breakdown.c_str());
      }
    QVERIFY(loom::predict::step_breakdown(best.prediction).find("pipeline idle") == std::string::npos);  // one stage
    space.memory_per_device = best.peak_memory - 1;
    auto limited = loom::predict::search_layouts(plan, Calibration{}, {2, &c}, space);
    QVERIFY(limited.ok());
    for (const auto& candidate : *limited)
      QCOMPARE(candidate.left_out.empty(), candidate.peak_memory < best.peak_memory);
  }

  // Gradient accumulation is tried only under a memory limit: a micro-step holds its own
  // activations, not the whole batch's.
  void searchAccumulatesToFitMemory() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}", "0, 0, 0", 128);
    const Cluster c = must_cluster(R"({"hosts": 1, )" + std::string(kSlowDevice) + "}");
    loom::predict::SearchSpace space;
    space.devices = 1;
    auto ranked = loom::predict::search_layouts(plan, Calibration{}, {2, &c}, space);
    QVERIFY(ranked.ok());
    for (const auto& candidate : *ranked) QCOMPARE(candidate.choice.accumulation, 0);
    const auto whole = ranked->front();
    space.memory_per_device = whole.peak_memory - 1;
    auto limited = loom::predict::search_layouts(plan, Calibration{}, {2, &c}, space);
    QVERIFY(limited.ok());
    const auto& fits = limited->front();
    QVERIFY2(fits.left_out.empty(), fits.left_out.c_str());
    QVERIFY(fits.choice.accumulation > 1);
    QVERIFY(fits.peak_memory < whole.peak_memory);
    QCOMPARE(fits.prediction.memory[0].activations * fits.choice.accumulation, whole.prediction.memory[0].activations);
    QCOMPARE(loom::predict::with_layout(plan, fits.choice)->parallel.grad_accumulation, fits.choice.accumulation);
    QVERIFY(fits.choice.describe().find("accumulating") != std::string::npos);
  }

  // Each replica keeps 64 samples: 1, 2, 4 devices; the first point is the yardstick.
  void scalingKeepsThePerReplicaBatch() {
    const Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}");
    const Cluster c = must_cluster(R"({"hosts": 4, )" + std::string(kSlowDevice) +
                                   R"(, "links": {"between_hosts": {"bandwidth_gbs": 1, "latency_us": 1000}}})");
    auto curve = loom::predict::scaling_curve(plan, Calibration{}, {2, &c}, 4);
    QVERIFY(curve.ok());
    QCOMPARE(curve->size(), std::size_t(3));
    QCOMPARE((*curve)[2].devices, 4);
    QCOMPARE((*curve)[0].efficiency, 1.0);
    QVERIFY(near((*curve)[0].samples_per_s, 64 / (*curve)[0].step_ms * 1000));
    QVERIFY(near((*curve)[2].samples_per_s, 256 / (*curve)[2].step_ms * 1000));
    QVERIFY((*curve)[2].efficiency < 1.0);  // 4 ms of tree all-reduce latency per step
  }
};

QTEST_GUILESS_MAIN(TestPredictCluster)
#include "test_predict_cluster.moc"
