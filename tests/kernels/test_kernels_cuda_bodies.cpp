// The CUDA kernels' bodies (kernels/cuda element_kernels.h) run on the CPU through
// host_launch, against the CPU reference kernels: every index and every operation of each
// kernel is checked in every build, with or without CUDA. On the host the bodies do the
// CPU kernels' float operations in the same order, so most results must be bit-identical
// (tolerance 0); the column sums of the bias gradient and the loss sum use a relative
// 1e-6. And the cuBLAS call description (gemm_descriptor.h) fed to CBLAS in column-major
// order must give the reference row-major product for every transpose combination and
// non-square shapes, so a swapped operand or leading dimension fails here.
#include <QtTest>

#include <cblas.h>

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
    // Bias gradient: accumulated, like the CPU's db.
    std::vector<float> db(out, 0.5f), dx(N * in), dW(out * in, 0.0f), want_db(out, 0.5f);
    lc::host_launch(out, lc::BiasGrad{dy.data(), db.data(), N, out});
    loom::cpu::ref::linear_backward(x.data(), W.data(), dy.data(), dx.data(), dW.data(), want_db.data(), N, in, out);
    LOOM_VERIFY_EMPTY(compare(db, want_db, 1e-6, 1e-7, "bias gradient"));
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
