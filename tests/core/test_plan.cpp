// Tests for reading, validating and writing "loom-plan/1" plans: every invalid plan names
// the right JSON pointer and says why, several errors are all reported, the example plans
// validate, defaults are filled in, and plan_to_json round-trips exactly.
#include <QDir>
#include <algorithm>
#include <QTest>

#include <nlohmann/json.hpp>

#include "loom/core/plan.h"
#include "loom/core/model_info.h"
#include "loom/core/plan_limits.h"

using loom::Plan;
using loom::PlanResult;
using Json = nlohmann::ordered_json;

namespace {

std::string describe(const PlanResult& result) {
  std::string text;
  for (const auto& e : result.errors) text += "\n  " + e.path + ": " + e.reason;
  return text;
}

// The default plan as JSON, edited by a patch: {"/json/pointer": value}; null deletes.
std::string patched_default(const std::string& patch_text) {
  Json plan = Json::parse(loom::plan_to_json(loom::default_plan()));
  const Json patch = Json::parse(patch_text);  // items() must not outlive it
  for (const auto& [pointer, value] : patch.items()) {
    Json::json_pointer where(pointer);
    if (value.is_null()) {
      plan[where.parent_pointer()].erase(where.back());
    } else {
      plan[where] = value;
    }
  }
  return plan.dump();
}

std::string plans_dir() { return std::string(LOOM_SOURCE_DIR) + "/resources/plans"; }

}  // namespace

class TestPlan : public QObject {
  Q_OBJECT

 private slots:
  void invalid_plan_reports_path_and_reason_data();
  void invalid_plan_reports_path_and_reason();
  void several_errors_are_all_reported();
  void example_plans_validate_data();
  void example_plans_validate();
  void mlp_example_equals_default_plan();
  void default_plan_is_valid_and_as_specified();
  void round_trip_preserves_plan_data();
  void round_trip_preserves_plan();
  void omitted_fields_get_defaults();
  void world_size_counts_servers();
  void rank_roles_are_stage_major_then_servers();
  void missing_file_is_an_error();
  void validate_plan_checks_in_memory_plans();
  void gpu_plans_follow_the_build();
  void nccl_placement_is_checked_in_a_gpu_build();
  void deep_documents_and_models_are_refused();
  void memory_beyond_the_machine_is_refused();
  void huge_values_are_cut_in_messages();
};

// A 10 MB key or name is named by its start and length, not echoed whole.
void TestPlan::huge_values_are_cut_in_messages() {
  const std::string huge(10'000'000, 'x');
  const std::string text = patched_default("{\"/training/" + huge + "\": 1, \"/parallel/schedule\": \"" + huge + "\"}");
  const PlanResult result = loom::parse_plan(text);
  QVERIFY(!result.ok());
  QCOMPARE(result.errors.size(), std::size_t(2));
  for (const loom::PlanError& e : result.errors) {
    QVERIFY2(e.path.size() + e.reason.size() < 300, (e.path.substr(0, 80) + ": " + e.reason.substr(0, 200)).c_str());
    QVERIFY2(e.reason.find("(10000000 characters)") != std::string::npos, e.reason.c_str());
  }
}

