// Links between hosts learnt from the runs across them (loom/predict/host_links.h): read
// from runs written into a real store file, then used for a cluster file's "calibrated"
// link and for a plan whose ranks sit on two hosts. Expected figures are worked out in
// the comment above each test.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "loom/predict/calibration_runs.h"
#include "loom/predict/cluster.h"
#include "loom/predict/host_links.h"
#include "loom/predict/layouts.h"
#include "loom/store/run_store.h"
#include "predict_fixtures.h"

using loom::predict::Cluster;
using loom::predict::HostLink;
using loom::predict::Link;
using loom::testing::must_ok;

namespace {

bool near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// A finished run of `plan` whose rank 0 and 1 (or `second_rank`, rank 1 having left no
// record) sat on `hosts`; rank 1's clock uncertainty
// (half its best round trip to rank 0) `latency_us`; the probe's figure and, where > 0,
// its message size.
std::int64_t store_run(loom::store::RunStore& store, const Plan& plan, std::pair<std::string, std::string> hosts,
                       double latency_us, double probe_gbs, double probe_bytes, const std::string& kind = "",
                       int second_rank = 1) {
  loom::trace::RunRecord run;
  run.plan_json = loom::plan_to_json(plan);
  run.world_size = 2;
  run.kind = kind;
  const std::int64_t id = *store.create_run(run);
  for (int rank : {0, second_rank}) {
    loom::trace::RankRecord record;
    record.rank = rank;
    record.host = rank == 0 ? hosts.first : hosts.second;
    record.uncertainty_ns = rank == 0 ? 0 : std::int64_t(latency_us * 1e3);
    must_ok(store.upsert_rank(id, record));
  }
  std::vector<loom::trace::MetricRecord> metrics = {{0, -1, 1, "p2p_gbs", probe_gbs}};
  if (probe_bytes > 0) metrics.push_back({0, -1, 1, "p2p_probe_bytes", probe_bytes});
  must_ok(store.append_metrics(id, metrics));
  must_ok(store.finish_run(id, loom::trace::RunStatus::Completed, 1.0, 128, ""));
  return id;
}

// A finished run with a rank on each of `hosts` (rank r on hosts[r]) whose clock
// uncertainty is latencies_us[r], and these metrics; rank r's device identity devices[r]
// where given.
std::int64_t store_ranks(loom::store::RunStore& store, const Plan& plan, const std::vector<std::string>& hosts,
                         const std::vector<double>& latencies_us, const std::vector<loom::trace::MetricRecord>& metrics,
                         const std::vector<loom::trace::DeviceInfo>& devices = {}) {
  loom::trace::RunRecord run;
  run.plan_json = loom::plan_to_json(plan);
  run.world_size = int(hosts.size());
  const std::int64_t id = *store.create_run(run);
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    loom::trace::RankRecord record;
    record.rank = int(r);
    record.host = hosts[r];
    record.uncertainty_ns = std::int64_t(latencies_us[r] * 1e3);
    if (r < devices.size()) record.device_info = devices[r];
    must_ok(store.upsert_rank(id, record));
  }
  must_ok(store.append_metrics(id, metrics));
  must_ok(store.finish_run(id, loom::trace::RunStatus::Completed, 1.0, 128, ""));
  return id;
}

Cluster must_cluster(const std::string& json) { return must(loom::predict::cluster_from_json(json)); }

// A cpu rank's identity on the machine whose kernel has this boot id.
loom::trace::DeviceInfo cpu_on(const std::string& machine, int cores) {
  loom::trace::DeviceInfo d;
  d.kind = "cpu";
  d.logical_cores = cores;
  d.blas_threads = 1;
  d.machine = machine;
  return d;
}

