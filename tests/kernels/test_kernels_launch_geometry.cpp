// The launch geometry of the CUDA backend's kernels, read from the launch log of the host
// executor (which records the grid CudaExec launches: both take it from launch_geometry.h).
// A training step of the example CNN (resources/plans/cnn_fashion.json) runs through the
// backend at batch 64, and at batch 512 where a linear layer's bias gradient sums 512 rows;
// every launch must cover its work items with whole blocks and no spare block, and no
// reduction may be launched with fewer threads than its work needs: at least
// min(values summed / 64, 1024) threads, and no thread summing more than 64 values. One
// thread per output (the serial bias gradients these replaced) fails both at these shapes.
#include <QtTest>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "loom/cuda/host_body_backend.h"
#include "loom/cuda/launch_geometry.h"
#include "loom/kernels/backend.h"

using loom::test::random_vector;
namespace lc = loom::cuda;
namespace lk = loom::kernels;

namespace {

// Device buffers of one backend, released at the end.
class Buffers {
 public:
  explicit Buffers(lk::Backend& backend) : be_(backend) {}
  ~Buffers() {
    for (void* p : owned_) be_.release(p);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  template <class T = float>
  T* random(std::size_t n, std::mt19937_64& rng) {
    const auto host = random_vector<float>(n, rng);
    auto* p = static_cast<T*>(be_.allocate(std::int64_t(n * sizeof(float))));
    owned_.push_back(p);
    be_.upload(p, host.data(), std::int64_t(n * sizeof(float)));
    return p;
  }
  template <class T = float>
  T* zeros(std::size_t n) {
    auto* p = static_cast<T*>(be_.allocate(std::int64_t(n * sizeof(T))));
    owned_.push_back(p);
    be_.fill(reinterpret_cast<float*>(p), 0.0f, std::int64_t(n));
    return p;
  }

 private:
  lk::Backend& be_;
  std::vector<void*> owned_;
};

// One training step of cnn_fashion.json's model at batch N: conv1 (1->16, 3x3, pad 1) ReLU
// pool 2, conv2 (16->32, 3x3, pad 1) ReLU pool 2, flatten, fc1 (1568->128) ReLU,
// classifier (128->10), softmax cross-entropy; backward; Adam on every parameter.
void cnn_step(lk::Backend& be, int N) {
  std::mt19937_64 rng(7);
  Buffers buf(be);
  lk::ConvDims c1{N, 1, 28, 28, 16, 3, 1, 1}, c2{N, 16, 14, 14, 32, 3, 1, 1};
  lk::PoolDims p1{N, 16, 28, 28, 2, 2}, p2{N, 32, 14, 14, 2, 2};
  const std::size_t a1 = std::size_t(N) * 16 * 28 * 28, a2 = std::size_t(N) * 32 * 14 * 14, flat = std::size_t(N) * 1568;
  float* x = buf.random(std::size_t(N) * 784, rng);
  auto* labels = buf.zeros<std::int32_t>(std::size_t(N));
  float *w1 = buf.random(16 * 9, rng), *b1 = buf.random(16, rng), *w2 = buf.random(32 * 16 * 9, rng);
  float *b2 = buf.random(32, rng), *w3 = buf.random(128 * 1568, rng), *b3 = buf.random(128, rng);
  float *w4 = buf.random(10 * 128, rng), *b4 = buf.random(10, rng);
  float* ws = buf.zeros(std::size_t(std::max(be.conv2d_workspace(c1), be.conv2d_workspace(c2))));
  float *y1 = buf.zeros(a1), *r1 = buf.zeros(a1), *q1 = buf.zeros(a1 / 4), *y2 = buf.zeros(a2), *r2 = buf.zeros(a2);
  float *q2 = buf.zeros(flat), *y3 = buf.zeros(std::size_t(N) * 128), *r3 = buf.zeros(std::size_t(N) * 128);
  float *logits = buf.zeros(std::size_t(N) * 10), *probs = buf.zeros(std::size_t(N) * 10);
  auto *m1 = buf.zeros<std::int32_t>(a1 / 4), *m2 = buf.zeros<std::int32_t>(flat);
  be.conv2d_forward(x, w1, b1, y1, c1, ws);
  be.activation_forward(lk::Activation::Relu, y1, r1, std::int64_t(a1));
  be.maxpool2d_forward(r1, q1, m1, p1);
  be.conv2d_forward(q1, w2, b2, y2, c2, ws);
  be.activation_forward(lk::Activation::Relu, y2, r2, std::int64_t(a2));
  be.maxpool2d_forward(r2, q2, m2, p2);
  be.linear_forward(q2, w3, b3, y3, N, 1568, 128);
  be.activation_forward(lk::Activation::Relu, y3, r3, std::int64_t(N) * 128);
  be.linear_forward(r3, w4, b4, logits, N, 128, 10);
  be.softmax_xent_forward(logits, labels, probs, N, 10, nullptr);
  // Backward; gradient buffers reuse the shapes above.
  float *dlogits = buf.zeros(std::size_t(N) * 10), *dr3 = buf.zeros(std::size_t(N) * 128);
  float *dy3 = buf.zeros(std::size_t(N) * 128), *dq2 = buf.zeros(flat), *dr2 = buf.zeros(a2), *dy2 = buf.zeros(a2);
  float *dq1 = buf.zeros(a1 / 4), *dr1 = buf.zeros(a1), *dy1 = buf.zeros(a1);
  float* grads[8] = {buf.zeros(16 * 9), buf.zeros(16), buf.zeros(32 * 16 * 9), buf.zeros(32),
                     buf.zeros(128 * 1568), buf.zeros(128), buf.zeros(10 * 128), buf.zeros(10)};
  be.softmax_xent_backward(probs, labels, dlogits, N, 10, 1.0f / float(N));
  be.linear_backward(r3, w4, dlogits, dr3, grads[6], grads[7], N, 128, 10);
  be.activation_backward(lk::Activation::Relu, y3, r3, dr3, dy3, std::int64_t(N) * 128);
  be.linear_backward(q2, w3, dy3, dq2, grads[4], grads[5], N, 1568, 128);
  be.maxpool2d_backward(m2, dq2, dr2, p2);
  be.activation_backward(lk::Activation::Relu, y2, r2, dr2, dy2, std::int64_t(a2));
  be.conv2d_backward(q1, w2, dy2, dq1, grads[2], grads[3], c2, ws);
  be.maxpool2d_backward(m1, dq1, dr1, p1);
  be.activation_backward(lk::Activation::Relu, y1, r1, dr1, dy1, std::int64_t(a1));
  be.conv2d_backward(x, w1, dy1, nullptr, grads[0], grads[1], c1, ws);
  float* params[8] = {w1, b1, w2, b2, w3, b3, w4, b4};
  const std::int64_t sizes[8] = {16 * 9, 16, 32 * 16 * 9, 32, 128 * 1568, 128, 10 * 128, 10};
  for (int i = 0; i < 8; ++i) {
    float *m = buf.zeros(std::size_t(sizes[i])), *v = buf.zeros(std::size_t(sizes[i]));
    be.adam_step(params[i], grads[i], m, v, sizes[i], lk::AdamParams{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1});
  }
  be.synchronize();
}

QString describe(const lc::LaunchRecord& r) {
  return QString("%1: %2 items in %3 blocks of %4 threads, %5 values summed")
      .arg(r.body).arg(r.n).arg(r.blocks).arg(r.threads).arg(r.summed);
}

}  // namespace

class TestLaunchGeometry : public QObject {
  Q_OBJECT

