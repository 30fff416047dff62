// The CUDA kernels' bodies (kernels/cuda element_kernels.h) run on the CPU through
// host_launch, against the CPU reference kernels: every index and every operation of each
// kernel is checked in every build, with or without CUDA. On the host the element-wise
// bodies do the CPU kernels' float operations in the same order, so their results must be
// bit-identical (tolerance 0); the loss sum uses a relative 1e-6. The bias gradients are
// two-pass sums in another order than the CPU's loops: both are measured against a float64
// sum and bounded by the a-priori bound of their own order of summation. And the cuBLAS
// call description (gemm_descriptor.h) fed to CBLAS in column-major order must give the
// reference row-major product for every transpose combination and non-square shapes, so a
// swapped operand or leading dimension fails here.
#include <QtTest>

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "loom/cuda/element_kernels.h"
#include "loom/cuda/gemm_descriptor.h"
#include "loom/kernels/cpu.h"

using loom::test::compare;
using loom::test::random_vector;
namespace lc = loom::cuda;

class TestCudaBodies : public QObject {
  Q_OBJECT

 private slots:
  void activationsMatchTheCpu() {
    std::mt19937_64 rng(1);
    const std::int64_t n = 3001;  // not a multiple of any block size
    const auto x = random_vector<float>(n, rng), dy = random_vector<float>(n, rng);
    std::vector<float> y(n), want_y(n), dx(n), want_dx(n);
    lc::host_launch(n, lc::ReluForward{x.data(), y.data()});
    loom::cpu::relu_forward(x.data(), want_y.data(), n);
    LOOM_VERIFY_EMPTY(compare(y, want_y, 0, 0, "relu forward"));
    lc::host_launch(n, lc::ReluBackward{x.data(), dy.data(), dx.data()});
    loom::cpu::relu_backward(x.data(), dy.data(), want_dx.data(), n);
    LOOM_VERIFY_EMPTY(compare(dx, want_dx, 0, 0, "relu backward"));
  }

  void linearBiasMatchesTheCpuLinear() {
    std::mt19937_64 rng(2);
    const int N = 7, in = 5, out = 3;
    const auto x = random_vector<float>(N * in, rng), W = random_vector<float>(out * in, rng);
    const auto b = random_vector<float>(out, rng), dy = random_vector<float>(N * out, rng);
    // Forward: the GEMM without bias, then BiasAdd, equals linear_forward.
    std::vector<float> zero(out, 0.0f), y(N * out), want_y(N * out);
    loom::cpu::ref::linear_forward(x.data(), W.data(), zero.data(), y.data(), N, in, out);
    lc::host_launch(N * out, lc::BiasAdd{y.data(), b.data(), out});
    loom::cpu::ref::linear_forward(x.data(), W.data(), b.data(), want_y.data(), N, in, out);
    LOOM_VERIFY_EMPTY(compare(y, want_y, 1e-6, 1e-7, "linear forward + bias"));
  }

