// Tests for shape, parameter, FLOP and memory inference and the printed model table, on
// models whose numbers are worked out by hand in the comments.
#include <QTest>

#include <algorithm>
#include <sstream>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"

using loom::LayerKind;
using loom::LayerSpec;
using loom::Plan;
using loom::Shape;

namespace {

// Field-by-field rather than designated initializers, which -Wextra flags for every
// member left out.
LayerSpec simple(LayerKind kind) {
  LayerSpec layer;
  layer.kind = kind;
  return layer;
}
LayerSpec conv(std::int64_t out_channels, std::int64_t kernel, std::int64_t stride = 1, std::int64_t padding = 0) {
  LayerSpec layer = simple(LayerKind::Conv2d);
  layer.out_channels = out_channels;
  layer.kernel = kernel;
  layer.stride = stride;
  layer.padding = padding;
  return layer;
}
LayerSpec pool(std::int64_t kernel, std::int64_t stride = 0) {
  LayerSpec layer = simple(LayerKind::MaxPool2d);
  layer.kernel = kernel;
  layer.stride = stride;
  return layer;
}
LayerSpec linear(std::int64_t out) {
  LayerSpec layer = simple(LayerKind::Linear);
  layer.out = out;
  return layer;
}

Plan plan_with(Shape input, std::vector<LayerSpec> layers) {
  Plan plan = loom::default_plan();
  plan.model.input = std::move(input);
  plan.model.layers = std::move(layers);
  plan.model.layers.shrink_to_fit();
  for (auto& layer : plan.model.layers) layer.name.clear();
  loom::assign_default_layer_names(plan.model);
  return plan;
}

loom::ModelInfo infer_ok(const Plan& plan) {
  std::vector<loom::PlanError> errors;
  loom::ModelInfo info = loom::infer_model(plan, &errors);
  if (!errors.empty()) qWarning("unexpected error %s: %s", errors[0].path.c_str(), errors[0].reason.c_str());
  return errors.empty() ? info : loom::ModelInfo{};
}

}  // namespace

class TestModelInfo : public QObject {
  Q_OBJECT

 private slots:
  void default_mlp_numbers();
  void cnn_shapes_and_params();
  void conv_and_pool_arithmetic_data();
  void conv_and_pool_arithmetic();
  void parallel_block_is_preorder_and_concatenates();
  void stage_memory_splits_by_stage();
  void errors_do_not_cascade();
  void table_is_aligned_and_complete();
  void formatting_helpers();
};

void TestModelInfo::default_mlp_numbers() {
  const Plan plan = loom::default_plan();
  const loom::ModelInfo info = infer_ok(plan);
  QCOMPARE(info.layers.size(), std::size_t(6));
  // 784*256+256 + 256*128+128 + 128*10+10
  QCOMPARE(info.total_params, std::int64_t(235146));
  QCOMPARE(info.total_param_bytes, std::int64_t(235146 * 4));
  QCOMPARE(info.layers[0].output, (Shape{784}));
  QCOMPARE(info.layers[1].params, std::int64_t(200960));
  QCOMPARE(info.layers[3].params, std::int64_t(32896));
  QCOMPARE(info.layers[5].params, std::int64_t(1290));
  QCOMPARE(info.layers[1].forward_flops, std::int64_t(2 * 784 * 256));
  QCOMPARE(info.layers[2].forward_flops, std::int64_t(256));  // relu: one op per element
  QCOMPARE(info.layers[1].activation_bytes, std::int64_t(256 * 64 * 4));
  QCOMPARE(info.output, (Shape{10}));
  QCOMPARE(info.forward_flops, std::int64_t(2 * (784 * 256 + 256 * 128 + 128 * 10) + 256 + 128));
  // Activations: 784 + 256 + 256 + 128 + 128 + 10 = 1562 values per sample, batch 64, fp32.
  QCOMPARE(info.total_activation_bytes, std::int64_t(1562 * 64 * 4));
  // Adam: weights + gradients + two moments = 4 copies of the parameters.
  QCOMPARE(info.stage_memory_bytes.size(), std::size_t(1));
  QCOMPARE(info.stage_memory_bytes[0], std::int64_t(235146 * 4 * 4 + 1562 * 64 * 4));
  QCOMPARE(info.stage_params[0], std::int64_t(235146));
  QCOMPARE(info.layers[3].json_path, std::string("/model/layers/3"));
  QCOMPARE(info.layers[3].name, std::string("linear_3"));
  QCOMPARE(info.layers[3].id.value, 3);
  QVERIFY(!info.layers[3].parent.valid());
}