 private slots:
  void cnnStepLaunchesEnoughThreads_data() {
    QTest::addColumn<int>("batch");
    QTest::newRow("batch 64 (the plan's)") << 64;
    QTest::newRow("batch 512") << 512;
  }
  void cnnStepLaunchesEnoughThreads() {
    QFETCH(int, batch);
    lc::LaunchLog log;
    auto be = lc::make_host_body_backend({.log = &log});
    cnn_step(*be, batch);
    QVERIFY2(be->status().ok(), be->status().ok() ? "" : be->status().error().describe().c_str());
    QCOMPARE(log.dropped, std::int64_t(0));
    std::map<std::string, int> launches;
    for (const lc::LaunchRecord& r : log.records) {
      ++launches[r.body];
      QVERIFY2(r.n > 0 && r.threads == lc::kBlock, qPrintable(describe(r)));
      QVERIFY2(r.blocks * r.threads >= r.n, qPrintable("fewer threads than work items: " + describe(r)));
      QVERIFY2((r.blocks - 1) * r.threads < r.n, qPrintable("a block with no work: " + describe(r)));
      if (r.summed == 0) continue;
      const std::int64_t needed = std::min<std::int64_t>(r.summed / lc::kMaxChunk, 1024);
      QVERIFY2(r.n >= needed, qPrintable(QString("a reduction on %1 threads, needs %2: ").arg(r.n).arg(needed) + describe(r)));
      QVERIFY2((r.summed + r.n - 1) / r.n <= lc::kMaxChunk, qPrintable("a thread sums over 64 values: " + describe(r)));
    }
    // The step's reductions were all seen: two linear and two convolution bias gradients
    // (a pass 1 each, then SumPartials), the two pooling gathers, Adam on 8 parameters.
    QCOMPARE(launches["BiasGradPartial"], 2);
    QCOMPARE(launches["ChannelBiasGradPartial"], 2);
    QVERIFY(launches["SumPartials"] >= 4);  // a third pass where an output has over 64 partials
    QCOMPARE(launches["MaxPoolBackward"], 2);
    QCOMPARE(launches["AdamStep"], 8);
    qInfo("batch %d: %zu launches recorded", batch, log.records.size());
    for (const lc::LaunchRecord& r : log.records)
      if (r.summed > 0) qInfo("  %s", qPrintable(describe(r)));
  }