  // The bias gradients as BodyBackend composes them (pass 1 into partials, pass 2 onto db,
  // the chunking of launch_geometry.h), accumulated onto a non-zero db, at the CNN's and
  // MLP's shapes and at small ones. Each output's error against the float64 sum must stay
  // within the first-order bound of its order of summation, (additions on the longest
  // path) * 2^-24 * (|db0| + sum |dy|): chunk length + chunks for the two passes, the row
  // count (+ plane) for the CPU's serial loops. A wrong index or a dropped chunk is an
  // error of the order of the values, far above it. And the two-pass error may not exceed
  // twice the CPU's, or one u * sum|x| (a rounding of the result), whichever is larger.
  // Measured (max over outputs, in u * sum|x|, two-pass vs CPU; qInfo): conv1 at batch 64
  // 0.05 vs 0.09, conv2 0.11 vs 0.14, fc1 at batch 64 0.65 vs 1.56, at batch 4096 0.19 vs
  // 1.75; the small sums (7 x 3, classifier, 3 x 4 x 5x7) 0.45-0.66 vs 0.20-0.48, both
  // within a rounding of the result.
  void biasGradientsWithinTheirRoundoffBounds_data() {
    QTest::addColumn<int>("N");
    QTest::addColumn<int>("outputs");
    QTest::addColumn<int>("plane");  // 0: a linear layer's db, else a convolution's
    QTest::newRow("linear 7 x 3") << 7 << 3 << 0;
    QTest::newRow("fc1 at batch 64") << 64 << 128 << 0;
    QTest::newRow("classifier at batch 64") << 64 << 10 << 0;
    QTest::newRow("fc1 at batch 4096") << 4096 << 128 << 0;
    QTest::newRow("conv 3 x 4 x 5x7") << 3 << 4 << 35;
    QTest::newRow("CNN conv1 at batch 64") << 64 << 16 << 28 * 28;
    QTest::newRow("CNN conv2 at batch 64") << 64 << 32 << 14 * 14;
  }
  void biasGradientsWithinTheirRoundoffBounds() {
    QFETCH(int, N);
    QFETCH(int, outputs);
    QFETCH(int, plane);
    std::mt19937_64 rng(std::uint64_t(N) * 1000 + outputs);
    const std::int64_t per = plane > 0 ? plane : 1, length = std::int64_t(N) * per;
    const auto dy = random_vector<float>(std::size_t(length * outputs), rng);
    const auto db0 = random_vector<float>(std::size_t(outputs), rng);
    // The float64 sum and the magnitude sum of each output.
    std::vector<double> exact(db0.begin(), db0.end()), magnitude(outputs);
    for (int o = 0; o < outputs; ++o) magnitude[std::size_t(o)] = std::abs(double(db0[std::size_t(o)]));
    for (std::int64_t v = 0; v < length * outputs; ++v) {
      const std::int64_t o = plane > 0 ? v / plane % outputs : v % outputs;
      exact[std::size_t(o)] += double(dy[std::size_t(v)]);
      magnitude[std::size_t(o)] += std::abs(double(dy[std::size_t(v)]));
    }
    // Pass 1 as BodyBackend runs it, then one pass over all the partials (BodyBackend
    // groups them first where an output has over kMaxChunk; the bound holds either way).
    const lc::Chunking c = lc::reduction_chunks(outputs, length);
    std::vector<float> partials(std::size_t(c.chunks * outputs)), body = db0, cpu = db0;
    if (plane > 0) {
      lc::host_launch(c.chunks * outputs, lc::ChannelBiasGradPartial{dy.data(), partials.data(), N, plane, outputs, c.chunks});
      lc::host_launch(outputs, lc::SumPartials{partials.data(), body.data(), outputs, c.chunks, c.chunks, 1, c.chunks, 1, true});
      loom::cpu::ConvGeometry g;
      g.N = N, g.K = outputs, g.C = 1, g.R = 1, g.H = plane, g.W = 1;  // only db is asked for: dy's shape
      loom::cpu::conv2d_backward<float>(nullptr, nullptr, dy.data(), nullptr, nullptr, cpu.data(), g, nullptr);
    } else {
      lc::host_launch(c.chunks * outputs, lc::BiasGradPartial{dy.data(), partials.data(), N, outputs, c.length});
      lc::host_launch(outputs, lc::SumPartials{partials.data(), body.data(), outputs, c.chunks, 1, outputs, c.chunks, 1, true});
      loom::cpu::linear_backward<float>(nullptr, nullptr, dy.data(), nullptr, nullptr, cpu.data(), N, 1, outputs);
    }
    const double u = std::ldexp(1.0, -24);
    const double body_path = double(c.length + c.chunks), cpu_path = double(N + (plane > 0 ? plane : 0));
    double body_worst = 0, cpu_worst = 0;  // in units of u * magnitude
    for (int o = 0; o < outputs; ++o) {
      const auto at = std::size_t(o);
      const double scale = u * magnitude[at];
      const double body_err = std::abs(double(body[at]) - exact[at]), cpu_err = std::abs(double(cpu[at]) - exact[at]);
      QVERIFY2(body_err <= body_path * scale, qPrintable(QString("output %1: two-pass error %2 > bound %3")
                                                            .arg(o).arg(body_err).arg(body_path * scale)));
      QVERIFY2(cpu_err <= cpu_path * scale, qPrintable(QString("output %1: cpu error %2 > bound %3")
                                                          .arg(o).arg(cpu_err).arg(cpu_path * scale)));
      body_worst = std::max(body_worst, body_err / scale);
      cpu_worst = std::max(cpu_worst, cpu_err / scale);
    }
    QVERIFY2(body_worst <= std::max(2 * cpu_worst, 1.0),
             qPrintable(QString("two-pass error %1 u*sum|x| vs the cpu's %2").arg(body_worst).arg(cpu_worst)));
    qInfo("%lld chunks of %lld: two-pass max error %.2f u*sum|x| (bound %.0f), cpu %.2f (bound %.0f)",
          static_cast<long long>(c.chunks), static_cast<long long>(c.length), body_worst, body_path, cpu_worst,
          cpu_path);
  }