void TestModelInfo::cnn_shapes_and_params() {
  const Plan plan = plan_with({1, 28, 28}, {conv(16, 3, 1, 1), simple(LayerKind::Relu), pool(2), conv(32, 3, 1, 1),
                                            simple(LayerKind::Relu), pool(2), simple(LayerKind::Flatten), linear(128),
                                            simple(LayerKind::Relu), linear(10)});
  const loom::ModelInfo info = infer_ok(plan);
  QCOMPARE(info.layers.size(), std::size_t(10));
  QCOMPARE(info.layers[0].output, (Shape{16, 28, 28}));
  QCOMPARE(info.layers[2].output, (Shape{16, 14, 14}));
  QCOMPARE(info.layers[3].output, (Shape{32, 14, 14}));
  QCOMPARE(info.layers[5].output, (Shape{32, 7, 7}));
  QCOMPARE(info.layers[6].output, (Shape{1568}));
  QCOMPARE(info.layers[0].params, std::int64_t(16 * 1 * 9 + 16));
  QCOMPARE(info.layers[3].params, std::int64_t(32 * 16 * 9 + 32));
  QCOMPARE(info.layers[7].params, std::int64_t(1568 * 128 + 128));
  QCOMPARE(info.total_params, std::int64_t(160 + 4640 + 200832 + 1290));
  QCOMPARE(info.layers[0].forward_flops, std::int64_t(2 * 16 * 1 * 9 * 28 * 28));
  QCOMPARE(info.layers[2].forward_flops, std::int64_t(16 * 14 * 14 * 4));  // a compare per window element
}

void TestModelInfo::conv_and_pool_arithmetic_data() {
  QTest::addColumn<int>("kind");  // 0 conv, 1 pool
  QTest::addColumn<int>("kernel");
  QTest::addColumn<int>("stride");
  QTest::addColumn<int>("padding");
  QTest::addColumn<int>("size");
  QTest::addColumn<int>("expected");
  QTest::newRow("conv same padding") << 0 << 3 << 1 << 1 << 28 << 28;
  QTest::newRow("conv valid") << 0 << 5 << 1 << 0 << 28 << 24;
  QTest::newRow("conv stride 2 floors") << 0 << 5 << 2 << 0 << 32 << 14;  // (32-5)/2+1
  QTest::newRow("conv stride 2 padded") << 0 << 3 << 2 << 1 << 28 << 14;  // (28+2-3)/2+1
  QTest::newRow("conv kernel = padded input") << 0 << 6 << 1 << 1 << 4 << 1;
  QTest::newRow("pool default stride") << 1 << 2 << 0 << 0 << 28 << 14;
  QTest::newRow("pool odd floors") << 1 << 2 << 0 << 0 << 7 << 3;
  QTest::newRow("pool overlapping") << 1 << 3 << 2 << 0 << 14 << 6;  // (14-3)/2+1
  QTest::newRow("pool whole input") << 1 << 5 << 0 << 0 << 5 << 1;
}

void TestModelInfo::conv_and_pool_arithmetic() {
  QFETCH(int, kind);
  QFETCH(int, kernel);
  QFETCH(int, stride);
  QFETCH(int, padding);
  QFETCH(int, size);
  QFETCH(int, expected);
  LayerSpec layer = kind == 0 ? conv(8, kernel, stride, padding) : pool(kernel, stride);
  const Plan plan = plan_with({3, size, size + 1}, {layer});
  std::vector<loom::PlanError> errors;
  const loom::ModelInfo info = loom::infer_model(plan, &errors);
  QVERIFY(errors.empty());
  const std::int64_t width = kind == 0 ? (size + 1 + 2 * padding - kernel) / (stride ? stride : 1) + 1
                                       : (size + 1 - kernel) / (stride ? stride : kernel) + 1;
  QCOMPARE(info.output, (Shape{kind == 0 ? 8 : 3, expected, width}));
}

