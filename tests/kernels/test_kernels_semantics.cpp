// Conventions a trainer relies on: optimizer steps against hand-computed values (PyTorch
// semantics), softmax cross-entropy against closed forms, gradient accumulation vs
// overwriting, and the seeded generators behind dropout and initialisation.
#include "kernel_test_util.h"
#include "loom/kernels/cpu.h"

#include <QtTest>

#include <cmath>

using namespace loom;

class SemanticsTest : public QObject {
  Q_OBJECT
 private slots:
  void sgd();
  void momentum();
  void adam();
  void adamWeightDecay();
  void optimizersFloat();
  void xentUniformLogits();
  void xentKnownValues();
  void xentStableForHugeLogits();
  void xentBackwardScale();
  void linearBackwardAccumulates();
  void conv2dBackwardAccumulates();
  void maxpoolArgmax();
  void maxpoolTiesPickFirst();
  void dropoutMask();
  void uniformInit();
  void blasThreads();
};

// Three steps of w -= lr * (g + wd * w), lr = 0.1, wd = 0.01, g = 0.5, 0.5, -1, w0 = 1:
//   1 - 0.1 * (0.5 + 0.01)        = 0.949
//   0.949 - 0.1 * (0.5 + 0.00949) = 0.898051
//   0.898051 - 0.1 * (-1 + 0.00898051) = 0.997152949
void SemanticsTest::sgd() {
  double w = 1.0;
  const double g[] = {0.5, 0.5, -1.0}, want[] = {0.949, 0.898051, 0.997152949};
  for (int t = 0; t < 3; ++t) {
    cpu::sgd_step(&w, &g[t], 1, 0.1, 0.01);
    QVERIFY2(std::abs(w - want[t]) < 1e-12, qPrintable(QString("step %1: %2").arg(t + 1).arg(w, 0, 'g', 17)));
  }
}

// v = mu v + (g + wd w); w -= lr v, with v0 = 0, lr = 0.1, mu = 0.9, g = 0.5 every step.
// wd = 0:   v = 0.5, 0.95, 1.355;   w = 0.95, 0.855, 0.7195
// wd = 0.1: g' = 0.6, v = 0.6, w = 0.94; g' = 0.594, v = 1.134, w = 0.8266;
//           g' = 0.58266, v = 1.60326, w = 0.666274
void SemanticsTest::momentum() {
  const double g = 0.5;
  const double want_plain[] = {0.95, 0.855, 0.7195}, want_wd[] = {0.94, 0.8266, 0.666274};
  for (int decay = 0; decay < 2; ++decay) {
    double w = 1.0, v = 0.0;
    for (int t = 0; t < 3; ++t) {
      cpu::momentum_step(&w, &g, &v, 1, 0.1, 0.9, decay ? 0.1 : 0.0);
      const double want = decay ? want_wd[t] : want_plain[t];
      QVERIFY2(std::abs(w - want) < 1e-12,
               qPrintable(QString("wd %1 step %2: %3 want %4").arg(decay).arg(t + 1).arg(w, 0, 'g', 17).arg(want)));
    }
  }
}

// lr 0.1, betas (0.9, 0.999), eps 1e-8, w0 = 1, g = 0.5, -0.2, 0.3.
// Step 1: m = 0.05, v = 2.5e-4, m_hat = 0.5, sqrt(v_hat) = 0.5: w = 1 - 0.1*0.5/(0.5+1e-8) = 0.900000002.
// Step 2: m = 0.025, v = 2.8975e-4; m_hat = 0.025/0.19, sqrt(v_hat) = sqrt(2.8975e-4/0.001999)
//         = 0.380719...: w = 0.9 - 0.0345606 = 0.865439418...
// Step 3 likewise (bias corrections 0.271 and 0.002997001).
void SemanticsTest::adam() {
  double w = 1.0, m = 0.0, v = 0.0;
  const double g[] = {0.5, -0.2, 0.3}, want[] = {0.900000002, 0.8654394181165108, 0.8109953836811554};
  for (int t = 0; t < 3; ++t) {
    cpu::adam_step(&w, &g[t], &m, &v, 1, 0.1, 0.9, 0.999, 1e-8, 0.0, t + 1);
    QVERIFY2(std::abs(w - want[t]) < 1e-12, qPrintable(QString("step %1: %2").arg(t + 1).arg(w, 0, 'g', 17)));
  }
}