namespace {

void row(const char* tag, const char* input, const char* path, const char* reason) {
  QTest::newRow(tag) << QString::fromUtf8(input) << QString::fromUtf8(path) << QString::fromUtf8(reason);
}

// Syntax, format, unknown keys, types and value ranges.
void add_reader_rows() {
  row("syntax", "RAW:{\"format\": \"loom-plan/1\",", "", "invalid JSON at byte");
  row("syntax_position", "RAW:{\n \"format\": \"loom-plan/1\",\n}", "", "line 3");
  row("not_object", "RAW:[1, 2]", "", "must be a JSON object, got array");
  row("missing_format", R"({"/format": null})", "/format", "missing required key 'format'");
  row("wrong_format", R"({"/format": "loom-plan/2"})", "/format", "unsupported format 'loom-plan/2'");
  row("missing_model", R"({"/model": null})", "/model", "missing required key 'model'");
  row("unknown_layer_key", R"({"/model/layers/1/outt": 5})", "/model/layers/1/outt",
      "unknown key 'outt' for a linear layer (did you mean 'out'?)");
  row("unknown_root_key", R"({"/trainng": {}})", "/trainng", "did you mean 'training'?");
  row("key_of_other_layer_kind", R"({"/model/layers/2/out": 3})", "/model/layers/2/out",
      "unknown key 'out' for a relu layer");
  row("batch_type", R"({"/training/batch": "64"})", "/training/batch", "expected a positive integer, got string");
  row("batch_zero", R"({"/training/batch": 0})", "/training/batch", "expected a positive integer, got 0");
  row("epochs_zero", R"({"/training/epochs": 0})", "/training/epochs", "expected a positive integer, got 0");
  row("lr_negative", R"({"/training/optimizer/lr": -0.1})", "/training/optimizer/lr",
      "expected a positive number, got -0.1");
  row("steps_negative", R"({"/training/steps": -1})", "/training/steps", "non-negative integer, got -1");
  row("threads_negative", R"({"/training/threads": -2})", "/training/threads", "non-negative integer, got -2");
  row("bias_type", R"({"/model/layers/1/bias": "yes"})", "/model/layers/1/bias", "expected true or false, got string");
  row("input_type", R"({"/model/input": "28x28"})", "/model/input", "expected an array of positive integers");
  row("unknown_optimizer", R"({"/training/optimizer": "adamw"})", "/training/optimizer",
      "unknown optimizer 'adamw' (did you mean 'adam'?)");
}

// Sizes and counts past their limits (plan_limits.h), each of which once crashed
// `loom-cli validate` or ran out of memory, and a dataset that is not there.
void add_limit_rows() {
  row("stage_int_max", R"({"/parallel/stages": 2, "/model/layers/1/stage": 2147483647})", "/model/layers/1/stage",
      "stage 2147483647 does not exist");
  row("stages_huge", R"({"/parallel/stages": 2000000000})", "/parallel/stages", "above the limit of 1024 stages");
  row("replicas_huge", R"({"/parallel/data_parallel": 2000000000})", "/parallel/data_parallel",
      "above the limit of 4096 replicas");
  row("servers_huge", R"({"/parallel/sync": {"mode": "parameter_server", "servers": 2000000000}})",
      "/parallel/sync/servers", "above the limit of 4096 servers");
  row("out_huge", R"({"/model/layers/5/out": 2000000000})", "/model/layers/5/out",
      "2000000000 is above the limit of 16777216 features");
  row("params_huge", R"({"/model/layers/1/out": 16777216, "/model/layers/3/out": 16777216})", "/model",
      "parameters");
  row("batch_huge", R"({"/training/batch": 4611686018427387904})", "/training/batch", "above the limit");
  row("input_huge", R"({"/model/input": [1, 28, 2000000000]})", "/model/input/2", "above the limit");
  row("dataset_missing", R"({"/data/path": "/nonexistent/fashion"})", "/data/path",
      "'/nonexistent/fashion' does not exist on this machine");
}

// Layers, shapes and the model against its dataset.
void add_model_rows() {
  row("unknown_layer_type", R"({"/model/layers/2/type": "relu6"})", "/model/layers/2/type",
      "unknown layer type 'relu6' (did you mean 'relu'?)");
  row("linear_without_out", R"({"/model/layers/5/out": null})", "/model/layers/5/out", "missing required key 'out'");
  row("conv_kernel_too_large",
      R"({"/model/layers": [{"type": "conv2d", "out_channels": 2, "kernel": 31, "padding": 1},
                            {"type": "flatten"}, {"type": "linear", "out": 10}]})",
      "/model/layers/0/kernel", "kernel 31 is larger than the padded input 30x30");
  row("maxpool_too_large",
      R"({"/model/layers": [{"type": "maxpool2d", "kernel": 29}, {"type": "flatten"}, {"type": "linear", "out": 10}]})",
      "/model/layers/0/kernel", "pooling window 29 is larger than the input 28x28");
  row("linear_on_image", R"({"/model/layers/0/type": "relu"})", "/model/layers/1", "insert a flatten layer");
  row("conv_on_vector",
      R"({"/model/input": [784], "/model/layers": [{"type": "conv2d", "out_channels": 2, "kernel": 3},
                                                   {"type": "flatten"}, {"type": "linear", "out": 10}]})",
      "/model/layers/0", "conv2d needs a 3-D input");
  row("empty_model", R"({"/model/layers": []})", "/model/layers", "the model has no layers");
  row("empty_branch_list", R"({"/model/layers/2": {"type": "parallel", "branches": []}})", "/model/layers/2/branches",
      "at least one branch");
  row("empty_branch", R"({"/model/layers/2": {"type": "parallel", "branches": [{"layers": []}]}})",
      "/model/layers/2/branches/0/layers", "a branch needs at least one layer");
  row("branches_not_concatenable",
      R"({"/model/layers": [{"type": "parallel", "branches": [
            {"layers": [{"type": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1}]},
            {"layers": [{"type": "maxpool2d", "kernel": 2}]}]},
          {"type": "flatten"}, {"type": "linear", "out": 10}]})",
      "/model/layers/0", "branch outputs cannot be concatenated: branch 0 gives [4x28x28], branch 1 gives [1x14x14]");
  row("wrong_class_count", R"({"/model/layers/5/out": 12})", "/model/layers/5",
      "the model output is [12] but fashion-mnist has 10 classes");
  row("unflattened_output", R"({"/model/layers": [{"type": "relu"}]})", "/model/layers/0",
      "add a flatten layer, then a linear layer with out 10");
  row("input_vs_fashion", R"({"/model/input": [3, 32, 32]})", "/model/input",
      "fashion-mnist samples have shape [1x28x28] or [784]");
  row("input_vs_spirals",
      R"({"/data": {"source": "synthetic", "kind": "spirals", "classes": 3}, "/model/input": [3],
          "/model/layers": [{"type": "linear", "out": 3}]})",
      "/model/input", "synthetic spirals samples have shape [2]");
  row("classes_vs_blobs",
      R"({"/data": {"source": "synthetic", "kind": "blobs", "classes": 4, "features": 5}, "/model/input": [5],
          "/model/layers": [{"type": "linear", "out": 3}]})",
      "/model/layers/0", "synthetic blobs has 4 classes");
  row("dropout_p", R"({"/model/layers/2": {"type": "dropout", "p": 1.0}})", "/model/layers/2/p",
      "dropout probability p must be in [0, 1), got 1");
}