bool mentions(const std::vector<std::string>& notes, const std::string& text) {
  for (const std::string& n : notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

class TestPredictHostLinks : public QObject {
  Q_OBJECT

 private slots:
  // Three runs between b (rank 0) and a (rank 1): 4 MB probes whose messages took 42 ms
  // with a 2 ms latency (the wire: 40 ms, 0.1 GB/s) and 44 ms with 4 ms (again 0.1 GB/s);
  // one from before the probe's size was recorded, 1 ms and 0.2 GB/s as it stands. The
  // pair's link: the median latency, 2000 us, and bandwidth, 0.1 GB/s. A run on one host,
  // a stored prediction between the same hosts and a run whose rank 1 left no record (its
  // ranks 0 and 2 on a and b, and no probe of rank 2's own) teach nothing.
  void linkLearntFromRunsAcrossHosts() {
    QTemporaryDir dir;
    auto store = loom::store::RunStore::open(dir.filePath("runs.db").toStdString());
    QVERIFY(store.ok());
    const Plan plan = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    const std::int64_t first = store_run(*store, plan, {"b", "a"}, 2000, 4e6 / 42e6, 4e6);
    const std::int64_t second = store_run(*store, plan, {"a", "b"}, 4000, 4e6 / 44e6, 4e6);
    const std::int64_t old = store_run(*store, plan, {"b", "a"}, 1000, 0.2, 0);
    store_run(*store, plan, {"a", "a"}, 3000, 0.5, 4e6);
    store_run(*store, plan, {"a", "b"}, 9000, 0.9, 4e6, "predicted");
    store_run(*store, plan, {"a", "b"}, 9000, 0.9, 4e6, "", 2);
    const Calibration cal = must(loom::predict::calibrate(*store, ""));
    QCOMPARE(cal.links.size(), std::size_t(1));
    const HostLink& h = cal.links.front();
    QCOMPARE(h.first, std::string("a"));
    QCOMPARE(h.second, std::string("b"));
    QCOMPARE(h.runs, (std::vector<std::int64_t>{first, second, old}));
    QVERIFY2(near(h.link.latency_us, 2000), qPrintable(QString::number(h.link.latency_us)));
    QVERIFY2(near(h.link.bandwidth_gbs, 0.1), qPrintable(QString::number(h.link.bandwidth_gbs, 'g', 12)));
    QVERIFY(!h.link.measured);
    QVERIFY(loom::predict::find_link(cal.links, "b", "a") == &h);
    QVERIFY(loom::predict::find_link(cal.links, "a", "c") == nullptr);
  }

  // A run whose ranks 0 and 1 share host a measures a's link to b through b's first rank
  // (rank 2: its clock uncertainty, 3000 us, and its own probe, 4 MB in 43 ms, so 40 ms on
  // the wire: 0.1 GB/s); rank 3's figures, b's second rank, are not its link. A run on a,
  // b and c measures a-b through rank 1 (the run's p2p_gbs: 4 MB in 41 ms, 1000 us) and
  // a-c through rank 2 (4 MB in 25 ms, 5000 us: 0.2 GB/s); the link between b and c,
  // neither of them rank 0's host, is not measured by these (the next test's metrics do).
  void linksLearntThroughEachHostsFirstRank() {
    QTemporaryDir dir;
    auto store = loom::store::RunStore::open(dir.filePath("runs.db").toStdString());
    QVERIFY(store.ok());
    const Plan plan = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    const std::int64_t two_each = store_ranks(
        *store, plan, {"a", "a", "b", "b"}, {0, 50, 3000, 9000},
        {{0, -1, 1, "p2p_gbs", 5.0}, {0, -1, 1, "p2p_probe_bytes", 4e6}, {2, -1, 1, "host_p2p_gbs", 4e6 / 43e6},
         {3, -1, 1, "host_p2p_gbs", 0.9}});
    const std::int64_t three = store_ranks(
        *store, plan, {"a", "b", "c"}, {0, 1000, 5000},
        {{0, -1, 1, "p2p_gbs", 4e6 / 41e6}, {0, -1, 1, "p2p_probe_bytes", 4e6}, {2, -1, 1, "host_p2p_gbs", 4e6 / 25e6}});
    const auto seen = must(loom::predict::observe_links(*store, two_each));
    QCOMPARE(seen.size(), std::size_t(1));
    QCOMPARE(seen[0].first + seen[0].second, std::string("ab"));
    QVERIFY2(near(seen[0].latency_us, 3000) && near(seen[0].bandwidth_gbs, 0.1),
             qPrintable(QString("%1 us, %2 GB/s").arg(seen[0].latency_us).arg(seen[0].bandwidth_gbs)));
    const Calibration cal = must(loom::predict::calibrate(*store, ""));
    QCOMPARE(cal.links.size(), std::size_t(2));
    const HostLink* ab = loom::predict::find_link(cal.links, "a", "b");
    const HostLink* ac = loom::predict::find_link(cal.links, "c", "a");
    QVERIFY(ab && ac && !loom::predict::find_link(cal.links, "b", "c"));
    QCOMPARE(ab->runs, (std::vector<std::int64_t>{two_each, three}));
    QVERIFY2(near(ab->link.latency_us, 2000) && near(ab->link.bandwidth_gbs, 0.1),
             qPrintable(QString("%1 us, %2 GB/s").arg(ab->link.latency_us).arg(ab->link.bandwidth_gbs)));
    QCOMPARE(ac->runs, (std::vector<std::int64_t>{three}));
    QVERIFY2(near(ac->link.latency_us, 5000) && near(ac->link.bandwidth_gbs, 0.2),
             qPrintable(QString("%1 us, %2 GB/s").arg(ac->link.latency_us).arg(ac->link.bandwidth_gbs)));
  }

  // Since 2026-11-30 the first rank on b also measures its link to the next host, c
  // (through c's first rank): rank 1 records c's first rank (2), half its best round trip
  // (4000 us) and its probe (4 MB in 44 ms: 40 ms on the wire, 0.1 GB/s), so a run on a, b
  // and c learns b-c too. A peer on its own host, or figures missing, give nothing.
  void linkBetweenTheNextHostsIsLearnt() {
    QTemporaryDir dir;
    auto store = loom::store::RunStore::open(dir.filePath("runs.db").toStdString());
    QVERIFY(store.ok());
    const Plan plan = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    const std::int64_t three = store_ranks(
        *store, plan, {"a", "b", "c"}, {0, 1000, 5000},
        {{0, -1, 1, "p2p_gbs", 4e6 / 41e6}, {0, -1, 1, "p2p_probe_bytes", 4e6}, {2, -1, 1, "host_p2p_gbs", 4e6 / 25e6},
         {1, -1, 1, "next_host_rank", 2}, {1, -1, 1, "next_host_latency_us", 4000}, {1, -1, 1, "next_host_p2p_gbs", 4e6 / 44e6}});
    const auto seen = must(loom::predict::observe_links(*store, three));
    QCOMPARE(seen.size(), std::size_t(3));
    QCOMPARE(seen[2].first + seen[2].second, std::string("bc"));
    QVERIFY2(near(seen[2].latency_us, 4000) && near(seen[2].bandwidth_gbs, 0.1),
             qPrintable(QString("%1 us, %2 GB/s").arg(seen[2].latency_us).arg(seen[2].bandwidth_gbs)));
    const std::int64_t same_host = store_ranks(
        *store, plan, {"a", "b", "b"}, {0, 1000, 1000},
        {{0, -1, 1, "p2p_gbs", 1.0}, {1, -1, 1, "next_host_rank", 2}, {1, -1, 1, "next_host_latency_us", 4000},
         {1, -1, 1, "next_host_p2p_gbs", 0.1}});
    QCOMPARE(must(loom::predict::observe_links(*store, same_host)).size(), std::size_t(1));
    const Calibration cal = must(loom::predict::calibrate(*store, ""));
    QVERIFY(loom::predict::find_link(cal.links, "c", "b"));
  }

  // Simulated hosts: a run whose ranks on a and b said one boot id learns that a and b are
  // one machine's namespaces, sharing its cores (the fewer either rank could use: 2). A
  // run on a and c, two machines, or with no boot id recorded, learns a link only. One run
  // that found a and b on two machines (a restart between runs, other machines by the same
  // names) is enough for the pair not to share.
  void hostsOnOneMachineAreLearnt() {
    QTemporaryDir dir;
    auto store = loom::store::RunStore::open(dir.filePath("runs.db").toStdString());
    QVERIFY(store.ok());
    const Plan plan = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    const std::vector<loom::trace::MetricRecord> probe = {{0, -1, 1, "p2p_gbs", 0.1}, {0, -1, 1, "p2p_probe_bytes", 4e6}};
    const std::int64_t one = store_ranks(*store, plan, {"a", "b"}, {0, 50}, probe, {cpu_on("boot-1", 4), cpu_on("boot-1", 2)});
    const std::int64_t two = store_ranks(*store, plan, {"a", "c"}, {0, 50}, probe, {cpu_on("boot-1", 2), cpu_on("boot-2", 2)});
    const std::int64_t unknown = store_ranks(*store, plan, {"a", "c"}, {0, 50}, probe, {cpu_on("", 2), cpu_on("", 2)});
    QCOMPARE(must(loom::predict::observe_links(*store, one)).front().shared_cores, 2);
    QCOMPARE(must(loom::predict::observe_links(*store, two)).front().shared_cores, 0);
    QCOMPARE(must(loom::predict::observe_links(*store, unknown)).front().shared_cores, 0);
    Calibration cal = must(loom::predict::calibrate(*store, ""));
    QCOMPARE(loom::predict::find_link(cal.links, "a", "b")->shared_cores, 2);
    QCOMPARE(loom::predict::find_link(cal.links, "a", "c")->shared_cores, 0);
    store_ranks(*store, plan, {"b", "a"}, {0, 50}, probe, {cpu_on("boot-3", 2), cpu_on("boot-4", 2)});
    cal = must(loom::predict::calibrate(*store, ""));
    QCOMPARE(loom::predict::find_link(cal.links, "a", "b")->shared_cores, 0);
  }

  // Three hosts learnt to be one machine's namespaces with 2 cores share them: the plan's
  // three 1-thread ranks crowd them 1.5x, as three ranks on one host would (the costs,
  // measured unshared, stretched 1.5x), and the note says why. A cluster file that says
  // "shared_cores": 2 predicts the same; hosts that are separate machines crowd nothing.
  // With the threads left to Loom, each rank takes the cores over the machine's ranks (1),
  // where on machines of their own each takes both (2: not calibrated, and said so).
  // Only where every host is reached through such links: a-b alone leaves c apart.
  void hostsOfOneMachineShareItsCores() {
    const std::string on_hosts = R"([{"kind": "cpu", "host": "a"}, {"kind": "cpu", "host": "b"}, {"kind": "cpu", "host": "c"}])";
    const Plan plan = tiny_plan(R"({"devices": )" + on_hosts + R"(, "data_parallel": 3})", "0, 0, 0", 192);
    Calibration cal = costs_for(plan);
    cal.links = {{"a", "b", {3}, Link{false, 0.1, 100}, 2}, {"a", "c", {3}, Link{false, 0.1, 100}, 2}};
    const Prediction shared = must(loom::predict::predict_step(plan, cal, {2}));
    QCOMPARE(shared.stretch, 1.5);
    QVERIFY(mentions(shared.notes, "the hosts are one machine's (their ranks ran on one kernel), sharing its 2 cores"));
    QVERIFY(mentions(shared.notes, "ranks outnumber cores 1.50x"));
    const Cluster written = must_cluster(R"({"hosts": 3, "device": "calibrated", "shared_cores": 2, )"
                                         R"("links": {"between_hosts": {"bandwidth_gbs": 0.1, "latency_us": 100}}})");
    QCOMPARE(written.shared_cores, 2);
    const Prediction as_written = must(loom::predict::predict_step(plan, cal, {2, &written}));
    QVERIFY2(near(shared.step_ms, as_written.step_ms), qPrintable(QString("%1 vs %2").arg(shared.step_ms).arg(as_written.step_ms)));
    Plan loom_threads = plan;  // threads left to the ranks: the machine's cores over its ranks
    loom_threads.training.threads = 0;
    const Prediction divided = must(loom::predict::predict_step(loom_threads, cal, {2}));
    QCOMPARE(divided.threads_per_rank, 1);
    QCOMPARE(divided.stretch, 1.5);
    cal.links[1].shared_cores = 0;
    const Prediction apart = must(loom::predict::predict_step(plan, cal, {2}));
    QCOMPARE(apart.stretch, 1.0);
    const auto two_threads = loom::predict::predict_step(loom_threads, cal, {2});  // calibrated at 1 only
    QVERIFY2(!two_threads.ok() && two_threads.error().message.find("@cpu 2t") != std::string::npos,
             two_threads.ok() ? "predicted" : two_threads.error().message.c_str());
    QVERIFY2(apart.step_ms < shared.step_ms, qPrintable(QString("%1 vs %2").arg(apart.step_ms).arg(shared.step_ms)));
    auto roofline = loom::predict::cluster_from_json(R"({"hosts": 2, "shared_cores": 2, "device": {"peak_tflops": 1, )"
                                                     R"("memory_bandwidth_gbs": 100}, "links": {"between_hosts": "calibrated"}})");
    QVERIFY(!roofline.ok() && roofline.error().message.find("shared_cores needs the calibrated device") != std::string::npos);
  }

  // A plan on hosts a, b and c with links learnt a-b (1000 us, 0.001 GB/s) and a-c (3000
  // us, 0.003 GB/s), and b-d (a host it does not use): each learnt pair keeps its own
  // link, b-c (not learnt) takes their median (2000 us, 0.002 GB/s), and the ring a-b-c-a
  // waits for its slowest hop, 3000 us and 0.001 GB/s: as a cluster file with that link
  // written down predicts it.
  void planOnThreeHostsTakesEachPairsLink() {
    const std::string on_hosts = R"([{"kind": "cpu", "host": "a"}, {"kind": "cpu", "host": "b"}, {"kind": "cpu", "host": "c"}])";
    const Plan plan = tiny_plan(R"({"devices": )" + on_hosts + R"(, "data_parallel": 3})", "0, 0, 0", 192);
    Calibration cal = costs_for(plan);
    cal.links.push_back({"a", "b", {3}, Link{false, 0.001, 1000}});
    cal.links.push_back({"a", "c", {4}, Link{false, 0.003, 3000}});
    cal.links.push_back({"b", "d", {5}, Link{false, 1.0, 9000}});
    const Cluster written = must_cluster(R"({"hosts": 3, "device": "calibrated", )"
                                         R"("links": {"between_hosts": {"bandwidth_gbs": 0.001, "latency_us": 3000}}})");
    const Prediction expected = must(loom::predict::predict_step(plan, cal, {2, &written}));
    const Prediction p = must(loom::predict::predict_step(plan, cal, {2}));
    QVERIFY2(near(p.step_ms, expected.step_ms), qPrintable(QString("%1 vs %2").arg(p.step_ms).arg(expected.step_ms)));
    QVERIFY(mentions(p.notes, "ranks on a + b + c, 1 each; between hosts: 2000 us and 0.002 GB/s, as runs 3, 4 measured it "
                              "(the median over 2 pairs of hosts) for a pair not measured; each pair as measured: "
                              "a-b 1000 us and 0.001 GB/s, a-c 3000 us and 0.003 GB/s"));
    const auto cluster = loom::predict::cluster_of_plan_hosts(plan, cal.links, "", nullptr);
    QVERIFY(cluster);
    QCOMPARE(cluster->link(1, 2).latency_us, 2000.0);  // b-c: the median
    QCOMPARE(cluster->link(2, 0).latency_us, 3000.0);
    // Every pair learnt: the note lists them, with no median.
    cal.links.push_back({"b", "c", {6}, Link{false, 0.002, 500}});
    const Prediction all = must(loom::predict::predict_step(plan, cal, {2}));
    QVERIFY(mentions(all.notes, "ranks on a + b + c, 1 each; between hosts, each pair as runs 3, 4, 6 measured it: "
                                "a-b 1000 us and 0.001 GB/s, a-c 3000 us and 0.003 GB/s, b-c 500 us and 0.002 GB/s"));
  }

  // A three-stage pipeline over a, b and c sends each activation over its own hop: a-b
  // learnt fast (10 us, 1 GB/s), b-c slow (5000 us, 0.0001 GB/s). Stage 0's sends take the
  // fast link's time, stage 1's the slow one's; with one link for every pair (the median,
  // before 2026-11-30) both took the same.
  void pipelineSendsTakeTheirHopsLink() {
    const std::string on_hosts = R"([{"kind": "cpu", "host": "a"}, {"kind": "cpu", "host": "b"}, {"kind": "cpu", "host": "c"}])";
    const Plan plan = tiny_plan(R"({"devices": )" + on_hosts + R"(, "stages": 3, "microbatches": 2, "schedule": "gpipe"})", "0, 1, 2");
    Calibration cal = costs_for(plan);
    cal.links.push_back({"a", "b", {3}, Link{false, 1.0, 10}});
    cal.links.push_back({"b", "c", {4}, Link{false, 0.0001, 5000}});
    const Prediction p = must(loom::predict::predict_step(plan, cal, {2}));
    const auto first = of(p, 0, EventKind::Send), second = of(p, 1, EventKind::Send);
    QVERIFY(!first.empty() && !second.empty());
    const auto took = [](const PredictedSpan& s) { return s.end_ms - s.start_ms; };
    const Link fast{false, 1.0, 10}, slow{false, 0.0001, 5000};
    QVERIFY2(near(took(first.front()), fast.ms(double(first.front().bytes))), qPrintable(QString::number(took(first.front()))));
    bool forward_on_slow = false;  // stage 1 sends activations on (and gradients back)
    for (const PredictedSpan& s : second) forward_on_slow |= near(took(s), slow.ms(double(s.bytes)));
    QVERIFY(forward_on_slow);
  }

  // Run ids in notes and the CLI: three or more consecutive ids as a range.
  void runListsShowRanges() {
    using loom::predict::runs_text;
    QCOMPARE(runs_text({}), std::string("no runs"));
    QCOMPARE(runs_text({4}), std::string("run 4"));
    QCOMPARE(runs_text({5, 3}), std::string("runs 3, 5"));
    QCOMPARE(runs_text({1, 2}), std::string("runs 1, 2"));
    QCOMPARE(runs_text({7, 1, 2, 3, 9, 10, 11, 12, 3}), std::string("runs 1-3, 7, 9-12"));
  }

  // A cluster file's "calibrated" link between hosts predicts what the same link written
  // out does (a roofline device: 1e-6 TFLOP/s at half its peak, everything else free),
  // and says whose runs it came from. Without a learnt link it is an error that says what
  // to do; "calibrated" is for the link between hosts only.
  void calibratedClusterLinkIsTheLearntOne() {
    const std::string device = R"("device": {"name": "slow", "peak_tflops": 1e-6, "efficiency": 0.5, )"
                               R"("memory_bandwidth_gbs": 1e9, "host_link_gbs": 1e9, "launch_us": 0})";
    const Cluster written = must_cluster(R"({"hosts": 2, )" + device +
                                         R"(, "links": {"between_hosts": {"bandwidth_gbs": 0.1, "latency_us": 2000}}})");
    const Cluster learnt = must_cluster(R"({"hosts": 2, )" + device + R"(, "links": {"between_hosts": "calibrated"}})");
    QVERIFY(learnt.between_hosts.calibrated && !learnt.between_hosts.measured);
    const Plan plan = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    Calibration cal;
    cal.links.push_back({"a", "b", {7}, Link{false, 0.1, 2000}});
    const Prediction expected = must(loom::predict::predict_step(plan, Calibration{}, {2, &written}));
    const Prediction p = must(loom::predict::predict_step(plan, cal, {2, &learnt}));
    QVERIFY(near(p.step_ms, expected.step_ms));
    QVERIFY(mentions(p.notes, "as run 7 measured it (between a and b)"));
    auto none = loom::predict::predict_step(plan, Calibration{}, {2, &learnt});
    QVERIFY(!none.ok());
    QVERIFY2(none.error().message.find("\"calibrated\", but no stored run measured a link") != std::string::npos,
             none.error().message.c_str());
    QVERIFY(none.error().hint.find("bandwidth_gbs and latency_us") != std::string::npos);
    auto inside = loom::predict::cluster_from_json(R"({"hosts": 2, "links": {"inside_host": "calibrated", "between_hosts": "calibrated"}})");
    QVERIFY(!inside.ok() && inside.error().message.find("inside_host must be an object") != std::string::npos);
  }

  // A plan whose two ranks sit on hosts a and b, with their link learnt, is predicted as the
  // cluster of those two hosts with that link; slower than on one host. Without the link it
  // is predicted on this machine, and says so; hosts not in equal runs of consecutive ranks
  // are not made a cluster.
  void planAcrossHostsTakesTheirLink() {
    const std::string on_hosts = R"([{"kind": "cpu", "host": "a"}, {"kind": "cpu", "host": "b"}])";
    const Plan plan = tiny_plan(R"({"devices": )" + on_hosts + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    Calibration cal = costs_for(plan);
    const Prediction here = must(loom::predict::predict_step(plan, cal, {2}));
    QVERIFY(mentions(here.notes, "sit on a and b, and no stored run measured a link between two of them"));
    cal.links.push_back({"a", "b", {3, 5}, Link{false, 0.001, 1000}});
    const Cluster written = must_cluster(R"({"hosts": 2, "device": "calibrated", )"
                                         R"("links": {"between_hosts": {"bandwidth_gbs": 0.001, "latency_us": 1000}}})");
    const Prediction expected = must(loom::predict::predict_step(plan, cal, {2, &written}));
    const Prediction p = must(loom::predict::predict_step(plan, cal, {2}));
    QVERIFY(near(p.step_ms, expected.step_ms));
    QVERIFY2(p.step_ms > here.step_ms + 1.0, qPrintable(QString("%1 vs %2").arg(p.step_ms).arg(here.step_ms)));
    QVERIFY(mentions(p.notes, "ranks on a + b, 1 each; between hosts: 1000 us and 0.001 GB/s, as runs 3, 5 measured it (between a and b)"));
    const std::string uneven = R"([{"kind": "cpu", "host": "a"}, {"kind": "cpu", "host": "b"}, {"kind": "cpu", "host": "b"}])";
    std::string note;
    QVERIFY(!loom::predict::cluster_of_plan_hosts(tiny_plan(R"({"devices": )" + uneven + R"(, "data_parallel": 3})", "0, 0, 0", 192), cal.links, "", &note));
    QVERIFY(note.find("not in equal runs of consecutive ranks") != std::string::npos);
    note.clear();
    QVERIFY(!loom::predict::cluster_of_plan_hosts(tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})"), cal.links, "", &note));
    QVERIFY(note.empty());  // one host: nothing to say
  }

  // The layout search of that plan, with no cluster, lays its layouts on the same two hosts:
  // two replicas all-reduce over the learnt link as the plan's own prediction does, where
  // without the link they stay on this machine.
  void searchKeepsThePlanOnItsHosts() {
    const std::string on_hosts = R"([{"kind": "cpu", "host": "a"}, {"kind": "cpu", "host": "b"}])";
    const Plan plan = tiny_plan(R"({"devices": )" + on_hosts + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    Calibration cal = costs_for(plan);
    loom::predict::SearchSpace space;
    space.devices = 2;
    const auto two_replicas = [&](const Calibration& c) {
      for (const loom::predict::Candidate& k : must(loom::predict::search_layouts(plan, c, {2}, space)))
        if (k.choice.replicas == 2 && k.choice.stages == 1 && k.left_out.empty()) return k.prediction.step_ms;
      return -1.0;
    };
    const double alone = two_replicas(cal);
    cal.links.push_back({"a", "b", {3}, Link{false, 0.001, 1000}});
    const double across = two_replicas(cal);
    QVERIFY(near(across, must(loom::predict::predict_step(plan, cal, {2})).step_ms));
    QVERIFY2(across > alone + 1.0, qPrintable(QString("%1 vs %2").arg(across).arg(alone)));
  }

  // Calibrating a plan on hosts a and b: its layouts run on this machine (every device
  // moved here, each run said so), then the plan as written, across a and b, whose set-up
  // measures their link; the same plan on one host has no such run.
  void calibratingAPlanAcrossHostsRunsItThereLast() {
    const std::string on_hosts = R"([{"kind": "cpu", "host": "a"}, {"kind": "cpu", "host": "b"}])";
    const Plan plan = tiny_plan(R"({"devices": )" + on_hosts + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    const auto runs = must(loom::predict::calibration_runs(plan, 30));
    QVERIFY(runs.size() >= 3);
    const loom::predict::CalibrationRun& last = runs.back();
    QVERIFY(last.across_hosts);
    QCOMPARE(last.what, std::string("as planned, across its hosts"));
    QCOMPARE(last.plan.parallel.devices, plan.parallel.devices);
    QCOMPARE(last.plan.training.steps, std::int64_t(30));
    QCOMPARE(last.plan.name, plan.name + " (calibration: as planned, across its hosts)");
    for (std::size_t i = 0; i + 1 < runs.size(); ++i) {
      QVERIFY(!runs[i].across_hosts);
      QVERIFY2(runs[i].what.ends_with(", on this machine"), runs[i].what.c_str());
      for (const loom::DeviceSpec& d : runs[i].plan.parallel.devices) QCOMPARE(d.host, std::string("localhost"));
    }
    QCOMPARE(runs.front().what, std::string("as planned, on this machine"));
    const auto here = must(loom::predict::calibration_runs(tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})", "0, 0, 0", 128), 30));
    QCOMPARE(here.size(), runs.size() - 1);
    for (const loom::predict::CalibrationRun& r : here) QVERIFY(!r.across_hosts && !r.what.ends_with("on this machine"));
  }

  // A layout of a plan on hosts a and b (one rank each) stays on them: two replicas on a
  // and b, four two to a host, one on a; so predicting it takes their link, as predicting
  // the plan does. A plan on one host keeps every rank there.
  void layoutsStayOnThePlansHosts() {
    const std::string on_hosts = R"([{"kind": "cpu", "host": "a"}, {"kind": "cpu", "host": "b"}])";
    const Plan plan = tiny_plan(R"({"devices": )" + on_hosts + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    const auto hosts_of = [](const Plan& p) {
      std::string out;
      for (const loom::DeviceSpec& d : p.parallel.devices) out += d.host;
      return out;
    };
    const auto laid = [&](const Plan& p, int replicas) {
      return must(loom::predict::with_layout(p, {replicas, 1, 1, loom::Schedule::OneFOneB, 25}));
    };
    QCOMPARE(hosts_of(laid(plan, 2)), std::string("ab"));
    QCOMPARE(hosts_of(laid(plan, 4)), std::string("aabb"));
    QCOMPARE(hosts_of(laid(plan, 1)), std::string("a"));
    const std::string two_each = R"([{"kind": "cpu", "host": "a"}, {"kind": "cpu", "host": "a"}, )"
                                 R"({"kind": "cpu", "host": "b"}, {"kind": "cpu", "host": "b"}])";
    const Plan four = tiny_plan(R"({"devices": )" + two_each + R"(, "data_parallel": 4})", "0, 0, 0", 192);
    QCOMPARE(hosts_of(laid(four, 2)), std::string("aa"));
    QCOMPARE(hosts_of(laid(four, 3)), std::string("aab"));
    const Plan here = tiny_plan(R"({"devices": )" + devices(2) + R"(, "data_parallel": 2})", "0, 0, 0", 192);
    QCOMPARE(hosts_of(laid(here, 3)), std::string("localhostlocalhostlocalhost"));
    Calibration cal = costs_for(plan);
    cal.links.push_back({"a", "b", {3}, Link{false, 0.001, 1000}});
    QVERIFY(near(must(loom::predict::predict_step(laid(plan, 2), cal, {2})).step_ms,
                 must(loom::predict::predict_step(plan, cal, {2})).step_ms));
  }

  // A plan that calls this machine "localhost" finds the link its runs stored under this
  // machine's name (the calibration's host).
  void localhostIsThisMachine() {
    const std::string on_hosts = R"([{"kind": "cpu", "host": "localhost"}, {"kind": "cpu", "host": "b"}])";
    const Plan plan = tiny_plan(R"({"devices": )" + on_hosts + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    Calibration cal = costs_for(plan);
    cal.host = "here";
    cal.links.push_back({"b", "here", {4}, Link{false, 0.001, 1000}});
    const Prediction p = must(loom::predict::predict_step(plan, cal, {2}));
    QVERIFY(mentions(p.notes, "ranks on here + b, 1 each; between hosts: 1000 us and 0.001 GB/s, as run 4 measured it"));
  }

  // Its scaling curve to 8 devices runs over 8 hosts like a and b, joined by their link:
  // the same curve as on a cluster file of 8 such hosts with that link written down.
  void scalingGoesOnOverHostsLikeThePlans() {
    const std::string on_hosts = R"([{"kind": "cpu", "host": "a"}, {"kind": "cpu", "host": "b"}])";
    const Plan plan = tiny_plan(R"({"devices": )" + on_hosts + R"(, "data_parallel": 2})", "0, 0, 0", 128);
    Calibration cal = costs_for(plan);
    cal.links.push_back({"a", "b", {3}, Link{false, 0.001, 1000}});
    const Cluster written = must_cluster(R"({"hosts": 8, "device": "calibrated", )"
                                         R"("links": {"between_hosts": {"bandwidth_gbs": 0.001, "latency_us": 1000}}})");
    const auto learnt = must(loom::predict::scaling_curve(plan, cal, {2}, 8));
    const auto expected = must(loom::predict::scaling_curve(plan, cal, {2, &written}, 8));
    QCOMPARE(learnt.size(), expected.size());
    QCOMPARE(learnt.back().devices, 8);
    for (std::size_t i = 0; i < learnt.size(); ++i) QVERIFY(near(learnt[i].step_ms, expected[i].step_ms));
  }
};

QTEST_GUILESS_MAIN(TestPredictHostLinks)
#include "test_predict_host_links.moc"