// As above with weight_decay = 0.1 as L2 in the gradient (torch.optim.Adam, not AdamW):
// step 1 sees g = 0.5 + 0.1 * 1 = 0.6, so m_hat / sqrt(v_hat) = 0.6 / (0.6 + 1e-8).
// The last case has a zero raw gradient on step 1: only the decay term moves w.
void SemanticsTest::adamWeightDecay() {
  struct Case { double w0, lr, wd; double g[3]; double want[3]; };
  const Case cases[] = {
      {1.0, 0.1, 0.1, {0.5, -0.2, 0.3}, {0.9000000016666666, 0.8475190629593703, 0.7791121607663538}},
      {-2.0, 0.01, 0.5, {0.0, 1e-3, -4.0}, {-1.9900000001, -1.98000161411237, -1.971753730032425}},
  };
  for (const auto& c : cases) {
    double w = c.w0, m = 0.0, v = 0.0;
    for (int t = 0; t < 3; ++t) {
      cpu::adam_step(&w, &c.g[t], &m, &v, 1, c.lr, 0.9, 0.999, 1e-8, c.wd, t + 1);
      QVERIFY2(std::abs(w - c.want[t]) < 1e-12,
               qPrintable(QString("w0 %1 step %2: %3").arg(c.w0).arg(t + 1).arg(w, 0, 'g', 17)));
    }
  }
}

