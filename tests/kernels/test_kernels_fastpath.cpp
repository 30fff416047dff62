// The BLAS paths (linear, conv2d, forward and backward) against the loop references in
// namespace ref, in float, over seeded random shapes that include the conv fast path
// (1x1, stride 1, no padding), strides, padding and non-square images.
// Tolerance: normwise relative error max|fast - ref| <= 1e-4 * max|ref| per output array
// (float GEMM round-off grows with the dot-product length, ~1e-6 here); in double the
// same comparison must hold to 1e-12.
#include "kernel_test_util.h"
#include "loom/kernels/cpu.h"

#include <QtTest>

using namespace loom;
using test::compare_normwise;

namespace {
constexpr int kShapes = 25;

template <class T>
double tolerance() { return sizeof(T) == sizeof(float) ? 1e-4 : 1e-12; }

// Runs both linear paths on one random shape; parameter gradients start non-zero to
// exercise accumulation, dx starts as garbage to exercise overwriting.
template <class T>
QString compare_linear(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> dim(1, 70);
  const int N = dim(rng), in = dim(rng), out = dim(rng);
  const auto x = test::random_vector<T>(std::size_t(N) * in, rng), W = test::random_vector<T>(std::size_t(out) * in, rng);
  const auto b = test::random_vector<T>(out, rng), dy = test::random_vector<T>(std::size_t(N) * out, rng);
  const auto dW0 = test::random_vector<T>(W.size(), rng), db0 = test::random_vector<T>(b.size(), rng);
  std::vector<T> y(dy.size()), y_ref(dy.size()), dx(x.size(), T(7)), dx_ref(x.size(), T(-7));
  std::vector<T> dW = dW0, dW_ref = dW0, db = db0, db_ref = db0;
  cpu::linear_forward(x.data(), W.data(), b.data(), y.data(), N, in, out);
  cpu::ref::linear_forward(x.data(), W.data(), b.data(), y_ref.data(), N, in, out);
  cpu::linear_backward(x.data(), W.data(), dy.data(), dx.data(), dW.data(), db.data(), N, in, out);
  cpu::ref::linear_backward(x.data(), W.data(), dy.data(), dx_ref.data(), dW_ref.data(), db_ref.data(), N, in, out);
  const QString shape = QString("N=%1 in=%2 out=%3: ").arg(N).arg(in).arg(out);
  for (const QString& err : {compare_normwise(y, y_ref, tolerance<T>(), "y"),
                             compare_normwise(dx, dx_ref, tolerance<T>(), "dx"),
                             compare_normwise(dW, dW_ref, tolerance<T>(), "dW"),
                             compare_normwise(db, db_ref, tolerance<T>(), "db")})
    if (!err.isEmpty()) return shape + err;
  return {};
}

cpu::ConvGeometry random_geometry(std::mt19937_64& rng, int round) {
  std::uniform_int_distribution<int> small(1, 4), image(3, 12), kernel(1, 5), stride(1, 3);
  cpu::ConvGeometry g;
  g.N = small(rng); g.C = small(rng); g.K = small(rng) * 2;
  g.H = image(rng); g.W = image(rng);
  if (round % 4 == 0) {
    g.R = 1; g.stride = 1; g.pad = 0;  // the pointwise fast path (no im2col)
  } else {
    g.R = std::min(kernel(rng), std::min(g.H, g.W));
    g.stride = stride(rng);
    g.pad = std::uniform_int_distribution<int>(0, g.R - 1)(rng);
  }
  return g;
}

template <class T>
QString compare_conv(const cpu::ConvGeometry& g, std::mt19937_64& rng) {
  const auto x = test::random_vector<T>(std::size_t(g.N) * g.C * g.H * g.W, rng);
  const auto W = test::random_vector<T>(std::size_t(g.K) * g.C * g.R * g.R, rng);
  const auto b = test::random_vector<T>(g.K, rng);
  const auto dy = test::random_vector<T>(std::size_t(g.N) * g.K * g.out_h() * g.out_w(), rng);
  const auto dW0 = test::random_vector<T>(W.size(), rng), db0 = test::random_vector<T>(b.size(), rng);
  std::vector<T> work(std::size_t(g.workspace_elems())), y(dy.size()), y_ref(dy.size());
  std::vector<T> dx(x.size(), T(7)), dx_ref(x.size(), T(-7)), dW = dW0, dW_ref = dW0, db = db0, db_ref = db0;
  cpu::conv2d_forward(x.data(), W.data(), b.data(), y.data(), g, work.data());
  cpu::ref::conv2d_forward(x.data(), W.data(), b.data(), y_ref.data(), g);
  cpu::conv2d_backward(x.data(), W.data(), dy.data(), dx.data(), dW.data(), db.data(), g, work.data());
  cpu::ref::conv2d_backward(x.data(), W.data(), dy.data(), dx_ref.data(), dW_ref.data(), db_ref.data(), g);
  const QString shape = QString("N=%1 C=%2 H=%3 W=%4 K=%5 R=%6 stride=%7 pad=%8: ")
                            .arg(g.N).arg(g.C).arg(g.H).arg(g.W).arg(g.K).arg(g.R).arg(g.stride).arg(g.pad);
  for (const QString& err : {compare_normwise(y, y_ref, tolerance<T>(), "y"),
                             compare_normwise(dx, dx_ref, tolerance<T>(), "dx"),
                             compare_normwise(dW, dW_ref, tolerance<T>(), "dW"),
                             compare_normwise(db, db_ref, tolerance<T>(), "db")})
    if (!err.isEmpty()) return shape + err;
  return {};
}
}  // namespace