// Names, stages, devices and the parallel strategy.
void add_strategy_rows() {
  row("duplicate_names", R"({"/model/layers/1/name": "fc", "/model/layers/3/name": "fc"})", "/model/layers/3/name",
      "duplicate layer name 'fc' (also used by /model/layers/1)");
  row("empty_name", R"({"/model/layers/1/name": ""})", "/model/layers/1/name", "must not be empty");
  row("stage_out_of_range", R"({"/model/layers/5/stage": 1})", "/model/layers/5/stage",
      "stage 1 does not exist: parallel.stages is 1");
  row("stage_without_layers", R"({"/parallel/stages": 2, "/parallel/devices": null})", "/parallel/stages",
      "stage 1 has no layers");
  row("stages_out_of_order",
      R"({"/parallel/stages": 2, "/parallel/devices": null, "/model/layers/0/stage": 1, "/model/layers/1/stage": 1,
          "/model/layers/2/stage": 1})",
      "/model/layers/3/stage", "stages must follow model order");
  row("branch_layer_stage",
      R"({"/parallel/stages": 2, "/parallel/devices": null,
          "/model/layers/2": {"type": "parallel", "branches": [{"stage": 1, "layers": [{"type": "relu", "stage": 0}]}]},
          "/model/layers/3/stage": 1, "/model/layers/4/stage": 1, "/model/layers/5/stage": 1})",
      "/model/layers/2/branches/0/layers/0/stage", "runs on its branch's stage (1)");
  row("more_stages_than_ranks", R"({"/parallel/stages": 3})", "/parallel/stages",
      "3 stages but only 1 device(s): every stage runs on its own rank");
  row("hybrid_rank_count",
      R"({"/parallel/stages": 2, "/parallel/data_parallel": 2, "/model/layers/5/stage": 1,
          "/parallel/devices": [{"kind": "cpu"}, {"kind": "cpu"}, {"kind": "cpu"}]})",
      "/parallel/devices", "3 devices listed but the plan needs 4 ranks (data_parallel 2 x stages 2)");
  row("nested_branch_stage",
      R"({"/parallel/stages": 2, "/parallel/devices": [{"kind": "cpu"}, {"kind": "cpu"}],
          "/model/layers/2": {"type": "parallel", "branches": [{"layers": [
              {"type": "parallel", "branches": [{"stage": 1, "layers": [{"type": "relu"}]}]}]}]},
          "/model/layers/3/stage": 1, "/model/layers/4/stage": 1, "/model/layers/5/stage": 1})",
      "/model/layers/2/branches/0/layers/0/branches/0/stage", "only top-level parallel blocks may place branches");
  row("device_count", R"({"/parallel/data_parallel": 2})", "/parallel/devices",
      "1 devices listed but the plan needs 2 ranks");
  row("gpu_without_index", R"({"/parallel/devices/0/kind": "gpu"})", "/parallel/devices/0", "needs a \"gpu\" index");
  row("cpu_with_index", R"({"/parallel/devices/0/gpu": 0})", "/parallel/devices/0/gpu",
      "a cpu device takes no \"gpu\" index");
  row("unknown_device_kind", R"({"/parallel/devices/0/kind": "tpu"})", "/parallel/devices/0/kind",
      "unknown device kind 'tpu'");
  // No build has the NCCL communicator yet: refused, never run over MPI instead. (gpu
  // devices depend on the build: gpu_plans_follow_the_build.)
  if (loom::this_build().nccl) {
    row("nccl_on_cpu", R"({"/parallel/backend": "nccl"})", "/parallel/devices/0/kind",
        "the nccl backend needs gpu devices; use \"backend\": \"mpi\" for cpu devices");
  } else {
    row("nccl_refused", R"({"/parallel/backend": "nccl"})", "/parallel/backend",
        "this build has no NCCL communicator: set \"backend\": \"mpi\"");
  }
  row("tf32_without_gpu", R"({"/training/tf32": true})", "/training/tf32",
      "TF32 is a math mode of gpu devices and this plan has none");
  row("microbatches_zero", R"({"/parallel/microbatches": 0})", "/parallel/microbatches",
      "expected a positive integer, got 0");
  row("microbatches_not_dividing", R"({"/parallel/microbatches": 5})", "/parallel/microbatches",
      "5 micro-batches do not divide the per-replica batch of 64");
  row("batch_not_divisible",
      R"({"/training/batch": 63, "/parallel/data_parallel": 2, "/parallel/devices": null})", "/training/batch",
      "batch 63 is not divisible by data_parallel x grad_accumulation = 2");
  row("unknown_schedule", R"({"/parallel/schedule": "zigzag"})", "/parallel/schedule", "unknown schedule 'zigzag'");
  row("ssp_bound", R"({"/parallel/sync": {"mode": "ssp", "bound": -1}, "/parallel/devices": null})",
      "/parallel/sync/bound", "expected a non-negative integer, got -1");
  row("local_sgd_period", R"({"/parallel/sync": {"mode": "local_sgd", "period": 0}})", "/parallel/sync/period",
      "expected a positive integer, got 0");
  row("async_with_stages",
      R"({"/parallel/sync": {"mode": "ssp"}, "/parallel/stages": 2, "/parallel/devices": null})",
      "/parallel/stages", "sync mode ssp trains whole-model replicas; use stages 1 (got 2)");
  row("servers_zero", R"({"/parallel/sync": {"mode": "parameter_server", "servers": 0}, "/parallel/devices": null})",
      "/parallel/sync/servers", "expected a positive integer, got 0");
  row("straggler_rank", R"({"/parallel/stragglers": [{"rank": 1, "slowdown": 2.0}]})", "/parallel/stragglers/0/rank",
      "rank 1 is out of range: the plan has ranks 0..0");
  row("straggler_slowdown", R"({"/parallel/stragglers": [{"rank": 0, "slowdown": 0.5}]})",
      "/parallel/stragglers/0/slowdown", "slowdown must be at least 1");
  row("straggler_delay_ms", R"({"/parallel/stragglers": [{"rank": 0, "delay": "uniform", "delay_ms": -5}]})",
      "/parallel/stragglers/0/delay_ms", "expected a non-negative number, got -5");
  row("straggler_delay", R"({"/parallel/stragglers": [{"rank": 0, "delay": "gaussian"}]})",
      "/parallel/stragglers/0/delay", "unknown delay distribution 'gaussian'");
  row("bucket_mb", R"({"/parallel/bucket_mb": 0})", "/parallel/bucket_mb", "expected a positive number, got 0");
  row("grad_accumulation", R"({"/parallel/grad_accumulation": 0})", "/parallel/grad_accumulation",
      "expected a positive integer, got 0");
  row("unknown_sync_mode", R"({"/parallel/sync/mode": "gossip"})", "/parallel/sync/mode", "unknown sync mode 'gossip'");
  // Serving: one server and its clients, the whole model on the server.
  row("serve_devices", R"({"/serve": {"clients": 2}})", "/parallel/devices",
      "1 devices listed but the plan needs 3 ranks (1 inference server + 2 client(s))");
  row("serve_max_batch", R"({"/serve": {"max_batch": 0}, "/parallel/devices": null})", "/serve/max_batch",
      "expected a positive integer, got 0");
  row("serve_arrivals", R"({"/serve": {"arrivals": "bursty"}, "/parallel/devices": null})", "/serve/arrivals",
      "unknown arrival process 'bursty'");
  row("serve_requests_per_client", R"({"/serve": {"clients": 3, "requests": 2}, "/parallel/devices": null})",
      "/serve/requests", "2 requests cannot be split over 3 clients");
  row("serve_whole_model", R"({"/serve": {}, "/parallel/data_parallel": 2, "/parallel/devices": null})",
      "/parallel/data_parallel", "use data_parallel 1 in a serving plan");
  row("serve_weights", R"({"/serve": {"weights": "/nonexistent/params.bin"}, "/parallel/devices": null})",
      "/serve/weights", "no parameter file '/nonexistent/params.bin'");
}

}  // namespace

