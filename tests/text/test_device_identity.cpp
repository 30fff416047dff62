// What a run ran on (trace/device_info.h, analysis/device_identity.h): a device identity
// as JSON and in words, identical ranks grouped, and the identity carried from the store
// through summarize_run and compare_runs into `show`'s and `compare`'s text and JSON.
// The GPU identities here are written through the store API, as a rank on an H200 writes
// them: this machine has no GPU, and the words are what is tested, not the query.
#include <QtTest>

#include "loom/analysis/compare.h"
#include "loom/analysis/device_identity.h"
#include "loom/test/temp_store.h"
#include "loom/text/run_text.h"

using loom::analysis::DeviceGroup;
using loom::trace::DeviceInfo;
using loom::trace::RankRecord;
using loom::testing::must;
using loom::testing::TempStore;

namespace {

// As a rank on the H200 machine this project was measured on reports it.
DeviceInfo h200(const std::string& nccl = "2.28.3") {
  DeviceInfo d;
  d.kind = "gpu";
  d.name = "NVIDIA H200";
  d.memory_bytes = 150'011'707'392LL;  // 139.7 GiB
  d.compute_major = 9;
  d.compute_minor = 0;
  d.driver = "580.159.04";
  d.cuda_driver = "13.0";
  d.cuda_runtime = "13.0";
  d.nccl = nccl;
  d.machine = "0f3a7c52-9b1e-4d6a-8c20-5e7d1b4a9f36";
  return d;
}

DeviceInfo epyc() {
  DeviceInfo d;
  d.kind = "cpu";
  d.name = "AMD EPYC 7B13";
  d.memory_bytes = 25LL << 30;
  d.logical_cores = 2;
  d.blas_threads = 1;
  return d;
}

const char* kPlan = R"({"format": "loom-plan/1", "name": "dp4",
 "model": {"input": [2], "layers": [{"type": "linear", "out": 3, "name": "fc"}]},
 "data": {"source": "synthetic", "kind": "spirals", "classes": 3, "train_samples": 640, "test_samples": 128},
 "training": {"batch": 32, "steps": 5},
 "parallel": {"devices": [{"kind": "gpu", "gpu": 0}, {"kind": "gpu", "gpu": 1}, {"kind": "gpu", "gpu": 2},
                          {"kind": "cpu"}], "data_parallel": 4}})";

}  // namespace

class TestDeviceIdentity : public QObject {
  Q_OBJECT
 private slots:
  void words();
  void jsonRoundTrip();
  void grouping();
  void showAndCompareCarryIt();
};

void TestDeviceIdentity::words() {
  QCOMPARE(loom::trace::describe_device(h200()),
           std::string("NVIDIA H200, 139.7 GiB, compute 9.0, driver 580.159.04, CUDA 13.0, NCCL 2.28.3"));
  QCOMPARE(loom::trace::describe_device(epyc()), std::string("cpu, AMD EPYC 7B13, 2 cores, 25.0 GiB, 1 BLAS thread"));
  DeviceInfo unknown_driver = h200("");
  unknown_driver.driver.clear();  // /proc/driver/nvidia unreadable: CUDA's driver version instead
  QCOMPARE(loom::trace::describe_device(unknown_driver),
           std::string("NVIDIA H200, 139.7 GiB, compute 9.0, driver for CUDA 13.0, CUDA 13.0"));
  QCOMPARE(loom::trace::describe_device({}), std::string("not recorded"));
  QCOMPARE(loom::trace::device_short_name(h200()), std::string("NVIDIA H200"));
  QCOMPARE(loom::trace::device_short_name(epyc()), std::string("cpu"));
  QCOMPARE(loom::trace::device_short_name({}), std::string());
}

void TestDeviceIdentity::jsonRoundTrip() {
  for (const DeviceInfo& d : {h200(), epyc()}) {
    const std::string text = loom::trace::device_info_to_text(d);
    QVERIFY(loom::trace::device_info_from_text(text) == d);
  }
  const nlohmann::json j = loom::trace::device_info_to_json(h200());
  QCOMPARE(j["compute_capability"].get<std::string>(), std::string("9.0"));
  QCOMPARE(j["memory_bytes"].get<std::int64_t>(), h200().memory_bytes);
  QCOMPARE(j["nccl"].get<std::string>(), std::string("2.28.3"));
  QCOMPARE(j["machine"].get<std::string>(), h200().machine);
  QVERIFY(loom::trace::device_info_to_json({}).is_null());
  QCOMPARE(loom::trace::device_info_to_text({}), std::string());
  // A name longer than any device's is cut, not refused.
  nlohmann::json long_name = j;
  long_name["name"] = std::string(1000, 'x');
  QCOMPARE(loom::trace::device_info_from_json(long_name).name.size(), loom::trace::kMaxDeviceTextBytes);
}

