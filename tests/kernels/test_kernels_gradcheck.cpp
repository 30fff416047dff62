// Finite-difference gradient checks, in double, for every layer's backward (the fast
// BLAS paths and the loop references). Each check uses the scalar objective
// L = sum(y * r) for a fixed random r, so dL/dy = r exercises every output, and compares
// the backward's gradients with central differences (step 1e-6):
//   |analytic - numeric| <= 1e-6 * |numeric| + 1e-7.
// With O(1) values the central-difference error is ~1e-12 (truncation) + ~1e-9
// (round-off), far inside that bound, while a wrong sign or a missed term is O(0.1).
#include "kernel_test_util.h"
#include "loom/kernels/cpu.h"

#include <QtTest>

#include <numeric>

Q_DECLARE_METATYPE(loom::cpu::ConvGeometry)

using namespace loom;
using test::compare;
using test::dot;
using test::numeric_grad;

namespace {
constexpr double kRel = 1e-6;
constexpr double kAbs = 1e-7;
using Vec = std::vector<double>;

using ElementwiseForward = void (*)(const double*, double*, std::int64_t);
using ElementwiseBackward = void (*)(const double*, const double*, double*, std::int64_t);

// Element-wise activation check; `backward_takes_output` is tanh's convention (dx from y).
QString check_elementwise(ElementwiseForward fwd, ElementwiseBackward bwd, Vec x, bool backward_takes_output,
                          std::mt19937_64& rng) {
  const auto n = std::int64_t(x.size());
  const Vec r = test::random_vector<double>(x.size(), rng);
  Vec y(x.size()), dx(x.size());
  auto objective = [&] { fwd(x.data(), y.data(), n); return dot(y, r); };
  const Vec numeric = numeric_grad(x, objective);
  fwd(x.data(), y.data(), n);
  bwd(backward_takes_output ? y.data() : x.data(), r.data(), dx.data(), n);
  return compare(dx, numeric, kRel, kAbs, "dx");
}
}  // namespace

class GradCheckTest : public QObject {
  Q_OBJECT
 private slots:
  void checkerCatchesSignError();
  void linear_data();
  void linear();
  void relu();
  void tanh();
  void gelu();
  void conv2d_data();
  void conv2d();
  void maxpool2d_data();
  void maxpool2d();
  void dropout();
  void concat();
  void softmaxXent();

 private:
  std::mt19937_64 rng_{20240611};
};

// The harness itself must reject a backward with a flipped sign, or every check below is moot.
void GradCheckTest::checkerCatchesSignError() {
  Vec x = test::away_from_zero(16, rng_);
  const Vec r = test::random_vector<double>(16, rng_);
  Vec y(16), dx(16);
  auto objective = [&] { cpu::tanh_forward(x.data(), y.data(), 16); return dot(y, r); };
  const Vec numeric = numeric_grad(x, objective);
  cpu::tanh_forward(x.data(), y.data(), 16);
  cpu::tanh_backward(y.data(), r.data(), dx.data(), 16);
  QVERIFY2(compare(dx, numeric, kRel, kAbs, "dx").isEmpty(), "correct gradient must pass");
  for (auto& v : dx) v = -v;
  QVERIFY(!compare(dx, numeric, kRel, kAbs, "dx").isEmpty());
}

void GradCheckTest::linear_data() {
  QTest::addColumn<bool>("reference");
  QTest::newRow("blas") << false;
  QTest::newRow("reference") << true;
}

void GradCheckTest::linear() {
  QFETCH(bool, reference);
  const int N = 3, in = 5, out = 4;
  auto fwd = reference ? &cpu::ref::linear_forward<double> : &cpu::linear_forward<double>;
  auto bwd = reference ? &cpu::ref::linear_backward<double> : &cpu::linear_backward<double>;
  Vec x = test::random_vector<double>(N * in, rng_), W = test::random_vector<double>(out * in, rng_);
  Vec b = test::random_vector<double>(out, rng_);
  const Vec r = test::random_vector<double>(N * out, rng_);
  Vec y(N * out);
  auto objective = [&] { fwd(x.data(), W.data(), b.data(), y.data(), N, in, out); return dot(y, r); };
  const Vec ndx = numeric_grad(x, objective), ndW = numeric_grad(W, objective), ndb = numeric_grad(b, objective);

  Vec dx(N * in, 99.0), dW(out * in, 0.0), db(out, 0.0);  // dx pre-filled: it must be overwritten
  bwd(x.data(), W.data(), r.data(), dx.data(), dW.data(), db.data(), N, in, out);
  LOOM_VERIFY_EMPTY(compare(dx, ndx, kRel, kAbs, "dx"));
  LOOM_VERIFY_EMPTY(compare(dW, ndW, kRel, kAbs, "dW"));
  LOOM_VERIFY_EMPTY(compare(db, ndb, kRel, kAbs, "db"));
}