void TestPlan::invalid_plan_reports_path_and_reason_data() {
  QTest::addColumn<QString>("input");  // "RAW:<text>" or a patch of the default plan
  QTest::addColumn<QString>("path");
  QTest::addColumn<QString>("reason");
  add_reader_rows();
  add_model_rows();
  add_strategy_rows();
  add_limit_rows();
}

void TestPlan::invalid_plan_reports_path_and_reason() {
  QFETCH(QString, input);
  QFETCH(QString, path);
  QFETCH(QString, reason);
  const std::string text = input.startsWith("RAW:") ? input.mid(4).toStdString() : patched_default(input.toStdString());
  const PlanResult result = loom::parse_plan(text);
  QVERIFY2(!result.plan.has_value(), "an invalid plan must not produce a plan");
  QVERIFY(!result.ok());
  const bool found = std::any_of(result.errors.begin(), result.errors.end(), [&](const loom::PlanError& e) {
    return e.path == path.toStdString() && e.reason.find(reason.toStdString()) != std::string::npos;
  });
  QVERIFY2(found, ("no error at '" + path.toStdString() + "' containing '" + reason.toStdString() + "'; got:" +
                   describe(result)).c_str());
}

void TestPlan::several_errors_are_all_reported() {
  const std::string text = patched_default(R"({"/training/batch": "big", "/model/layers/1/outt": 3,
      "/parallel/schedule": "zigzag", "/model/layers/2/p": 0.5, "/parallel/stragglers": [{"rank": 7}]})");
  const PlanResult result = loom::parse_plan(text);
  QVERIFY(!result.plan.has_value());
  const std::vector<std::string> expected{"/training/batch", "/model/layers/1/outt", "/parallel/schedule",
                                          "/model/layers/2/p", "/parallel/stragglers/0/rank"};
  for (const std::string& path : expected) {
    const bool found = std::any_of(result.errors.begin(), result.errors.end(),
                                   [&](const loom::PlanError& e) { return e.path == path; });
    QVERIFY2(found, ("missing error at " + path + "; got:" + describe(result)).c_str());
  }
  QCOMPARE(result.errors.size(), expected.size());  // and nothing spurious
}