void TestDeviceIdentity::grouping() {
  const std::vector<DeviceGroup> g =
      loom::analysis::group_devices({{3, epyc()}, {0, h200()}, {2, h200()}, {1, h200()}, {5, {}}, {4, h200()}});
  QCOMPARE(g.size(), std::size_t(3));
  QCOMPARE(g[0].ranks, (std::vector<int>{0, 1, 2, 4}));
  QCOMPARE(g[1].ranks, (std::vector<int>{3}));
  QCOMPARE(g[2].ranks, (std::vector<int>{5}));
  QCOMPARE(loom::analysis::ranks_text(g[0].ranks), std::string("ranks 0-2, 4"));
  QCOMPARE(loom::analysis::ranks_text({0, 1, 2, 3}), std::string("ranks 0-3"));
  QCOMPARE(loom::analysis::ranks_text({7}), std::string("rank 7"));
  QCOMPARE(loom::analysis::devices_short(g), std::string("NVIDIA H200 + cpu"));
  QCOMPARE(loom::analysis::devices_named(g), std::string("NVIDIA H200 + cpu (AMD EPYC 7B13)"));
  const auto lines = loom::analysis::device_lines(g);
  QCOMPARE(lines.size(), std::size_t(3));
  QCOMPARE(lines[1], std::string("rank 3: cpu, AMD EPYC 7B13, 2 cores, 25.0 GiB, 1 BLAS thread"));
  QCOMPARE(lines[2], std::string("rank 5: not recorded"));
  // Ranks that differ only by their NCCL version are two groups: nothing is hidden.
  QCOMPARE(loom::analysis::group_devices({{0, h200()}, {1, h200("2.27.1")}}).size(), std::size_t(2));
  // Ranks alike but on two machines are one group: which machine is not shown.
  DeviceInfo elsewhere = h200();
  elsewhere.machine = "another boot id";
  QCOMPARE(loom::analysis::group_devices({{0, h200()}, {1, elsewhere}}).size(), std::size_t(1));
  const std::vector<std::pair<int, DeviceInfo>> silent{{0, DeviceInfo{}}};
  QCOMPARE(loom::analysis::devices_short(loom::analysis::group_devices(silent)), std::string());
}

// Three ranks on H200s and one on a cpu, stored through the store API, then read the way
// `show` and `compare` read them; a run from before v7 (no identities) says so.
void TestDeviceIdentity::showAndCompareCarryIt() {
  TempStore store;
  loom::trace::RunRecord run;
  run.name = "dp4-h200";
  run.plan_json = kPlan;
  run.world_size = 4;
  const std::int64_t gpu_run = must(store.create_run(run));
  for (int r = 0; r < 4; ++r) {
    RankRecord rec{r, "gpu-node", r < 3 ? "gpu " + std::to_string(r) : "cpu"};
    rec.device_info = r < 3 ? h200() : epyc();
    QVERIFY(store.upsert_rank(gpu_run, rec).ok());
  }
  run.name = "dp4-old";
  const std::int64_t old_run = must(store.create_run(run));
  for (int r = 0; r < 4; ++r) QVERIFY(store.upsert_rank(old_run, RankRecord{r, "node", "cpu"}).ok());
  for (std::int64_t id : {gpu_run, old_run}) QVERIFY(store.finish_run(id, loom::trace::RunStatus::Completed, 1, 0, "").ok());

  const auto s = must(loom::analysis::summarize_run(store, gpu_run));
  const std::string text = loom::text::format_summary(s);
  QVERIFY2(text.find("  devices:       ranks 0-2: NVIDIA H200, 139.7 GiB, compute 9.0, driver 580.159.04, CUDA 13.0, "
                     "NCCL 2.28.3\n                 rank 3: cpu, AMD EPYC 7B13") != std::string::npos,
           text.c_str());
  const nlohmann::json j = loom::analysis::summary_to_json(s);
  QCOMPARE(j["ranks"][1]["device_info"]["name"].get<std::string>(), std::string("NVIDIA H200"));
  QCOMPARE(j["ranks"][3]["device_info"]["kind"].get<std::string>(), std::string("cpu"));
  QCOMPARE(j["devices"].size(), std::size_t(2));
  QCOMPARE(j["devices"][0]["ranks"], nlohmann::json({0, 1, 2}));

  const std::string old_text = loom::text::format_summary(must(loom::analysis::summarize_run(store, old_run)));
  QVERIFY2(old_text.find("  device:        not recorded\n") != std::string::npos, old_text.c_str());
  QVERIFY(loom::analysis::summary_to_json(must(loom::analysis::summarize_run(store, old_run)))["ranks"][0]["device_info"].is_null());

  const auto c = must(loom::analysis::compare_runs(store, {gpu_run, old_run}));
  const std::string compared = loom::text::format_comparison(c);
  QVERIFY2(compared.find("on NVIDIA H200 + cpu; 4 ranks") != std::string::npos, compared.c_str());
  QVERIFY2(compared.find("             ranks 0-2: NVIDIA H200, 139.7 GiB") != std::string::npos, compared.c_str());
  const nlohmann::json cj = loom::analysis::comparison_to_json(c);
  QCOMPARE(cj["runs"][0]["device"].get<std::string>(), std::string("NVIDIA H200 + cpu"));
  QCOMPARE(cj["runs"][1]["device"].get<std::string>(), std::string());
  QCOMPARE(cj["runs"][0]["devices"][1]["device_info"]["name"].get<std::string>(), std::string("AMD EPYC 7B13"));
}

QTEST_GUILESS_MAIN(TestDeviceIdentity)
#include "test_device_identity.moc"