void TestModelInfo::parallel_block_is_preorder_and_concatenates() {
  LayerSpec block = simple(LayerKind::Parallel);
  block.branches = {loom::BranchSpec{{conv(8, 3, 1, 1), pool(2)}, -1}, loom::BranchSpec{{conv(4, 5, 2, 2)}, -1}};
  const Plan plan = plan_with({1, 28, 28}, {block, simple(LayerKind::Flatten), linear(10)});
  const loom::ModelInfo info = infer_ok(plan);
  QCOMPARE(info.layers.size(), std::size_t(6));
  QVERIFY(info.layers[0].kind == LayerKind::Parallel);
  QCOMPARE(info.layers[0].output, (Shape{12, 14, 14}));  // 8 + 4 channels
  QCOMPARE(info.layers[1].json_path, std::string("/model/layers/0/branches/0/layers/0"));
  QCOMPARE(info.layers[2].output, (Shape{8, 14, 14}));
  QCOMPARE(info.layers[3].json_path, std::string("/model/layers/0/branches/1/layers/0"));
  QCOMPARE(info.layers[3].output, (Shape{4, 14, 14}));  // (28+4-5)/2+1
  QCOMPARE(info.layers[3].depth, 1);
  QCOMPARE(info.layers[3].branch, 1);
  QCOMPARE(info.layers[3].parent.value, 0);
  QCOMPARE(info.layers[3].name, std::string("conv2d_3"));
  QCOMPARE(info.layers[4].json_path, std::string("/model/layers/1"));
  QCOMPARE(info.layers[4].output, (Shape{12 * 14 * 14}));
  QCOMPARE(info.layers[4].depth, 0);
  QCOMPARE(info.layers[0].params, std::int64_t(0));

  // Feature vectors concatenate too.
  LayerSpec heads = simple(LayerKind::Parallel);
  heads.branches = {loom::BranchSpec{{linear(6)}, -1}, loom::BranchSpec{{linear(4)}, -1}};
  const loom::ModelInfo flat = infer_ok(plan_with({784}, {heads}));
  QCOMPARE(flat.output, (Shape{10}));
  QCOMPARE(flat.total_params, std::int64_t(784 * 10 + 10));
}

void TestModelInfo::stage_memory_splits_by_stage() {
  Plan plan = loom::default_plan();
  plan.parallel.stages = 2;
  for (std::size_t i = 3; i < plan.model.layers.size(); ++i) plan.model.layers[i].stage = 1;
  plan.training.optimizer.kind = loom::OptimizerKind::Sgd;  // weights + gradients only
  const loom::ModelInfo info = infer_ok(plan);
  QCOMPARE(info.stage_params, (std::vector<std::int64_t>{200960, 32896 + 1290}));
  QCOMPARE(info.stage_memory_bytes[0], std::int64_t(200960 * 4 * 2 + (784 + 256 + 256) * 64 * 4));
  QCOMPARE(info.stage_memory_bytes[1], std::int64_t((32896 + 1290) * 4 * 2 + (128 + 128 + 10) * 64 * 4));
  plan.training.optimizer.kind = loom::OptimizerKind::Momentum;  // plus one velocity
  QCOMPARE(infer_ok(plan).stage_memory_bytes[1], std::int64_t((32896 + 1290) * 4 * 3 + (128 + 128 + 10) * 64 * 4));
}

void TestModelInfo::errors_do_not_cascade() {
  // An oversized pool leaves its shape unknown; the layers after it add no errors.
  const Plan plan = plan_with({1, 4, 4}, {pool(5), conv(2, 3), simple(LayerKind::Flatten), linear(10)});
  std::vector<loom::PlanError> errors;
  const loom::ModelInfo info = loom::infer_model(plan, &errors);
  QCOMPARE(errors.size(), std::size_t(1));
  QCOMPARE(errors[0].path, std::string("/model/layers/0/kernel"));
  QCOMPARE(info.layers.size(), std::size_t(4));
  QVERIFY(info.layers[1].output.empty());
  QCOMPARE(info.output, (Shape{10}));
  loom::infer_model(plan, nullptr);  // errors are optional
}

void TestModelInfo::table_is_aligned_and_complete() {
  const Plan plan = loom::default_plan();
  const std::string table = loom::format_model_table(infer_ok(plan));
  for (const auto& layer : plan.model.layers) QVERIFY(table.find(layer.name) != std::string::npos);
  QVERIFY(table.find("235,146") != std::string::npos);
  QVERIFY(table.find("params") != std::string::npos);
  QVERIFY(table.find("stage 0") != std::string::npos);
  // Header, rule and layer rows have the same width: the last column is right-aligned.
  std::istringstream lines(table);
  std::string line;
  std::vector<std::size_t> widths;
  for (int i = 0; i < 8 && std::getline(lines, line); ++i) widths.push_back(line.size());
  QCOMPARE(widths.size(), std::size_t(8));
  QVERIFY(std::all_of(widths.begin(), widths.end(), [&](std::size_t w) { return w == widths[0]; }));
}

void TestModelInfo::formatting_helpers() {
  QCOMPARE(loom::format_shape({1, 28, 28}), std::string("1x28x28"));
  QCOMPARE(loom::format_shape({784}), std::string("784"));
  QCOMPARE(loom::format_shape({}), std::string("?"));
  QCOMPARE(loom::format_bytes(512), std::string("512 B"));
  QCOMPARE(loom::format_bytes(1536), std::string("1.5 KiB"));
  QCOMPARE(loom::format_bytes(3 * 1024 * 1024), std::string("3.0 MiB"));
  QCOMPARE(loom::format_bytes(std::int64_t(5) << 30), std::string("5.0 GiB"));
}

QTEST_GUILESS_MAIN(TestModelInfo)
#include "test_model_info.moc"