class FastPathTest : public QObject {
  Q_OBJECT
 private slots:
  void linearFloat() { for (int i = 0; i < kShapes; ++i) LOOM_VERIFY_EMPTY(compare_linear<float>(rng_)); }
  void linearDouble() { for (int i = 0; i < kShapes; ++i) LOOM_VERIFY_EMPTY(compare_linear<double>(rng_)); }
  void conv2dFloat() {
    for (int i = 0; i < kShapes; ++i) LOOM_VERIFY_EMPTY(compare_conv<float>(random_geometry(rng_, i), rng_));
  }
  void conv2dDouble() {
    for (int i = 0; i < kShapes; ++i) LOOM_VERIFY_EMPTY(compare_conv<double>(random_geometry(rng_, i), rng_));
  }
  void linearWithoutBiasOrDx();
  void conv2dWithoutBiasOrDx();
  void conv2dPartialBlocks();
  void gemmTransposes();

 private:
  std::mt19937_64 rng_{7};
};

// Optional pointers: b == nullptr means no bias; dx == nullptr skips the input gradient.
void FastPathTest::linearWithoutBiasOrDx() {
  const int N = 5, in = 7, out = 3;
  const auto x = test::random_vector<float>(N * in, rng_), W = test::random_vector<float>(out * in, rng_);
  const auto dy = test::random_vector<float>(N * out, rng_);
  std::vector<float> y(N * out), y_ref(N * out), dW(W.size(), 0.f), dW_ref(W.size(), 0.f);
  cpu::linear_forward<float>(x.data(), W.data(), nullptr, y.data(), N, in, out);
  cpu::ref::linear_forward<float>(x.data(), W.data(), nullptr, y_ref.data(), N, in, out);
  LOOM_VERIFY_EMPTY(compare_normwise(y, y_ref, 1e-4, "y"));
  cpu::linear_backward<float>(x.data(), W.data(), dy.data(), nullptr, dW.data(), nullptr, N, in, out);
  cpu::ref::linear_backward<float>(x.data(), W.data(), dy.data(), nullptr, dW_ref.data(), nullptr, N, in, out);
  LOOM_VERIFY_EMPTY(compare_normwise(dW, dW_ref, 1e-4, "dW"));
}

void FastPathTest::conv2dWithoutBiasOrDx() {
  cpu::ConvGeometry g;
  g.N = 2; g.C = 3; g.H = 8; g.W = 8; g.K = 4; g.R = 3; g.stride = 1; g.pad = 1;
  const auto x = test::random_vector<float>(std::size_t(g.N) * g.C * g.H * g.W, rng_);
  const auto W = test::random_vector<float>(std::size_t(g.K) * g.C * g.R * g.R, rng_);
  const auto dy = test::random_vector<float>(std::size_t(g.N) * g.K * g.out_h() * g.out_w(), rng_);
  std::vector<float> work(std::size_t(g.workspace_elems())), y(dy.size()), y_ref(dy.size());
  std::vector<float> dW(W.size(), 0.f), dW_ref(W.size(), 0.f);
  cpu::conv2d_forward<float>(x.data(), W.data(), nullptr, y.data(), g, work.data());
  cpu::ref::conv2d_forward<float>(x.data(), W.data(), nullptr, y_ref.data(), g);
  LOOM_VERIFY_EMPTY(compare_normwise(y, y_ref, 1e-4, "y"));
  cpu::conv2d_backward<float>(x.data(), W.data(), dy.data(), nullptr, dW.data(), nullptr, g, work.data());
  cpu::ref::conv2d_backward<float>(x.data(), W.data(), dy.data(), nullptr, dW_ref.data(), nullptr, g);
  LOOM_VERIFY_EMPTY(compare_normwise(dW, dW_ref, 1e-4, "dW"));
}

// The fast path im2cols block_samples() samples at a time; a batch of several blocks with
// a short last one must still match the reference (3x3 padded, strided, and 1x1).
void FastPathTest::conv2dPartialBlocks() {
  auto geo = [](int N, int C, int HW, int K, int R, int stride, int pad) {
    cpu::ConvGeometry g;
    g.N = N; g.C = C; g.H = HW; g.W = HW; g.K = K; g.R = R; g.stride = stride; g.pad = pad;
    g.N = g.block_samples() + 2;  // block_samples() < N here, and N is not a multiple of it
    return g;
  };
  for (const cpu::ConvGeometry& g : {geo(1000, 4, 16, 8, 3, 1, 1), geo(1000, 3, 19, 5, 3, 2, 1),
                                     geo(1000, 8, 32, 8, 1, 1, 0)}) {
    QVERIFY(g.block_samples() > 2 && g.N % g.block_samples() != 0);
    LOOM_VERIFY_EMPTY(compare_conv<float>(g, rng_));
    LOOM_VERIFY_EMPTY(compare_conv<double>(g, rng_));
  }
}

// gemm's four transpose combinations against a triple loop, with alpha and beta != 0/1.
void FastPathTest::gemmTransposes() {
  const int M = 5, N = 4, K = 6;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const auto A = test::random_vector<double>(M * K, rng_), B = test::random_vector<double>(K * N, rng_);
      auto C = test::random_vector<double>(M * N, rng_);
      std::vector<double> want(C.size());
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          double s = 0;
          for (int k = 0; k < K; ++k) s += (ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
          want[i * N + j] = 0.5 * s + 2.0 * C[i * N + j];
        }
      cpu::gemm<double>(ta, tb, M, N, K, 0.5, A.data(), B.data(), 2.0, C.data());
      LOOM_VERIFY_EMPTY(test::compare(C, want, 1e-12, 1e-12, ta ? (tb ? "AtBt" : "AtB") : (tb ? "ABt" : "AB")));
    }
}

QTEST_APPLESS_MAIN(FastPathTest)
#include "test_kernels_fastpath.moc"