void TestPlan::example_plans_validate_data() {
  QTest::addColumn<QString>("file");
  const QStringList files = QDir(QString::fromStdString(plans_dir())).entryList({"*.json"}, QDir::Files);
  QVERIFY(files.size() >= 4);
  for (const QString& file : files) QTest::newRow(file.toUtf8().constData()) << file;
}

void TestPlan::example_plans_validate() {
  QFETCH(QString, file);
  const PlanResult result = loom::load_plan_file(plans_dir() + "/" + file.toStdString());
  QVERIFY2(result.ok(), describe(result).c_str());
}

void TestPlan::mlp_example_equals_default_plan() {
  const PlanResult file = loom::load_plan_file(plans_dir() + "/mlp_fashion.json");
  QVERIFY2(file.ok(), describe(file).c_str());
  const PlanResult written = loom::parse_plan(loom::plan_to_json(loom::default_plan()));
  QVERIFY2(written.ok(), describe(written).c_str());
  QVERIFY(*file.plan == loom::default_plan());
  QVERIFY(*written.plan == *file.plan);
}

void TestPlan::default_plan_is_valid_and_as_specified() {
  const Plan plan = loom::default_plan();
  QVERIFY(loom::validate_plan(plan).empty());
  QCOMPARE(plan.model.input, (loom::Shape{1, 28, 28}));
  QCOMPARE(plan.model.layers.size(), std::size_t(6));
  QCOMPARE(plan.model.layers[1].out, std::int64_t(256));
  QCOMPARE(plan.model.layers[3].out, std::int64_t(128));
  QCOMPARE(plan.model.layers[5].out, std::int64_t(10));
  QCOMPARE(plan.model.layers[5].name, std::string("linear_5"));
  QCOMPARE(plan.training.batch, std::int64_t(64));
  QCOMPARE(plan.training.epochs, 3);
  QCOMPARE(plan.training.seed, std::uint64_t(42));
  QVERIFY(plan.training.optimizer.kind == loom::OptimizerKind::Adam);
  QCOMPARE(plan.training.optimizer.lr, 1e-3);
  QCOMPARE(plan.parallel.devices.size(), std::size_t(1));
  QCOMPARE(loom::world_size(plan), 1);
}

// A plan that uses every section with non-default values.
static Plan everything_plan() {
  Plan plan = loom::default_plan();
  plan.name = "everything";
  auto layer = [](loom::LayerKind kind, const char* name) {
    loom::LayerSpec spec;
    spec.kind = kind;
    spec.name = name;
    return spec;
  };
  loom::LayerSpec conv = layer(loom::LayerKind::Conv2d, "c");
  conv.bias = false;
  conv.out_channels = 4;
  conv.kernel = 3;
  conv.stride = 2;
  conv.padding = 1;
  conv.stage = 1;
  loom::LayerSpec pool = layer(loom::LayerKind::MaxPool2d, "pool");
  pool.kernel = 2;
  pool.stride = 2;
  loom::LayerSpec block = layer(loom::LayerKind::Parallel, "block");
  block.branches = {loom::BranchSpec{{conv}, 1}, loom::BranchSpec{{pool}, -1}};
  plan.model.layers.insert(plan.model.layers.begin(), block);
  plan.model.layers[2].bias = false;
  for (std::size_t i = 1; i < plan.model.layers.size(); ++i) plan.model.layers[i].stage = 1;
  loom::LayerSpec dropout = layer(loom::LayerKind::Dropout, "drop");
  dropout.p = 0.25;
  dropout.stage = 1;
  plan.model.layers.insert(plan.model.layers.begin() + 3, dropout);
  plan.data.train_limit = 1000;
  plan.data.shuffle = false;
  plan.data.noise = 0.125;
  plan.data.seed = 1ULL << 63;  // beyond int64: seeds are unsigned
  plan.training.steps = 17;
  plan.training.eval_every = 5;
  plan.training.threads = 2;
  plan.training.optimizer = {loom::OptimizerKind::Momentum, 0.05, 0.8, 0.85, 0.95, 1e-6, 1e-4};
  auto& par = plan.parallel;
  par.data_parallel = 2;
  par.stages = 2;
  par.microbatches = 4;
  par.schedule = loom::Schedule::OneFOneB;
  par.bucket_mb = 12.5;
  par.grad_accumulation = 2;
  par.backend = loom::CommBackend::Mpi;  // nccl and gpu devices: gpu_plans_follow_the_build
  // All-reduce: the asynchronous modes take no pipeline; bound, period and servers still
  // round-trip as written.
  par.sync = {loom::SyncMode::AllReduce, 3, 2, 2, true};
  par.devices.clear();
  for (int i = 0; i < 4; ++i) par.devices.push_back({loom::DeviceKind::Cpu, i < 2 ? "node-a" : "node-b", -1});
  par.stragglers = {{1, 2.5, loom::DelayDistribution::Exponential, 5.0}, {0, 1.0, loom::DelayDistribution::Uniform, 0.5}};
  return plan;
}

