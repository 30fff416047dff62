// Tests for launcher/data: the IDX reader on the real Fashion-MNIST files and on damaged
// fixtures (gzip and raw), the synthetic sets, the per-epoch shuffle and per-rank sharding.
#include <zlib.h>

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "loom/data/dataset.h"

using namespace loom;
using namespace loom::data;

namespace {

const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

// An IDX file: magic, dims, then `payload` (which may be shorter than the dims claim).
std::vector<std::uint8_t> idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& dims,
                                    const std::vector<std::uint8_t>& payload) {
  std::vector<std::uint8_t> out;
  put_u32(out, magic);
  for (auto d : dims) put_u32(out, d);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile gz = gzopen(path.c_str(), "wb");
    QVERIFY(gz != nullptr);
    QCOMPARE(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    QCOMPARE(gzclose(gz), Z_OK);
  } else {
    QFile f(QString::fromStdString(path));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<qint64>(bytes.size()));
  }
}

// `count` images of rows x cols with pixel i*7 mod 256, labels i mod 10.
std::vector<std::uint8_t> image_payload(int count, int rows, int cols) {
  std::vector<std::uint8_t> p(static_cast<std::size_t>(count * rows * cols));
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::uint8_t>((i * 7) % 256);
  return p;
}
std::vector<std::uint8_t> label_payload(int count) {
  std::vector<std::uint8_t> p(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) p[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i % 10);
  return p;
}

void write_pair(const std::string& dir, const std::string& prefix, int count, int rows, int cols, bool gzip) {
  const std::string ext = gzip ? ".gz" : "";
  write_file(dir + "/" + prefix + "-images-idx3-ubyte" + ext,
             idx_bytes(0x803, {std::uint32_t(count), std::uint32_t(rows), std::uint32_t(cols)},
                       image_payload(count, rows, cols)), gzip);
  write_file(dir + "/" + prefix + "-labels-idx1-ubyte" + ext,
             idx_bytes(0x801, {std::uint32_t(count)}, label_payload(count)), gzip);
}

QString msg(const Error& e) { return QString::fromStdString(e.describe()); }

#define EXPECT_ERROR(result, code_, substring)                                                  \
  do {                                                                                          \
    QVERIFY2(!(result).ok(), "expected an error");                                              \
    QCOMPARE((result).error().code, code_);                                                     \
    QVERIFY2((result).error().message.find(substring) != std::string::npos, qPrintable(msg((result).error()))); \
  } while (0)

}  // namespace

class TestData : public QObject {
  Q_OBJECT
 private slots:
  void readsRealFashionMnist();
  void rawAndGzipReadTheSame_data();
  void rawAndGzipReadTheSame();
  void loadsDirectoryOfRawFiles();
  void missingFile();
  void wrongMagic_data();
  void wrongMagic();
  void truncated_data();
  void truncated();
  void truncatedGzipStream();
  void countMismatch();
  void dimsMismatch();
  void epochOrderIsDeterministicPermutation();
  void epochOrderIdentityWithoutShuffle();
  void shardsUnionIsSingleProcessBatch_data();
  void shardsUnionIsSingleProcessBatch();
  void batchesPerEpochDropsRemainder();
  void syntheticBlobs();
  void syntheticSpirals();
  void loadDatasetAppliesLimits();
};

void TestData::readsRealFashionMnist() {
  if (!std::filesystem::exists(std::string(kFashionDir) + "/train-images-idx3-ubyte.gz"))
    QSKIP("dataset-fashion-mnist is not installed");
  auto sets = load_fashion_mnist(kFashionDir);
  QVERIFY2(sets.ok(), sets.ok() ? "" : qPrintable(msg(sets.error())));
  QCOMPARE(sets->train.count(), std::int64_t{60000});
  QCOMPARE(sets->test.count(), std::int64_t{10000});
  QCOMPARE(sets->train.sample_shape, (Shape{1, 28, 28}));
  QCOMPARE(sets->train.sample_size, std::int64_t{784});
  QCOMPARE(sets->train.classes, 10);
  QCOMPARE(sets->train.features.size(), std::size_t{60000} * 784);
  QCOMPARE(sets->train.labels[0], 9);  // "ankle boot"
  QCOMPARE(sets->test.labels[0], 9);
  const auto [lo, hi] = std::minmax_element(sets->train.features.begin(), sets->train.features.end());
  QCOMPARE(*lo, 0.0f);
  QCOMPARE(*hi, 1.0f);
  std::vector<int> per_class(10, 0);
  for (auto l : sets->train.labels) per_class[static_cast<std::size_t>(l)]++;
  for (int c : per_class) QCOMPARE(c, 6000);
}