  // im2col, the per-sample GEMM and the channel bias compose to cpu::conv2d_forward, with
  // padding and a stride that leave border columns out.
  void convolutionMatchesTheCpu() {
    std::mt19937_64 rng(8);
    for (const auto& [stride, pad] : {std::pair{1, 1}, std::pair{2, 0}}) {
      loom::cpu::ConvGeometry g;
      g.N = 3, g.C = 2, g.H = 9, g.W = 7, g.K = 4, g.R = 3, g.stride = stride, g.pad = pad;
      const lc::ConvShape s{g.C, g.H, g.W, g.K, g.R, g.stride, g.pad};
      const int OH = g.out_h(), OW = g.out_w(), CRR = g.C * g.R * g.R;
      const auto x = random_vector<float>(std::size_t(g.N) * g.C * g.H * g.W, rng);
      const auto W = random_vector<float>(std::size_t(g.K) * CRR, rng), b = random_vector<float>(g.K, rng);
      std::vector<float> y(std::size_t(g.N) * g.K * OH * OW), want(y.size()), col(std::size_t(CRR) * OH * OW);
      for (int n = 0; n < g.N; ++n) {
        lc::host_launch(std::int64_t(col.size()), lc::Im2Col{x.data() + std::int64_t(n) * g.C * g.H * g.W, col.data(), s});
        loom::cpu::gemm(false, false, g.K, OH * OW, CRR, 1.0f, W.data(), col.data(), 0.0f,
                        y.data() + std::int64_t(n) * g.K * OH * OW);
      }
      lc::host_launch(std::int64_t(y.size()), lc::ChannelBias{y.data(), b.data(), std::int64_t(OH) * OW, g.K});
      loom::cpu::ref::conv2d_forward(x.data(), W.data(), b.data(), want.data(), g);
      LOOM_VERIFY_EMPTY(compare(y, want, 1e-5, 1e-6, qPrintable(QString("conv stride %1 pad %2").arg(stride).arg(pad))));
    }
  }

  // The input gradient: W^T x dy per sample, then Col2Im, equals conv2d_backward's dx.
  void convolutionInputGradientMatchesTheCpu() {
    std::mt19937_64 rng(10);
    for (const auto& [stride, pad] : {std::pair{1, 1}, std::pair{2, 0}, std::pair{2, 2}}) {
      loom::cpu::ConvGeometry g;
      g.N = 2, g.C = 3, g.H = 8, g.W = 7, g.K = 4, g.R = 3, g.stride = stride, g.pad = pad;
      const lc::ConvShape s{g.C, g.H, g.W, g.K, g.R, g.stride, g.pad};
      const int OH = g.out_h(), OW = g.out_w(), CRR = g.C * g.R * g.R;
      const auto x = random_vector<float>(std::size_t(g.N) * g.C * g.H * g.W, rng);
      const auto W = random_vector<float>(std::size_t(g.K) * CRR, rng);
      const auto dy = random_vector<float>(std::size_t(g.N) * g.K * OH * OW, rng);
      std::vector<float> dx(x.size()), want(x.size()), col(std::size_t(CRR) * OH * OW);
      for (int n = 0; n < g.N; ++n) {
        loom::cpu::gemm(true, false, CRR, OH * OW, g.K, 1.0f, W.data(), dy.data() + std::int64_t(n) * g.K * OH * OW, 0.0f,
                        col.data());
        lc::host_launch(std::int64_t(g.C) * g.H * g.W, lc::Col2Im{col.data(), dx.data() + std::int64_t(n) * g.C * g.H * g.W, s});
      }
      std::vector<float> dW(W.size(), 0.0f), db(g.K, 0.0f);
      loom::cpu::ref::conv2d_backward(x.data(), W.data(), dy.data(), want.data(), dW.data(), db.data(), g);
      LOOM_VERIFY_EMPTY(compare(dx, want, 1e-5, 1e-6, qPrintable(QString("col2im stride %1 pad %2").arg(stride).arg(pad))));
    }
  }