void TestPlan::round_trip_preserves_plan_data() {
  QTest::addColumn<QString>("source");  // a file in resources/plans, or "default" / "everything"
  QTest::newRow("default") << "default";
  QTest::newRow("everything") << "everything";
  for (const QString& file : QDir(QString::fromStdString(plans_dir())).entryList({"*.json"}, QDir::Files)) {
    QTest::newRow(file.toUtf8().constData()) << file;
  }
}

void TestPlan::round_trip_preserves_plan() {
  QFETCH(QString, source);
  Plan plan;
  if (source == "default") {
    plan = loom::default_plan();
  } else if (source == "everything") {
    plan = everything_plan();
    const auto errors = loom::validate_plan(plan);
    QVERIFY2(errors.empty(), (errors.empty() ? std::string() : errors[0].path + ": " + errors[0].reason).c_str());
  } else {
    const PlanResult file = loom::load_plan_file(plans_dir() + "/" + source.toStdString());
    QVERIFY2(file.ok(), describe(file).c_str());
    plan = *file.plan;
  }
  const std::string text = loom::plan_to_json(plan);
  const PlanResult again = loom::parse_plan(text);
  QVERIFY2(again.ok(), (describe(again) + "\n" + text).c_str());
  QVERIFY2(*again.plan == plan, text.c_str());
  QCOMPARE(loom::plan_to_json(*again.plan), text);                 // canonical: a fixed point
  QVERIFY(loom::parse_plan(loom::plan_to_json(plan, -1)).plan == again.plan);  // compact form too
}

void TestPlan::omitted_fields_get_defaults() {
  const PlanResult result = loom::parse_plan(R"({"format": "loom-plan/1", "model": {"input": [1, 28, 28], "layers": [
      {"type": "conv2d", "out_channels": 4, "kernel": 3}, {"type": "maxpool2d", "kernel": 2},
      {"type": "parallel", "stage": 1, "branches": [{"layers": [{"type": "relu"}]}, {"stage": 2, "layers": [{"type": "tanh"}]}]},
      {"type": "flatten", "stage": 2}, {"type": "dropout", "stage": 2}, {"type": "linear", "out": 10, "stage": 2}]},
      "training": {"optimizer": "momentum"},
      "parallel": {"stages": 3, "data_parallel": 2, "sync": {"servers": 2}}})");
  QVERIFY2(result.ok(), describe(result).c_str());
  const Plan& plan = *result.plan;
  const auto& layers = plan.model.layers;
  QCOMPARE(layers[0].stride, std::int64_t(1));  // conv default
  QCOMPARE(layers[0].padding, std::int64_t(0));
  QCOMPARE(layers[1].stride, std::int64_t(2));  // maxpool default = kernel
  QCOMPARE(layers[0].stage, 0);
  QCOMPARE(layers[2].branches[0].stage, -1);
  QCOMPARE(layers[2].branches[0].layers[0].stage, 1);  // inherits the block's stage
  QCOMPARE(layers[2].branches[1].layers[0].stage, 2);  // inherits its branch's stage
  QCOMPARE(layers[4].p, 0.5);
  QCOMPARE(layers[0].name, std::string("conv2d_0"));
  QCOMPARE(layers[2].branches[1].layers[0].name, std::string("tanh_4"));  // pre-order numbering
  QCOMPARE(layers[5].name, std::string("linear_7"));
  QVERIFY(plan.training.optimizer.kind == loom::OptimizerKind::Momentum);
  QCOMPARE(plan.training.optimizer.lr, loom::OptimizerSpec{}.lr);
  QCOMPARE(loom::world_size(plan), 6);  // 2 x 3; servers count only in the asynchronous modes
  QCOMPARE(plan.parallel.devices.size(), std::size_t(6));
  QVERIFY(plan.parallel.devices[5] == loom::DeviceSpec{});
  QVERIFY(plan.data == loom::DataSpec{});
}

void TestPlan::rank_roles_are_stage_major_then_servers() {
  Plan plan = loom::default_plan();
  plan.parallel.data_parallel = 2;
  plan.parallel.stages = 3;
  plan.parallel.sync.mode = loom::SyncMode::ParameterServer;
  plan.parallel.sync.servers = 2;
  using loom::RankKind;
  using loom::RankRole;
  QVERIFY(loom::rank_role(plan, 0) == (RankRole{RankKind::Worker, 0, 0, -1}));
  QVERIFY(loom::rank_role(plan, 1) == (RankRole{RankKind::Worker, 0, 1, -1}));
  QVERIFY(loom::rank_role(plan, 2) == (RankRole{RankKind::Worker, 1, 0, -1}));
  QVERIFY(loom::rank_role(plan, 5) == (RankRole{RankKind::Worker, 2, 1, -1}));
  QVERIFY(loom::rank_role(plan, 6) == (RankRole{RankKind::Server, -1, -1, 0}));
  QVERIFY(loom::rank_role(plan, 7) == (RankRole{RankKind::Server, -1, -1, 1}));
  QCOMPARE(loom::rank_role(plan, 8).kind, RankKind::Unused);
  QCOMPARE(loom::rank_role(plan, -1).kind, RankKind::Unused);
}