void TestData::rawAndGzipReadTheSame_data() {
  QTest::addColumn<bool>("gzip");
  QTest::newRow("raw") << false;
  QTest::newRow("gzip") << true;
}

void TestData::rawAndGzipReadTheSame() {
  QFETCH(bool, gzip);
  QTemporaryDir dir;
  const std::string d = dir.path().toStdString();
  write_pair(d, "train", 5, 3, 4, gzip);
  const std::string ext = gzip ? ".gz" : "";
  auto set = read_idx_pair(d + "/train-images-idx3-ubyte" + ext, d + "/train-labels-idx1-ubyte" + ext);
  QVERIFY2(set.ok(), set.ok() ? "" : qPrintable(msg(set.error())));
  QCOMPARE(set->count(), std::int64_t{5});
  QCOMPARE(set->sample_shape, (Shape{1, 3, 4}));
  QCOMPARE(set->sample_size, std::int64_t{12});
  const auto pixels = image_payload(5, 3, 4);
  for (std::size_t i = 0; i < pixels.size(); ++i) QCOMPARE(set->features[i], pixels[i] / 255.0f);
  QCOMPARE(set->labels, (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
}

void TestData::loadsDirectoryOfRawFiles() {
  QTemporaryDir dir;
  const std::string d = dir.path().toStdString();
  write_pair(d, "train", 20, 28, 28, false);
  write_pair(d, "t10k", 7, 28, 28, false);
  auto sets = load_fashion_mnist(d);
  QVERIFY2(sets.ok(), sets.ok() ? "" : qPrintable(msg(sets.error())));
  QCOMPARE(sets->train.count(), std::int64_t{20});
  QCOMPARE(sets->test.count(), std::int64_t{7});
  QCOMPARE(sets->train.classes, 10);
}

void TestData::missingFile() {
  QTemporaryDir dir;
  const std::string d = dir.path().toStdString();
  auto set = read_idx_pair(d + "/nothing-images.gz", d + "/nothing-labels.gz");
  EXPECT_ERROR(set, ErrorCode::NotFound, "nothing-images.gz");
  QVERIFY(set.error().hint.find("apt-get install dataset-fashion-mnist") != std::string::npos);
  QVERIFY(set.error().hint.find("data.path") != std::string::npos);
  auto sets = load_fashion_mnist(d);
  EXPECT_ERROR(sets, ErrorCode::NotFound, "train-images-idx3-ubyte");
}

void TestData::wrongMagic_data() {
  QTest::addColumn<bool>("gzip");
  QTest::newRow("raw") << false;
  QTest::newRow("gzip") << true;
}

void TestData::wrongMagic() {
  QFETCH(bool, gzip);
  QTemporaryDir dir;
  const std::string d = dir.path().toStdString();
  write_pair(d, "train", 4, 2, 2, gzip);
  const std::string ext = gzip ? ".gz" : "";
  const std::string images = d + "/train-images-idx3-ubyte" + ext;
  const std::string labels = d + "/train-labels-idx1-ubyte" + ext;
  auto swapped = read_idx_pair(labels, images);  // the label file where images belong
  EXPECT_ERROR(swapped, ErrorCode::Corrupt, "expected 0x00000803");
  EXPECT_ERROR(swapped, ErrorCode::Corrupt, "found 0x00000801");
  EXPECT_ERROR(swapped, ErrorCode::Corrupt, labels);
  write_file(labels, idx_bytes(0x12345678, {4}, label_payload(4)), gzip);
  auto bad_labels = read_idx_pair(images, labels);
  EXPECT_ERROR(bad_labels, ErrorCode::Corrupt, "expected 0x00000801");
  EXPECT_ERROR(bad_labels, ErrorCode::Corrupt, "found 0x12345678");
}

void TestData::truncated_data() {
  QTest::addColumn<bool>("gzip");
  QTest::newRow("raw") << false;
  QTest::newRow("gzip") << true;
}

void TestData::truncated() {
  QFETCH(bool, gzip);
  QTemporaryDir dir;
  const std::string d = dir.path().toStdString();
  write_pair(d, "train", 3, 4, 4, gzip);
  const std::string ext = gzip ? ".gz" : "";
  const std::string images = d + "/train-images-idx3-ubyte" + ext;
  const std::string labels = d + "/train-labels-idx1-ubyte" + ext;
  auto pixels = image_payload(3, 4, 4);
  pixels.resize(40);  // the header claims 48 bytes
  write_file(images, idx_bytes(0x803, {3, 4, 4}, pixels), gzip);
  auto set = read_idx_pair(images, labels);
  EXPECT_ERROR(set, ErrorCode::Corrupt, "truncated");
  EXPECT_ERROR(set, ErrorCode::Corrupt, "expected 48 bytes");
  EXPECT_ERROR(set, ErrorCode::Corrupt, "read 40");
  EXPECT_ERROR(set, ErrorCode::Corrupt, images);
  write_file(images, {0x00, 0x00}, gzip);  // cut inside the magic number
  auto header = read_idx_pair(images, labels);
  EXPECT_ERROR(header, ErrorCode::Corrupt, "truncated");
}

// A gzip file cut short (an interrupted download) rather than a whole stream of short data.
void TestData::truncatedGzipStream() {
  QTemporaryDir dir;
  const std::string d = dir.path().toStdString();
  write_pair(d, "train", 50, 28, 28, true);
  const std::string images = d + "/train-images-idx3-ubyte.gz";
  QFile f(QString::fromStdString(images));
  QVERIFY(f.open(QIODevice::ReadWrite));
  QVERIFY(f.size() > 200);
  QVERIFY(f.resize(f.size() / 2));
  f.close();
  auto set = read_idx_pair(images, d + "/train-labels-idx1-ubyte.gz");
  EXPECT_ERROR(set, ErrorCode::Corrupt, "truncated");
  EXPECT_ERROR(set, ErrorCode::Corrupt, "expected 39200 bytes");
}

void TestData::countMismatch() {
  QTemporaryDir dir;
  const std::string d = dir.path().toStdString();
  write_file(d + "/img", idx_bytes(0x803, {3, 2, 2}, image_payload(3, 2, 2)), true);
  write_file(d + "/lbl", idx_bytes(0x801, {2}, label_payload(2)), false);
  auto set = read_idx_pair(d + "/img", d + "/lbl");
  EXPECT_ERROR(set, ErrorCode::Corrupt, "count mismatch");
  EXPECT_ERROR(set, ErrorCode::Corrupt, "has 3 images");
  EXPECT_ERROR(set, ErrorCode::Corrupt, "has 2 labels");
}

void TestData::dimsMismatch() {
  QTemporaryDir dir;
  const std::string d = dir.path().toStdString();
  write_pair(d, "train", 6, 28, 28, true);
  write_pair(d, "t10k", 6, 27, 28, true);
  auto sets = load_fashion_mnist(d);
  EXPECT_ERROR(sets, ErrorCode::Corrupt, "dims do not match");
  EXPECT_ERROR(sets, ErrorCode::Corrupt, "27x28");
}

void TestData::epochOrderIsDeterministicPermutation() {
  const auto a = epoch_order(1000, 42, 3, true);
  const auto b = epoch_order(1000, 42, 3, true);
  const auto next_epoch = epoch_order(1000, 42, 4, true);
  const auto other_seed = epoch_order(1000, 43, 3, true);
  QCOMPARE(a, b);
  QVERIFY(a != next_epoch);
  QVERIFY(a != other_seed);
  for (const auto* order : {&a, &next_epoch, &other_seed}) {
    auto sorted = *order;
    std::sort(sorted.begin(), sorted.end());
    for (std::int64_t i = 0; i < 1000; ++i) QCOMPARE(sorted[static_cast<std::size_t>(i)], i);
  }
  // A shuffle that barely moves anything would still be a permutation; demand real mixing.
  int fixed = 0;
  for (std::int64_t i = 0; i < 1000; ++i) fixed += a[static_cast<std::size_t>(i)] == i;
  QVERIFY2(fixed < 20, qPrintable(QString("%1 fixed points").arg(fixed)));
}

void TestData::epochOrderIdentityWithoutShuffle() {
  const auto order = epoch_order(17, 42, 5, false);
  QCOMPARE(order.size(), std::size_t{17});
  for (std::int64_t i = 0; i < 17; ++i) QCOMPARE(order[static_cast<std::size_t>(i)], i);
  QVERIFY(epoch_order(0, 1, 0, true).empty());
}

void TestData::shardsUnionIsSingleProcessBatch_data() {
  QTest::addColumn<int>("shards");
  QTest::newRow("1") << 1;
  QTest::newRow("2") << 2;
  QTest::newRow("4") << 4;
}

void TestData::shardsUnionIsSingleProcessBatch() {
  QFETCH(int, shards);
  DataSpec spec;
  spec.source = DataSource::Synthetic;
  spec.train_samples = 300;
  const Dataset set = make_synthetic(spec).train;
  const std::int64_t global = 32;
  const auto order = epoch_order(set.count(), 9, 1, true);
  for (std::int64_t batch = 0; batch < batches_per_epoch(set.count(), global); ++batch) {
    std::vector<float> single_x(static_cast<std::size_t>(global * set.sample_size));
    std::vector<std::int32_t> single_y(static_cast<std::size_t>(global));
    gather_batch(set, order, shard_of_batch(batch, global, 0, 1), single_x.data(), single_y.data());
    std::vector<float> joined_x;
    std::vector<std::int32_t> joined_y;
    std::set<std::int64_t> seen;
    for (int shard = 0; shard < shards; ++shard) {
      const BatchSlice slice = shard_of_batch(batch, global, shard, shards);
      QCOMPARE(slice.size, global / shards);
      for (std::int64_t i = slice.begin; i < slice.begin + slice.size; ++i) {
        QVERIFY2(seen.insert(i).second, "shards overlap");
        QVERIFY(i >= batch * global && i < (batch + 1) * global);
      }
      std::vector<float> x(static_cast<std::size_t>(slice.size * set.sample_size));
      std::vector<std::int32_t> y(static_cast<std::size_t>(slice.size));
      gather_batch(set, order, slice, x.data(), y.data());
      joined_x.insert(joined_x.end(), x.begin(), x.end());
      joined_y.insert(joined_y.end(), y.begin(), y.end());
    }
    QCOMPARE(static_cast<std::int64_t>(seen.size()), global);
    QCOMPARE(joined_x, single_x);
    QCOMPARE(joined_y, single_y);
  }
  // gather_batch follows the order: the single-process batch 0 holds samples order[0..31].
  std::vector<float> x(static_cast<std::size_t>(global * set.sample_size));
  std::vector<std::int32_t> y(static_cast<std::size_t>(global));
  gather_batch(set, order, shard_of_batch(0, global, 0, 1), x.data(), y.data());
  QCOMPARE(y[5], set.labels[static_cast<std::size_t>(order[5])]);
  QCOMPARE(x[5 * set.sample_size + 1], set.sample(order[5])[1]);
}

void TestData::batchesPerEpochDropsRemainder() {
  QCOMPARE(batches_per_epoch(100, 32), std::int64_t{3});
  QCOMPARE(batches_per_epoch(96, 32), std::int64_t{3});
  QCOMPARE(batches_per_epoch(31, 32), std::int64_t{0});
  QCOMPARE(batches_per_epoch(60000, 64), std::int64_t{937});
  QCOMPARE(batches_per_epoch(10, 0), std::int64_t{0});
}

void TestData::syntheticBlobs() {
  DataSpec spec;
  spec.source = DataSource::Synthetic;
  spec.synthetic = SyntheticKind::Blobs;
  spec.classes = 4;
  spec.features = 5;
  spec.train_samples = 400;
  spec.test_samples = 120;
  spec.noise = 0.3;
  const TrainTest a = make_synthetic(spec);
  const TrainTest b = make_synthetic(spec);
  QCOMPARE(a.train.sample_shape, (Shape{5}));
  QCOMPARE(a.train.sample_size, std::int64_t{5});
  QCOMPARE(a.train.classes, 4);
  QCOMPARE(a.train.count(), std::int64_t{400});
  QCOMPARE(a.test.count(), std::int64_t{120});
  QCOMPARE(a.train.features.size(), std::size_t{400 * 5});
  QCOMPARE(a.train.features, b.train.features);
  QCOMPARE(a.test.features, b.test.features);
  QVERIFY(!std::equal(a.test.features.begin(), a.test.features.end(), a.train.features.begin()));
  spec.seed += 1;
  QVERIFY(make_synthetic(spec).train.features != a.train.features);
  // Train and test share class centres: nearest train-class mean classifies the test set.
  std::vector<double> mean(4 * 5, 0.0);
  for (std::int64_t i = 0; i < a.train.count(); ++i)
    for (int f = 0; f < 5; ++f) mean[static_cast<std::size_t>(a.train.labels[i] * 5 + f)] += a.train.sample(i)[f] / 100.0;
  int correct = 0;
  for (std::int64_t i = 0; i < a.test.count(); ++i) {
    int best = 0;
    double best_d = 1e300;
    for (int c = 0; c < 4; ++c) {
      double dist = 0;
      for (int f = 0; f < 5; ++f) dist += std::pow(a.test.sample(i)[f] - mean[static_cast<std::size_t>(c * 5 + f)], 2);
      if (dist < best_d) best_d = dist, best = c;
    }
    correct += best == a.test.labels[static_cast<std::size_t>(i)];
  }
  QVERIFY2(correct > 110, qPrintable(QString("%1/120").arg(correct)));
}

void TestData::syntheticSpirals() {
  DataSpec spec;
  spec.source = DataSource::Synthetic;
  spec.synthetic = SyntheticKind::Spirals;
  spec.classes = 3;
  spec.features = 7;  // ignored: spirals are 2-D
  const TrainTest a = make_synthetic(spec);
  QCOMPARE(a.train.sample_shape, (Shape{2}));
  QCOMPARE(a.train.count(), spec.train_samples);
  QCOMPARE(a.test.count(), spec.test_samples);
  QCOMPARE(a.train.classes, 3);
  QCOMPARE(a.train.features, make_synthetic(spec).train.features);
  std::vector<int> per_class(3, 0);
  for (auto l : a.train.labels) {
    QVERIFY(l >= 0 && l < 3);
    per_class[static_cast<std::size_t>(l)]++;
  }
  for (int c : per_class) QCOMPARE(c, 1000);
  for (float v : a.train.features) QVERIFY(std::isfinite(v) && std::fabs(v) < 3.0f);
}

void TestData::loadDatasetAppliesLimits() {
  DataSpec spec;
  spec.source = DataSource::Synthetic;
  spec.train_limit = 100;
  spec.test_limit = 10000;  // more than there are: keep all
  auto sets = load_dataset(spec);
  QVERIFY(sets.ok());
  QCOMPARE(sets->train.count(), std::int64_t{100});
  QCOMPARE(sets->train.features.size(), std::size_t{100} * static_cast<std::size_t>(sets->train.sample_size));
  QCOMPARE(sets->test.count(), spec.test_samples);
  spec.classes = 0;
  EXPECT_ERROR(load_dataset(spec), ErrorCode::InvalidArgument, "classes");
  DataSpec missing;
  missing.path = "/nonexistent/loom-data";
  EXPECT_ERROR(load_dataset(missing), ErrorCode::NotFound, "/nonexistent/loom-data");
}

QTEST_GUILESS_MAIN(TestData)
#include "test_data.moc"