  void maxPoolMatchesTheCpu() {
    std::mt19937_64 rng(9);
    loom::cpu::PoolGeometry g;
    g.N = 2, g.C = 3, g.H = 8, g.W = 6, g.kernel = 2, g.stride = 2;
    auto x = random_vector<float>(std::size_t(g.N) * g.C * g.H * g.W, rng);
    x[1] = x[0];  // a tie in the first window: the first of equal maxima wins
    const std::size_t out = std::size_t(g.N) * g.C * g.out_h() * g.out_w();
    std::vector<float> y(out), want_y(out);
    std::vector<std::int32_t> arg(out), want_arg(out);
    lc::host_launch(std::int64_t(out), lc::MaxPoolForward{x.data(), y.data(), arg.data(), g.H, g.W, g.kernel, g.stride});
    loom::cpu::maxpool2d_forward(x.data(), want_y.data(), want_arg.data(), g);
    LOOM_VERIFY_EMPTY(compare(y, want_y, 0, 0, "max pool"));
    QVERIFY(arg == want_arg);
    // Backward, with overlapping windows (stride 1) so one input may collect several.
    g.stride = 1;
    const std::size_t out1 = std::size_t(g.N) * g.C * g.out_h() * g.out_w();
    std::vector<float> y1(out1), dy = random_vector<float>(out1, rng), dx(x.size()), want_dx(x.size());
    std::vector<std::int32_t> arg1(out1);
    loom::cpu::maxpool2d_forward(x.data(), y1.data(), arg1.data(), g);
    lc::host_launch(std::int64_t(x.size()), lc::MaxPoolBackward{arg1.data(), dy.data(), dx.data(), g.H, g.W, g.kernel, g.stride});
    loom::cpu::maxpool2d_backward(arg1.data(), dy.data(), want_dx.data(), g);
    LOOM_VERIFY_EMPTY(compare(dx, want_dx, 1e-6, 1e-7, "max pool backward"));
  }

  void dropoutDrawsTheCpuMask() {
    std::mt19937_64 rng(3);
    const std::int64_t n = 4096;
    const auto x = random_vector<float>(n, rng);
    for (double p : {0.0, 0.3, 1.0}) {
      std::vector<float> y(n), mask(n), want_y(n), want_mask(n);
      const float keep_scale = p >= 1.0 ? 0.0f : float(1.0 / (1.0 - p));
      lc::host_launch(n, lc::DropoutForward{x.data(), y.data(), mask.data(), p, keep_scale, 99, 12345});
      loom::cpu::dropout_forward(x.data(), want_y.data(), want_mask.data(), n, p, 99, 12345);
      LOOM_VERIFY_EMPTY(compare(mask, want_mask, 0, 0, "dropout mask"));
      LOOM_VERIFY_EMPTY(compare(y, want_y, 0, 0, "dropout output"));
    }
  }