void GradCheckTest::relu() {
  LOOM_VERIFY_EMPTY(check_elementwise(cpu::relu_forward<double>, cpu::relu_backward<double>,
                                        test::away_from_zero(40, rng_), false, rng_));
}

void GradCheckTest::tanh() {
  LOOM_VERIFY_EMPTY(check_elementwise(cpu::tanh_forward<double>, cpu::tanh_backward<double>,
                                        test::random_vector<double>(40, rng_, -2.5, 2.5), true, rng_));
}

void GradCheckTest::gelu() {
  LOOM_VERIFY_EMPTY(check_elementwise(cpu::gelu_forward<double>, cpu::gelu_backward<double>,
                                        test::random_vector<double>(40, rng_, -3.0, 3.0), false, rng_));
}

void GradCheckTest::conv2d_data() {
  QTest::addColumn<cpu::ConvGeometry>("g");
  QTest::addColumn<bool>("reference");
  auto geo = [](int N, int C, int H, int W, int K, int R, int stride, int pad) {
    cpu::ConvGeometry g;
    g.N = N; g.C = C; g.H = H; g.W = W; g.K = K; g.R = R; g.stride = stride; g.pad = pad;
    return g;
  };
  const std::pair<const char*, cpu::ConvGeometry> cases[] = {
      {"3x3 s1 p0", geo(2, 3, 5, 5, 4, 3, 1, 0)},  {"3x3 s2 p1", geo(2, 3, 6, 5, 4, 3, 2, 1)},
      {"3x3 s1 p1", geo(2, 2, 5, 5, 3, 3, 1, 1)},  {"1x1 pointwise", geo(2, 3, 4, 4, 5, 1, 1, 0)},
      {"1x1 s2", geo(1, 2, 5, 5, 3, 1, 2, 0)},     {"5x5 s2 p2", geo(1, 2, 7, 6, 2, 5, 2, 2)},
  };
  for (const auto& [name, g] : cases) {
    QTest::newRow(qPrintable(QString("blas %1").arg(name))) << g << false;
    QTest::newRow(qPrintable(QString("reference %1").arg(name))) << g << true;
  }
}

void GradCheckTest::conv2d() {
  QFETCH(cpu::ConvGeometry, g);
  QFETCH(bool, reference);
  Vec x = test::random_vector<double>(std::size_t(g.N) * g.C * g.H * g.W, rng_);
  Vec W = test::random_vector<double>(std::size_t(g.K) * g.C * g.R * g.R, rng_);
  Vec b = test::random_vector<double>(g.K, rng_);
  const Vec r = test::random_vector<double>(std::size_t(g.N) * g.K * g.out_h() * g.out_w(), rng_);
  Vec y(r.size()), work(std::size_t(g.workspace_elems()));
  auto objective = [&] {
    if (reference) cpu::ref::conv2d_forward(x.data(), W.data(), b.data(), y.data(), g);
    else cpu::conv2d_forward(x.data(), W.data(), b.data(), y.data(), g, work.data());
    return dot(y, r);
  };
  const Vec ndx = numeric_grad(x, objective), ndW = numeric_grad(W, objective), ndb = numeric_grad(b, objective);

  Vec dx(x.size(), 99.0), dW(W.size(), 0.0), db(b.size(), 0.0);
  if (reference) cpu::ref::conv2d_backward(x.data(), W.data(), r.data(), dx.data(), dW.data(), db.data(), g);
  else cpu::conv2d_backward(x.data(), W.data(), r.data(), dx.data(), dW.data(), db.data(), g, work.data());
  LOOM_VERIFY_EMPTY(compare(dx, ndx, kRel, kAbs, "dx"));
  LOOM_VERIFY_EMPTY(compare(dW, ndW, kRel, kAbs, "dW"));
  LOOM_VERIFY_EMPTY(compare(db, ndb, kRel, kAbs, "db"));
}

void GradCheckTest::maxpool2d_data() {
  QTest::addColumn<int>("size");
  QTest::addColumn<int>("kernel");
  QTest::addColumn<int>("stride");
  QTest::newRow("2x2 s2") << 6 << 2 << 2;
  QTest::newRow("3x3 s2 overlapping") << 7 << 3 << 2;
  QTest::newRow("3x3 s3 uncovered edge") << 7 << 3 << 3;
}