// The float instantiations follow the double ones to float precision, over many elements.
void SemanticsTest::optimizersFloat() {
  std::mt19937_64 rng(3);
  const int n = 33;
  const auto g = test::random_vector<double>(n, rng);
  const auto w0 = test::random_vector<double>(n, rng);
  std::vector<float> gf(g.begin(), g.end()), wf(w0.begin(), w0.end()), mf(n, 0.f), vf(n, 0.f);
  std::vector<double> wd(w0), md(n, 0.0), vd(n, 0.0);
  for (int t = 1; t <= 3; ++t) {
    cpu::adam_step(wf.data(), gf.data(), mf.data(), vf.data(), n, 0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
    cpu::adam_step(wd.data(), g.data(), md.data(), vd.data(), n, 0.01, 0.9, 0.999, 1e-8, 0.01, t);
  }
  LOOM_VERIFY_EMPTY(test::compare(wf, wd, 1e-5, 1e-6, "adam w"));
  std::vector<float> mom(n, 0.f);
  std::vector<double> momd(n, 0.0);
  for (int t = 0; t < 3; ++t) {
    cpu::momentum_step(wf.data(), gf.data(), mom.data(), n, 0.1f, 0.9f, 0.0f);
    cpu::momentum_step(wd.data(), g.data(), momd.data(), n, 0.1, 0.9, 0.0);
    cpu::sgd_step(wf.data(), gf.data(), n, 0.05f, 0.1f);
    cpu::sgd_step(wd.data(), g.data(), n, 0.05, 0.1);
  }
  LOOM_VERIFY_EMPTY(test::compare(wf, wd, 1e-5, 1e-6, "momentum+sgd w"));
}

// Equal logits give softmax 1/C everywhere, so the loss is ln C whatever the label.
void SemanticsTest::xentUniformLogits() {
  const int N = 3, C = 10;
  std::vector<float> logits(N * C, 2.5f), probs(N * C);
  const std::int32_t labels[] = {0, 4, 9};
  const float loss = cpu::softmax_xent_forward(logits.data(), labels, probs.data(), N, C, nullptr);
  QVERIFY(std::abs(loss - std::log(10.0f)) < 1e-6f);
  for (float p : probs) QVERIFY(std::abs(p - 0.1f) < 1e-7f);
}

// Row 0: logits (0, ln 3), label 1 -> p = 3/4, loss -ln(3/4); argmax 1: correct.
// Row 1: logits (ln 4, 0), label 1 -> p = 1/5, loss ln 5; argmax 0: wrong.
// Row 2: logits (0, ln 3), label 0 -> p = 1/4, loss ln 4; argmax 1: wrong.
void SemanticsTest::xentKnownValues() {
  const double l3 = std::log(3.0), l4 = std::log(4.0);
  const double logits[] = {0, l3, l4, 0, 0, l3};
  const std::int32_t labels[] = {1, 1, 0};
  double probs[6];
  int correct = -1;
  const double loss = cpu::softmax_xent_forward(logits, labels, probs, 3, 2, &correct);
  QCOMPARE(correct, 1);
  QVERIFY(std::abs(loss - (-std::log(0.75) + std::log(5.0) + std::log(4.0)) / 3) < 1e-14);
  QVERIFY(std::abs(probs[0] - 0.25) < 1e-15 && std::abs(probs[1] - 0.75) < 1e-15);
  QVERIFY(std::abs(probs[2] - 0.8) < 1e-15 && std::abs(probs[3] - 0.2) < 1e-15);
  cpu::softmax_xent_forward(logits, labels, probs, 3, 2, nullptr);  // correct may be null
}

// Subtracting the row max: logits near 1e4 neither overflow nor lose the answer.
void SemanticsTest::xentStableForHugeLogits() {
  const float logits[] = {1e4f, 1e4f + std::log(3.0f), -1e4f, 1e4f};
  const std::int32_t labels[] = {1, 0};
  float probs[4];
  int correct = 0;
  const float loss = cpu::softmax_xent_forward(logits, labels, probs, 2, 2, &correct);
  QVERIFY(std::isfinite(loss));
  // Row 0 is ~ -ln(3/4) (float spacing near 1e4 is ~1e-3); row 1 is 2e4 with p underflowing to 0.
  QVERIFY(std::abs(loss - (0.2877f + 2e4f) / 2) < 1.0f);
  QVERIFY(std::abs(probs[1] - 0.75f) < 1e-3f);
  QCOMPARE(correct, 1);
}

// dlogits = (probs - onehot) * scale, overwritten.
void SemanticsTest::xentBackwardScale() {
  const double probs[] = {0.25, 0.75, 0.6, 0.4};
  const std::int32_t labels[] = {1, 0};
  double d[4] = {9, 9, 9, 9};
  cpu::softmax_xent_backward(probs, labels, d, 2, 2, 0.125);
  const double want[] = {0.25 * 0.125, -0.25 * 0.125, -0.4 * 0.125, 0.4 * 0.125};
  for (int i = 0; i < 4; ++i) QVERIFY2(std::abs(d[i] - want[i]) < 1e-15, qPrintable(QString::number(i)));
}

// Two backward calls add parameter gradients (micro-batches) and overwrite dx.
void SemanticsTest::linearBackwardAccumulates() {
  std::mt19937_64 rng(11);
  const int N = 4, in = 6, out = 3;
  const auto x = test::random_vector<float>(N * in, rng), W = test::random_vector<float>(out * in, rng);
  const auto dy = test::random_vector<float>(N * out, rng);
  std::vector<float> dx1(N * in), dx2(N * in), dW(out * in, 0.f), db(out, 0.f);
  cpu::linear_backward(x.data(), W.data(), dy.data(), dx1.data(), dW.data(), db.data(), N, in, out);
  const auto dW_once = dW, db_once = db;
  cpu::linear_backward(x.data(), W.data(), dy.data(), dx2.data(), dW.data(), db.data(), N, in, out);
  std::vector<float> dW_twice(dW_once), db_twice(db_once);
  for (auto& v : dW_twice) v *= 2;
  for (auto& v : db_twice) v *= 2;
  LOOM_VERIFY_EMPTY(test::compare(dW, dW_twice, 1e-6, 0, "dW"));
  LOOM_VERIFY_EMPTY(test::compare(db, db_twice, 1e-6, 0, "db"));
  LOOM_VERIFY_EMPTY(test::compare(dx2, dx1, 0, 0, "dx"));
  QVERIFY(std::any_of(dW_once.begin(), dW_once.end(), [](float v) { return v != 0.f; }));
}

void SemanticsTest::conv2dBackwardAccumulates() {
  std::mt19937_64 rng(12);
  cpu::ConvGeometry g;
  g.N = 2; g.C = 2; g.H = 6; g.W = 6; g.K = 3; g.R = 3; g.stride = 2; g.pad = 1;
  const auto x = test::random_vector<float>(std::size_t(g.N) * g.C * g.H * g.W, rng);
  const auto W = test::random_vector<float>(std::size_t(g.K) * g.C * g.R * g.R, rng);
  const auto dy = test::random_vector<float>(std::size_t(g.N) * g.K * g.out_h() * g.out_w(), rng);
  std::vector<float> work(std::size_t(g.workspace_elems())), dx1(x.size()), dx2(x.size());
  std::vector<float> dW(W.size(), 0.f), db(g.K, 0.f);
  cpu::conv2d_backward(x.data(), W.data(), dy.data(), dx1.data(), dW.data(), db.data(), g, work.data());
  std::vector<float> dW_twice(dW), db_twice(db);
  for (auto& v : dW_twice) v *= 2;
  for (auto& v : db_twice) v *= 2;
  cpu::conv2d_backward(x.data(), W.data(), dy.data(), dx2.data(), dW.data(), db.data(), g, work.data());
  LOOM_VERIFY_EMPTY(test::compare(dW, dW_twice, 1e-6, 0, "dW"));
  LOOM_VERIFY_EMPTY(test::compare(db, db_twice, 1e-6, 0, "db"));
  LOOM_VERIFY_EMPTY(test::compare(dx2, dx1, 0, 0, "dx"));
}

// argmax is the flat index within the sample's (n, c) plane.
void SemanticsTest::maxpoolArgmax() {
  cpu::PoolGeometry g;
  g.N = 1; g.C = 2; g.H = 4; g.W = 4;
  // Plane 0 maxima at (0,1) (1,3) (3,0) (2,2); plane 1 is plane 0 negated, maxima elsewhere.
  const float p0[16] = {1, 9, 2, 3,  4, 0, 1, 8,  0, 1, 7, 2,  6, 5, 3, 4};
  float x[32];
  for (int i = 0; i < 16; ++i) { x[i] = p0[i]; x[16 + i] = -p0[i]; }
  float y[8];
  std::int32_t arg[8];
  cpu::maxpool2d_forward(x, y, arg, g);
  const std::int32_t want_arg[8] = {1, 7, 12, 10, 5, 6, 8, 11};
  const float want_y[8] = {9, 8, 6, 7, 0, -1, 0, -2};
  for (int i = 0; i < 8; ++i) {
    QCOMPARE(arg[i], want_arg[i]);
    QCOMPARE(y[i], want_y[i]);
  }
  const float dy[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  float dx[32];
  std::fill(std::begin(dx), std::end(dx), 99.f);
  cpu::maxpool2d_backward(arg, dy, dx, g);
  float sum = 0;
  for (float v : dx) sum += v;
  QCOMPARE(sum, 36.f);  // everything else overwritten with 0
  QCOMPARE(dx[7], 2.f);
  QCOMPARE(dx[16 + 11], 8.f);
}

// On ties the first maximum in window order (row-major) wins, as in PyTorch, for both the
// 2x2-stride-2 path and the generic one.
void SemanticsTest::maxpoolTiesPickFirst() {
  for (int kernel : {2, 3}) {
    cpu::PoolGeometry g;
    g.N = 1; g.C = 1; g.H = 6; g.W = 6; g.kernel = kernel; g.stride = 2;
    std::vector<float> x(36, 5.f), y(std::size_t(g.out_h()) * g.out_w());
    std::vector<std::int32_t> arg(y.size());
    cpu::maxpool2d_forward(x.data(), y.data(), arg.data(), g);
    for (int oh = 0; oh < g.out_h(); ++oh)
      for (int ow = 0; ow < g.out_w(); ++ow) QCOMPARE(arg[oh * g.out_w() + ow], (oh * 2) * g.W + ow * 2);
  }
}

void SemanticsTest::dropoutMask() {
  const std::int64_t n = 20000;
  std::vector<float> x(n, 1.f), y(n), mask(n);
  cpu::dropout_forward(x.data(), y.data(), mask.data(), n, 0.0, 5, 0);
  QVERIFY(std::all_of(mask.begin(), mask.end(), [](float m) { return m == 1.f; }));

  cpu::dropout_forward(x.data(), y.data(), mask.data(), n, 0.25, 5, 0);
  const auto dropped = std::count(mask.begin(), mask.end(), 0.f);
  QVERIFY2(std::abs(double(dropped) / n - 0.25) < 0.015, qPrintable(QString::number(dropped)));
  QVERIFY(std::all_of(mask.begin(), mask.end(), [](float m) { return m == 0.f || std::abs(m - 4.f / 3) < 1e-6f; }));
  LOOM_VERIFY_EMPTY(test::compare(y, mask, 0, 0, "y = x * mask"));

  // Counter-based: offset k shifts the stream by k, the seed changes it, precision does not.
  std::vector<float> y2(n - 100), mask2(n - 100);
  cpu::dropout_forward(x.data(), y2.data(), mask2.data(), n - 100, 0.25, 5, 100);
  QVERIFY(std::equal(mask2.begin(), mask2.end(), mask.begin() + 100));
  std::vector<double> xd(n, 1.0), yd(n), maskd(n);
  cpu::dropout_forward(xd.data(), yd.data(), maskd.data(), n, 0.25, 5, 0);
  for (std::int64_t i = 0; i < n; ++i) QVERIFY((mask[i] == 0.f) == (maskd[i] == 0.0));
  cpu::dropout_forward(x.data(), y2.data(), mask2.data(), n - 100, 0.25, 6, 100);
  QVERIFY(!std::equal(mask2.begin(), mask2.end(), mask.begin() + 100));

  // p = 1 drops everything without producing NaN from 1/(1-p).
  cpu::dropout_forward(x.data(), y.data(), mask.data(), n, 1.0, 5, 0);
  QVERIFY(std::all_of(y.begin(), y.end(), [](float v) { return v == 0.f; }));
}

void SemanticsTest::uniformInit() {
  const std::int64_t n = 50000;
  std::vector<float> wf(n);
  std::vector<double> wd(n);
  cpu::uniform_init(wf.data(), n, 0.125f, 99);
  cpu::uniform_init(wd.data(), n, 0.125, 99);
  double mean = 0, sq = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    QVERIFY(wf[i] == float(wd[i]));  // same values in both precisions
    QVERIFY(wd[i] >= -0.125 && wd[i] < 0.125);
    mean += wd[i];
    sq += wd[i] * wd[i];
  }
  mean /= n;
  // U(-b, b): mean 0, variance b^2/3; sampling error ~ b/sqrt(3n) ~ 3e-4.
  QVERIFY2(std::abs(mean) < 2e-3, qPrintable(QString::number(mean)));
  QVERIFY(std::abs(sq / n - 0.125 * 0.125 / 3) < 2e-4);
  std::vector<double> again(n), other(n);
  cpu::uniform_init(again.data(), n, 0.125, 99);
  cpu::uniform_init(other.data(), n, 0.125, 100);
  QVERIFY(again == wd);
  QVERIFY(other != wd);
}

void SemanticsTest::blasThreads() {
  const int before = cpu::blas_threads();
  QVERIFY(before >= 1);
  cpu::set_blas_threads(1);
  QCOMPARE(cpu::blas_threads(), 1);
  cpu::set_blas_threads(0);  // 0 leaves the setting alone
  QCOMPARE(cpu::blas_threads(), 1);
  cpu::set_blas_threads(before);
}

QTEST_APPLESS_MAIN(SemanticsTest)
#include "test_kernels_semantics.moc"