  void softmaxCrossEntropyMatchesTheCpu() {
    std::mt19937_64 rng(4);
    const int N = 33, C = 10;
    const auto logits = random_vector<float>(N * C, rng, -8, 8);
    std::vector<std::int32_t> labels(N);
    for (int n = 0; n < N; ++n) labels[std::size_t(n)] = std::int32_t(rng() % C);
    std::vector<float> probs(N * C), row_loss(N), want_probs(N * C);
    std::vector<std::int32_t> row_correct(N);
    lc::host_launch(N, lc::SoftmaxXentRow{logits.data(), labels.data(), probs.data(), row_loss.data(),
                                          row_correct.data(), C});
    int want_correct = 0;
    const float want_loss = loom::cpu::softmax_xent_forward(logits.data(), labels.data(), want_probs.data(), N, C,
                                                            &want_correct);
    LOOM_VERIFY_EMPTY(compare(probs, want_probs, 0, 0, "softmax"));
    float loss = 0.0f;
    int correct = 0;
    for (int n = 0; n < N; ++n) loss += row_loss[std::size_t(n)], correct += row_correct[std::size_t(n)];
    QCOMPARE(correct, want_correct);
    QVERIFY2(std::abs(loss / float(N) - want_loss) <= 1e-6f * std::abs(want_loss), qPrintable(QString::number(loss / N)));
    std::vector<float> d(N * C), want_d(N * C);
    lc::host_launch(N * C, lc::SoftmaxXentBackward{probs.data(), labels.data(), d.data(), C, 1.0f / 64});
    loom::cpu::softmax_xent_backward(want_probs.data(), labels.data(), want_d.data(), N, C, 1.0f / 64);
    LOOM_VERIFY_EMPTY(compare(d, want_d, 0, 0, "softmax backward"));
  }

  void optimizersMatchTheCpu() {
    std::mt19937_64 rng(5);
    const std::int64_t n = 1000;
    const auto w0 = random_vector<float>(n, rng), g = random_vector<float>(n, rng);
    {
      auto w = w0, want = w0;
      lc::host_launch(n, lc::SgdStep{w.data(), g.data(), 0.1f, 0.01f});
      loom::cpu::sgd_step(want.data(), g.data(), n, 0.1f, 0.01f);
      LOOM_VERIFY_EMPTY(compare(w, want, 0, 0, "sgd"));
    }
    {
      auto w = w0, want = w0;
      std::vector<float> v(n, 0.0f), want_v(n, 0.0f);
      for (int step = 0; step < 3; ++step) {
        lc::host_launch(n, lc::MomentumStep{w.data(), g.data(), v.data(), 0.05f, 0.9f, 0.001f});
        loom::cpu::momentum_step(want.data(), g.data(), want_v.data(), n, 0.05f, 0.9f, 0.001f);
      }
      LOOM_VERIFY_EMPTY(compare(w, want, 0, 0, "momentum"));
    }
    {
      auto w = w0, want = w0;
      std::vector<float> m(n, 0.0f), v(n, 0.0f), want_m(n, 0.0f), want_v(n, 0.0f);
      for (std::int64_t t = 1; t <= 3; ++t) {
        lc::AdamStep step{w.data(), g.data(), m.data(), v.data(), 0.9f, 0.999f, 1e-8f, 0.0f, 0, 0};
        lc::host_launch(n, lc::adam_constants(step, 0.001f, t));
        loom::cpu::adam_step(want.data(), g.data(), want_m.data(), want_v.data(), n, 0.001f, 0.9f, 0.999f, 1e-8f, 0.0f, t);
      }
      LOOM_VERIFY_EMPTY(compare(w, want, 0, 0, "adam"));
    }
  }

  void gemmCallThroughCblasGivesTheRowMajorProduct() {
    std::mt19937_64 rng(6);
    const int M = 5, N = 7, K = 3;  // all different: a swapped m, n or k fails
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const auto A = random_vector<float>(M * K, rng), B = random_vector<float>(K * N, rng);
        std::vector<float> want(M * N, 0.0f), got(M * N, 0.0f);
        loom::cpu::gemm(ta, tb, M, N, K, 1.0f, A.data(), B.data(), 0.0f, want.data());  // row-major reference
        const lc::GemmCall c = lc::gemm_call(ta, tb, M, N, K);
        // What gemm.cu passes to cublasSgemm, handed to column-major CBLAS instead.
        cblas_sgemm(CblasColMajor, c.trans_first ? CblasTrans : CblasNoTrans, c.trans_second ? CblasTrans : CblasNoTrans,
                    c.m, c.n, c.k, 1.0f, B.data(), c.ld_first, A.data(), c.ld_second, 0.0f, got.data(), c.ldc);
        LOOM_VERIFY_EMPTY(compare(got, want, 1e-5, 1e-6, qPrintable(QString("gemm ta=%1 tb=%2").arg(ta).arg(tb))));
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestCudaBodies)
#include "test_kernels_cuda_bodies.moc"