void TestPlan::world_size_counts_servers() {
  Plan plan = loom::default_plan();
  plan.parallel.data_parallel = 3;
  plan.parallel.stages = 2;
  QCOMPARE(loom::world_size(plan), 6);
  plan.parallel.sync.servers = 2;
  QCOMPARE(loom::world_size(plan), 6);  // all-reduce has no servers
  plan.parallel.sync.mode = loom::SyncMode::Ssp;
  QCOMPARE(loom::world_size(plan), 8);
  plan.parallel.sync.mode = loom::SyncMode::LocalSgd;
  QCOMPARE(loom::world_size(plan), 6);
  plan.serve = loom::ServeSpec{};
  plan.serve->clients = 3;
  QCOMPARE(loom::world_size(plan), 4);  // the inference server and its clients
  QCOMPARE(loom::rank_role(plan, 0).kind, loom::RankKind::InferenceServer);
  QCOMPARE(loom::rank_role(plan, 3).kind, loom::RankKind::Client);
  QCOMPARE(loom::rank_role(plan, 4).kind, loom::RankKind::Unused);
}

void TestPlan::missing_file_is_an_error() {
  const PlanResult result = loom::load_plan_file("/nonexistent/plan.json");
  QVERIFY(!result.ok());
  QCOMPARE(result.errors.size(), std::size_t(1));
  QVERIFY(result.errors[0].reason.find("cannot open plan file") != std::string::npos);
}

void TestPlan::validate_plan_checks_in_memory_plans() {
  Plan plan = loom::default_plan();
  plan.model.layers[1].out = 0;
  plan.training.batch = -1;
  const auto errors = loom::validate_plan(plan);
  auto has = [&](const std::string& path) {
    return std::any_of(errors.begin(), errors.end(), [&](const loom::PlanError& e) { return e.path == path; });
  };
  QVERIFY(has("/model/layers/1/out"));
  QVERIFY(has("/training/batch"));
}

namespace {

Plan two_gpu_nccl_plan(int second_gpu) {
  Plan plan = loom::default_plan();
  plan.parallel.data_parallel = 2;
  plan.parallel.backend = loom::CommBackend::Nccl;
  plan.parallel.devices = {{loom::DeviceKind::Gpu, "node-a", 0}, {loom::DeviceKind::Gpu, "node-a", second_gpu}};
  return plan;
}

std::string paths(const std::vector<loom::PlanError>& errors) {
  std::string text;
  for (const auto& e : errors) text += (text.empty() ? "" : " ") + e.path;
  return text;
}

}  // namespace

// No silent substitution: a plan for GPUs and NCCL is written and read like any other,
// and validated against what a build can run. Without CUDA a gpu device is refused; with
// it, a gpu device over MPI is accepted; nccl needs the NCCL communicator (built where
// NCCL, CUDA and MPI are).
void TestPlan::gpu_plans_follow_the_build() {
  QCOMPARE(loom::this_build().cuda, LOOM_EXPECT_CUDA_BUILD);  // the generated capability file
  QCOMPARE(loom::this_build().nccl, LOOM_EXPECT_NCCL_BUILD);
  const Plan plan = two_gpu_nccl_plan(1);
  const std::string text = loom::plan_to_json(plan);
  QVERIFY(text.find("\"backend\": \"nccl\"") != std::string::npos);
  QVERIFY(text.find("\"gpu\": 1") != std::string::npos);
  const PlanResult parsed = loom::parse_plan(text);
  QCOMPARE(parsed.plan.has_value(), loom::this_build().nccl);  // valid exactly where NCCL is built
  QCOMPARE(paths(loom::validate_plan(plan)), paths(parsed.errors));  // the designer's check is the same

  const loom::BuildCapabilities cpu_only{false, false}, cuda{true, false}, nccl{true, true};
  const auto without_cuda = loom::validate_plan(plan, cpu_only);
  QCOMPARE(paths(without_cuda), std::string("/parallel/backend /parallel/devices/0/kind /parallel/devices/1/kind"));
  QVERIFY2(without_cuda[1].reason.rfind("this build has no CUDA support: rebuild with the CUDA toolkit", 0) == 0,
           without_cuda[1].reason.c_str());
  QVERIFY(without_cuda[0].reason.rfind("this build has no NCCL communicator", 0) == 0);
  const auto with_cuda = loom::validate_plan(plan, cuda);
  QCOMPARE(paths(with_cuda), std::string("/parallel/backend"));  // gpu devices are fine, NCCL is not
  QVERIFY(with_cuda[0].reason.find("exchange tensors through host memory") != std::string::npos);
  Plan over_mpi = plan;
  over_mpi.parallel.backend = loom::CommBackend::Mpi;
  QVERIFY(loom::validate_plan(over_mpi, cuda).empty());
  over_mpi.training.tf32 = true;  // TF32 for the gpu devices' GEMMs
  QVERIFY(loom::validate_plan(over_mpi, cuda).empty());
  QCOMPARE(paths(loom::validate_plan(over_mpi, cpu_only)), std::string("/parallel/devices/0/kind /parallel/devices/1/kind"));
  QVERIFY(loom::validate_plan(plan, nccl).empty());
}