  // The chunking rule of launch_geometry.h on worked shapes: chunks of at most 32 values,
  // as few as that allows, whatever the number of outputs; no chunk is empty, and the same
  // shape gives the same chunking (the order of summation, hence the result, is fixed by
  // the shape).
  void chunkingRule_data() {
    QTest::addColumn<qlonglong>("outputs");
    QTest::addColumn<qlonglong>("length");
    QTest::addColumn<qlonglong>("chunks");
    QTest::addColumn<qlonglong>("per_chunk");
    QTest::newRow("conv1 at batch 64: 16 x 64*28*28") << 16LL << 50176LL << 1568LL << 32LL;
    QTest::newRow("conv2 at batch 64: 32 x 64*14*14") << 32LL << 12544LL << 392LL << 32LL;
    QTest::newRow("fc1 at batch 64") << 128LL << 64LL << 2LL << 32LL;
    QTest::newRow("classifier at batch 7") << 10LL << 7LL << 1LL << 7LL;
    QTest::newRow("wide layer at batch 64") << 100000LL << 64LL << 2LL << 32LL;
    QTest::newRow("100 rows: 4 chunks of 25, not 3 of 32 and one of 4") << 4LL << 100LL << 4LL << 25LL;
    QTest::newRow("one sum of a million") << 1LL << 1000000LL << 31250LL << 32LL;
    QTest::newRow("a single value") << 3LL << 1LL << 1LL << 1LL;
  }
  void chunkingRule() {
    QFETCH(qlonglong, outputs);
    QFETCH(qlonglong, length);
    QFETCH(qlonglong, chunks);
    QFETCH(qlonglong, per_chunk);
    const lc::Chunking c = lc::reduction_chunks(outputs, length);
    QCOMPARE(qlonglong(c.chunks), chunks);
    QCOMPARE(qlonglong(c.length), per_chunk);
    QVERIFY(c.chunks * c.length >= length && (c.chunks - 1) * c.length < length);
    QVERIFY(c.length <= lc::kChunk);
    const lc::Chunking again = lc::reduction_chunks(outputs, length);
    QVERIFY(again.chunks == c.chunks && again.length == c.length);
  }
};

QTEST_GUILESS_MAIN(TestLaunchGeometry)
#include "test_kernels_launch_geometry.moc"