void GradCheckTest::maxpool2d() {
  QFETCH(int, size);
  QFETCH(int, kernel);
  QFETCH(int, stride);
  cpu::PoolGeometry g;
  g.N = 2; g.C = 2; g.H = size; g.W = size; g.kernel = kernel; g.stride = stride;
  // Distinct values 0.01 apart in random order: no ties, and a 1e-6 step never changes a max.
  Vec x(std::size_t(g.N) * g.C * g.H * g.W);
  std::iota(x.begin(), x.end(), 0.0);
  std::shuffle(x.begin(), x.end(), rng_);
  for (auto& v : x) v = 0.01 * v - 0.5;
  const std::size_t out_n = std::size_t(g.N) * g.C * g.out_h() * g.out_w();
  const Vec r = test::random_vector<double>(out_n, rng_);
  Vec y(out_n);
  std::vector<std::int32_t> argmax(out_n);
  auto objective = [&] { cpu::maxpool2d_forward(x.data(), y.data(), argmax.data(), g); return dot(y, r); };
  const Vec ndx = numeric_grad(x, objective);
  cpu::maxpool2d_forward(x.data(), y.data(), argmax.data(), g);
  Vec dx(x.size(), 99.0);
  cpu::maxpool2d_backward(argmax.data(), r.data(), dx.data(), g);
  LOOM_VERIFY_EMPTY(compare(dx, ndx, kRel, kAbs, "dx"));
}

void GradCheckTest::dropout() {
  const std::int64_t n = 64;
  const double p = 0.4;
  Vec x = test::random_vector<double>(n, rng_);
  const Vec r = test::random_vector<double>(n, rng_);
  Vec y(n), mask(n), dx(n);
  // Same seed and offset every evaluation: the mask is fixed, so y is a function of x alone.
  auto objective = [&] { cpu::dropout_forward(x.data(), y.data(), mask.data(), n, p, 42, 1000); return dot(y, r); };
  const Vec ndx = numeric_grad(x, objective);
  objective();
  const auto zeros = std::count(mask.begin(), mask.end(), 0.0);
  QVERIFY2(zeros > 0 && zeros < n, "mask should both keep and drop for the check to mean anything");
  cpu::dropout_backward(mask.data(), r.data(), dx.data(), n);
  LOOM_VERIFY_EMPTY(compare(dx, ndx, kRel, kAbs, "dx"));
}

void GradCheckTest::concat() {
  const int N = 3;
  const std::int64_t widths[] = {2, 3, 1};
  std::vector<Vec> parts;
  for (auto w : widths) parts.push_back(test::random_vector<double>(std::size_t(N * w), rng_));
  const Vec r = test::random_vector<double>(N * 6, rng_);
  Vec out(N * 6);
  auto objective = [&] {
    const double* ptrs[] = {parts[0].data(), parts[1].data(), parts[2].data()};
    cpu::concat_forward(ptrs, widths, 3, out.data(), N);
    return dot(out, r);
  };
  std::vector<Vec> dparts;
  for (auto w : widths) dparts.emplace_back(std::size_t(N * w), 99.0);
  double* dptrs[] = {dparts[0].data(), dparts[1].data(), dparts[2].data()};
  cpu::concat_backward(r.data(), widths, 3, dptrs, N);
  for (int p = 0; p < 3; ++p) {
    const Vec numeric = numeric_grad(parts[p], objective);
    const QString err = compare(dparts[p], numeric, kRel, kAbs, "dpart");
    QVERIFY2(err.isEmpty(), qPrintable(QString("part %1: %2").arg(p).arg(err)));
  }
}

void GradCheckTest::softmaxXent() {
  const int N = 4, C = 5;
  Vec logits = test::random_vector<double>(N * C, rng_, -3.0, 3.0);
  const std::vector<std::int32_t> labels = {0, 3, 4, 3};
  Vec probs(N * C), dlogits(N * C, 99.0);
  // Objective is the mean loss itself, so dlogits uses the plain-mean scale 1/N.
  auto objective = [&] { return cpu::softmax_xent_forward(logits.data(), labels.data(), probs.data(), N, C, nullptr); };
  const Vec numeric = numeric_grad(logits, objective);
  objective();
  cpu::softmax_xent_backward(probs.data(), labels.data(), dlogits.data(), N, C, 1.0 / N);
  LOOM_VERIFY_EMPTY(compare(dlogits, numeric, kRel, kAbs, "dlogits"));
}


QTEST_APPLESS_MAIN(GradCheckTest)
#include "test_kernels_gradcheck.moc"