// What a build with NCCL checks: NCCL needs gpu devices, and one rank per GPU; ranks that
// share a GPU may still use MPI.
void TestPlan::nccl_placement_is_checked_in_a_gpu_build() {
  const loom::BuildCapabilities gpu_build{true, true};
  const auto shared = loom::validate_plan(two_gpu_nccl_plan(0), gpu_build);
  QCOMPARE(paths(shared), std::string("/parallel/devices/1"));
  QVERIFY(shared[0].reason.find("NCCL refuses two ranks on one GPU") != std::string::npos);
  Plan shared_over_mpi = two_gpu_nccl_plan(0);
  shared_over_mpi.parallel.backend = loom::CommBackend::Mpi;
  QVERIFY(loom::validate_plan(shared_over_mpi, gpu_build).empty());
  Plan on_cpu = loom::default_plan();
  on_cpu.parallel.backend = loom::CommBackend::Nccl;
  const auto cpu = loom::validate_plan(on_cpu, gpu_build);
  QCOMPARE(paths(cpu), std::string("/parallel/devices/0/kind"));
  QVERIFY(cpu[0].reason.find("the nccl backend needs gpu devices") != std::string::npos);
}


// A document nested a hundred thousand deep is refused before any parser recurses into
// it, and a model built in memory with parallel blocks nested past the limit is refused
// by validation (which walks it without recursion).
void TestPlan::deep_documents_and_models_are_refused() {
  const std::string deep = R"({"format": "loom-plan/1", "model": )" + std::string(100000, '[') +
                           std::string(100000, ']') + "}";
  const PlanResult parsed = loom::parse_plan(deep);
  QVERIFY(!parsed.ok());
  QCOMPARE(parsed.errors.size(), std::size_t(1));
  QVERIFY2(parsed.errors[0].reason.find("more than 64 levels deep") != std::string::npos, describe(parsed).c_str());
  Plan plan = loom::default_plan();
  loom::LayerSpec inner;
  inner.kind = loom::LayerKind::Relu;
  for (int level = 0; level < 40; ++level) {
    loom::LayerSpec block;
    block.kind = loom::LayerKind::Parallel;
    block.branches.push_back({{inner}, -1});
    inner = block;
  }
  plan.model.layers.insert(plan.model.layers.begin() + 2, inner);
  const auto errors = loom::validate_plan(plan);
  const bool nested = std::any_of(errors.begin(), errors.end(), [](const loom::PlanError& e) {
    return e.reason.find("parallel blocks nested 17 deep") != std::string::npos;
  });
  QVERIFY(nested);
}

// The largest rank's memory (weights, gradients, optimizer state, activations) against
// the machine's: a plan that does not fit is refused naming its stage.
void TestPlan::memory_beyond_the_machine_is_refused() {
  const Plan plan = loom::default_plan();
  QVERIFY(loom::limits::check_memory(plan, 0).empty());                // unknown memory: no check
  QVERIFY(loom::limits::check_memory(plan, 1LL << 40).empty());        // 1 TiB: fits
  const auto errors = loom::limits::check_memory(plan, 1 << 20);       // 1 MiB: does not
  QCOMPARE(errors.size(), std::size_t(1));
  QCOMPARE(errors[0].path, std::string("/model"));
  QVERIFY2(errors[0].reason.find("a rank of stage 0 needs about") != std::string::npos, errors[0].reason.c_str());
  QVERIFY(errors[0].reason.find("more than this machine's 1.0 MiB") != std::string::npos);
  // Four ranks on this machine that fit one by one, but not together.
  Plan four = plan;
  four.parallel.data_parallel = 4;
  four.parallel.devices.assign(4, loom::DeviceSpec{});
  const std::int64_t one_rank = loom::infer_model(four, nullptr).stage_memory_bytes.at(0);
  QVERIFY(loom::limits::check_memory(four, 4 * one_rank).empty());
  const auto together = loom::limits::check_memory(four, 2 * one_rank);
  QCOMPARE(together.size(), std::size_t(1));
  QCOMPARE(together[0].path, std::string("/parallel/devices"));
  QVERIFY2(together[0].reason.find("the 4 ranks on this machine need about") != std::string::npos,
           together[0].reason.c_str());
  // Placed on other hosts, they are those hosts' to hold.
  for (auto& device : four.parallel.devices) device.host = "node7";
  QVERIFY(loom::limits::check_memory(four, 2 * one_rank).empty());
}

QTEST_GUILESS_MAIN(TestPlan)
#include "test_plan.moc"
