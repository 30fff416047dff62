// The CUDA backend against the CPU backend (kernels/cpu), operation by operation. Built
// twice (device_under_test.h): test_kernel_backends runs the CUDA backend's code on the
// host (BodyBackend with HostExec: kernel bodies on the CPU, GEMMs through the cuBLAS
// descriptors into column-major CBLAS, memory in a checked arena); test_kernel_backends_cuda
// runs it on GPU 0 (skipped without one). Same inputs, uploaded into each backend's
// memory; results downloaded and compared. On the host, element-wise work must match
// exactly or to float rounding (rel 1e-6); on a GPU (fused multiply-add, its own exp, erf
// and tanh) to 1e-5 relative. GEMM-based results normwise to 1e-5 (the batch GEMM sums in
// another order), 1e-3 with TF32 tensor cores. Bias gradients are sums in different orders
// (the CPU's serial loops, the CUDA backend's two passes): both are held to a float64 sum
// within the first-order bound of the CPU's order, (additions) * 2^-24 * sum |terms|, which
// the two-pass order (about 2 sqrt(length) additions) never exceeds. The arena also refuses
// host pointers, the mistake a GPU would answer with an illegal address.
#include <QtTest>

#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <random>
#include <vector>

#include "device_under_test.h"
#include "kernel_test_util.h"
#include "loom/cuda/host_body_backend.h"
#include "loom/cuda/stamp_clock.h"
#include "loom/kernels/cpu_backend.h"

using loom::kernels::Backend;
using loom::test::compare;
using loom::test::compare_normwise;
using loom::test::compare_sum;
using loom::test::random_vector;
namespace lk = loom::kernels;

namespace {

// One backend with the buffers a test put into it, released at the end.
class On {
 public:
  explicit On(Backend& backend) : be(backend) {}
  ~On() {
    for (void* p : owned_) be.release(p);
  }
  template <class T>
  T* put(const std::vector<T>& host) {
    auto* p = static_cast<T*>(be.allocate(std::int64_t(host.size() * sizeof(T))));
    owned_.push_back(p);
    be.upload(p, host.data(), std::int64_t(host.size() * sizeof(T)));
    return p;
  }
  template <class T>
  T* zeros(std::size_t n) {
    return put(std::vector<T>(n, T(0)));
  }
  template <class T>
  std::vector<T> get(const T* p, std::size_t n) {
    std::vector<T> host(n);
    be.download(host.data(), p, std::int64_t(n * sizeof(T)));
    return host;
  }
  Backend& be;

 private:
  std::vector<void*> owned_;
};

// db0[o] + the sum of dy over rows (and the `plane` pixels of channel o when plane > 0) in
// float64, and the sum of the magnitudes: what a bias gradient is held to.
struct ExactSum {
  std::vector<double> sum, magnitude;
};
ExactSum exact_bias_grad(const std::vector<float>& db0, const std::vector<float>& dy, std::int64_t plane) {
  ExactSum e{std::vector<double>(db0.begin(), db0.end()), std::vector<double>(db0.size())};
  const std::int64_t outputs = std::int64_t(db0.size());
  for (std::size_t o = 0; o < db0.size(); ++o) e.magnitude[o] = std::abs(double(db0[o]));
  for (std::size_t v = 0; v < dy.size(); ++v) {
    const auto o = std::size_t(plane > 0 ? std::int64_t(v) / plane % outputs : std::int64_t(v) % outputs);
    e.sum[o] += double(dy[v]);
    e.magnitude[o] += std::abs(double(dy[v]));
  }
  return e;
}

}  // namespace

class TestKernelBackends : public QObject {
  Q_OBJECT

 private:
  std::unique_ptr<Backend> cpu_ = loom::cpu::make_cpu_backend();
  std::unique_ptr<Backend> body_;
  bool on_host_ = true;
  double exact_ = 0, elementwise_ = 1e-6;  // tolerances of element-wise results (see the top)

 private slots:
  void initTestCase() {
    std::string skip;
    body_ = loom::test::make_device_under_test(false, skip);
    if (!body_) QSKIP(skip.c_str());
    on_host_ = std::string(body_->name()) == "cuda-bodies-on-host";
    if (!on_host_) exact_ = elementwise_ = 1e-5;
    qInfo("backend under test: %s", body_->name());
  }

  // Every test leaves the shared "device" backend without an error (no stray pointer).
  void cleanup() {
    if (!body_) return;
    QVERIFY2(body_->status().ok(), body_->status().ok() ? "" : body_->status().error().describe().c_str());
  }

  void linearMatches() {
    std::mt19937_64 rng(1);
    const int N = 7, in = 13, out = 5;
    const auto x = random_vector<float>(N * in, rng), W = random_vector<float>(out * in, rng);
    const auto b = random_vector<float>(out, rng), dy = random_vector<float>(N * out, rng);
    const auto dW0 = random_vector<float>(out * in, rng), db0 = random_vector<float>(out, rng);
    std::vector<float> got[2][4];
    Backend* backends[2] = {cpu_.get(), body_.get()};
    for (int k = 0; k < 2; ++k) {
      On on(*backends[k]);
      float *px = on.put(x), *pW = on.put(W), *pb = on.put(b), *pdy = on.put(dy);
      float *py = on.zeros<float>(N * out), *pdx = on.zeros<float>(N * in), *pdW = on.put(dW0), *pdb = on.put(db0);
      on.be.linear_forward(px, pW, pb, py, N, in, out);
      on.be.linear_backward(px, pW, pdy, pdx, pdW, pdb, N, in, out);
      got[k][0] = on.get(py, N * out), got[k][1] = on.get(pdx, N * in);
      got[k][2] = on.get(pdW, out * in), got[k][3] = on.get(pdb, out);
    }
    LOOM_VERIFY_EMPTY(compare_normwise(got[1][0], got[0][0], 1e-5, "linear y"));
    LOOM_VERIFY_EMPTY(compare_normwise(got[1][1], got[0][1], 1e-5, "linear dx"));
    LOOM_VERIFY_EMPTY(compare_normwise(got[1][2], got[0][2], 1e-5, "linear dW (accumulated)"));
    const ExactSum db = exact_bias_grad(db0, dy, 0);
    LOOM_VERIFY_EMPTY(compare_sum(got[0][3], db.sum, db.magnitude, N, "linear db (accumulated), cpu"));
    LOOM_VERIFY_EMPTY(compare_sum(got[1][3], db.sum, db.magnitude, N, "linear db (accumulated), under test"));
  }

  // cuBLAS with TF32 tensor cores: 10-bit mantissas in the products, so 1e-3.
  void tf32LinearIsWithin1e3() {
    std::string skip;
    auto tf32 = loom::test::make_device_under_test(true, skip);
    if (!tf32) QSKIP(skip.c_str());
    std::mt19937_64 rng(11);
    const int N = 64, in = 784, out = 256;
    const auto x = random_vector<float>(N * in, rng), W = random_vector<float>(out * in, rng);
    std::vector<float> got[2];
    Backend* backends[2] = {cpu_.get(), tf32.get()};
    for (int k = 0; k < 2; ++k) {
      On on(*backends[k]);
      float *py = on.zeros<float>(N * out);
      on.be.linear_forward(on.put(x), on.put(W), nullptr, py, N, in, out);
      got[k] = on.get(py, N * out);
    }
    LOOM_VERIFY_EMPTY(compare_normwise(got[1], got[0], 1e-3, "linear y, TF32"));
    QVERIFY(tf32->status().ok());
  }

  void activationsAndDropoutMatch() {
    std::mt19937_64 rng(2);
    const std::int64_t n = 1001;
    const auto x = random_vector<float>(n, rng, -3, 3), dy = random_vector<float>(n, rng);
    for (auto a : {lk::Activation::Relu, lk::Activation::Tanh, lk::Activation::Gelu}) {
      std::vector<float> y[2], dx[2];
      for (Backend* be : {cpu_.get(), body_.get()}) {
        On on(*be);
        const int k = be == cpu_.get() ? 0 : 1;
        float *px = on.put(x), *pdy = on.put(dy), *py = on.zeros<float>(n), *pdx = on.zeros<float>(n);
        on.be.activation_forward(a, px, py, n);
        on.be.activation_backward(a, px, py, pdy, pdx, n);
        y[k] = on.get(py, n), dx[k] = on.get(pdx, n);
      }
      const QByteArray what = QByteArray("activation ") + QByteArray::number(int(a));
      LOOM_VERIFY_EMPTY(compare(y[1], y[0], elementwise_, 1e-7, what + " forward"));
      LOOM_VERIFY_EMPTY(compare(dx[1], dx[0], elementwise_, 1e-7, what + " backward"));
    }
    std::vector<float> y[2], mask[2], dx[2];
    for (int k = 0; k < 2; ++k) {
      On on(k == 0 ? *cpu_ : *body_);
      float *px = on.put(x), *pdy = on.put(dy), *py = on.zeros<float>(n), *pm = on.zeros<float>(n);
      float* pdx = on.zeros<float>(n);
      on.be.dropout_forward(px, py, pm, n, 0.3, 42, 1000);
      on.be.dropout_backward(pm, pdy, pdx, n);
      y[k] = on.get(py, n), mask[k] = on.get(pm, n), dx[k] = on.get(pdx, n);
    }
    LOOM_VERIFY_EMPTY(compare(mask[1], mask[0], 0, 0, "dropout mask (same generator)"));
    LOOM_VERIFY_EMPTY(compare(y[1], y[0], exact_, 0, "dropout forward"));
    LOOM_VERIFY_EMPTY(compare(dx[1], dx[0], exact_, 0, "dropout backward"));
    // Keyed: the offset read from device memory, first sample 40 x 25 per sample = 1000,
    // the same masks on either backend as the offset given.
    for (int k = 0; k < 2; ++k) {
      On on(k == 0 ? *cpu_ : *body_);
      float *px = on.put(x), *py = on.zeros<float>(n), *pm = on.zeros<float>(n);
      const std::uint64_t* first = on.put(std::vector<std::uint64_t>{40});
      on.be.dropout_forward_keyed(px, py, pm, n, 0.3, 42, first, 25);
      LOOM_VERIFY_EMPTY(compare(on.get(pm, n), mask[0], 0, 0, "keyed dropout mask"));
      LOOM_VERIFY_EMPTY(compare(on.get(py, n), y[0], exact_, 0, "keyed dropout forward"));
    }
  }

  void convolutionMatches_data() {
    QTest::addColumn<int>("stride");
    QTest::addColumn<int>("pad");
    QTest::newRow("stride 1, pad 0") << 1 << 0;
    QTest::newRow("stride 2, pad 1") << 2 << 1;
  }
  void convolutionMatches() {
    QFETCH(int, stride);
    QFETCH(int, pad);
    lk::ConvDims d;
    d.N = 3, d.C = 2, d.H = 7, d.W = 6, d.K = 4, d.R = 3, d.stride = stride, d.pad = pad;
    const std::size_t in = std::size_t(d.N) * d.C * d.H * d.W, out = std::size_t(d.N) * d.K * d.out_h() * d.out_w();
    const std::size_t wsize = std::size_t(d.K) * d.C * d.R * d.R;
    std::mt19937_64 rng(3);
    const auto x = random_vector<float>(in, rng), W = random_vector<float>(wsize, rng);
    const auto b = random_vector<float>(d.K, rng), dy = random_vector<float>(out, rng);
    const auto dW0 = random_vector<float>(wsize, rng), db0 = random_vector<float>(d.K, rng);
    std::vector<float> got[2][4];
    for (int k = 0; k < 2; ++k) {
      On on(k == 0 ? *cpu_ : *body_);
      float *px = on.put(x), *pW = on.put(W), *pb = on.put(b), *pdy = on.put(dy), *pdW = on.put(dW0);
      float *pdb = on.put(db0), *py = on.zeros<float>(out), *pdx = on.zeros<float>(in);
      float* ws = on.zeros<float>(std::size_t(on.be.conv2d_workspace(d)));
      on.be.conv2d_forward(px, pW, pb, py, d, ws);
      on.be.conv2d_backward(px, pW, pdy, pdx, pdW, pdb, d, ws);
      got[k][0] = on.get(py, out), got[k][1] = on.get(pdx, in), got[k][2] = on.get(pdW, wsize);
      got[k][3] = on.get(pdb, d.K);
    }
    LOOM_VERIFY_EMPTY(compare_normwise(got[1][0], got[0][0], 1e-5, "conv y"));
    LOOM_VERIFY_EMPTY(compare_normwise(got[1][1], got[0][1], 1e-5, "conv dx"));
    LOOM_VERIFY_EMPTY(compare_normwise(got[1][2], got[0][2], 1e-5, "conv dW (accumulated)"));
    const std::int64_t plane = std::int64_t(d.out_h()) * d.out_w();
    const ExactSum db = exact_bias_grad(db0, dy, plane);
    LOOM_VERIFY_EMPTY(compare_sum(got[0][3], db.sum, db.magnitude, double(d.N + plane), "conv db (accumulated), cpu"));
    LOOM_VERIFY_EMPTY(compare_sum(got[1][3], db.sum, db.magnitude, double(d.N + plane), "conv db (accumulated), under test"));
  }

  // The bias gradients alone at the example CNN's shapes (batch 64: conv1 16 x 28x28,
  // conv2 32 x 14x14, fc1 128, the classifier 10), where the two passes split each sum
  // into many chunks, and conv1 at batch 512 (401408 values per channel: a third pass over
  // 1568 partials per channel): both backends within the bound of the CPU's order of
  // summation.
  void biasGradientsAtTheCnnShapes() {
    std::mt19937_64 rng(12);
    struct Shape {
      int N, outputs, plane;  // plane 0: a linear layer
    };
    for (const Shape& s : {Shape{64, 16, 28 * 28}, Shape{64, 32, 14 * 14}, Shape{64, 128, 0}, Shape{64, 10, 0},
                           Shape{512, 16, 28 * 28}}) {
      const std::int64_t per = s.plane > 0 ? s.plane : 1;
      const auto dy = random_vector<float>(std::size_t(s.N * per * s.outputs), rng);
      const auto db0 = random_vector<float>(std::size_t(s.outputs), rng);
      std::vector<float> got[2];
      for (int k = 0; k < 2; ++k) {
        On on(k == 0 ? *cpu_ : *body_);
        float *pdy = on.put(dy), *pdb = on.put(db0);
        if (s.plane > 0) {
          lk::ConvDims d;
          d.N = s.N, d.C = 1, d.H = s.plane, d.W = 1, d.K = s.outputs, d.R = 1;  // dy [N, K, plane]
          float* ws = on.zeros<float>(std::size_t(on.be.conv2d_workspace(d)));  // unread without dx, dW
          on.be.conv2d_backward(nullptr, nullptr, pdy, nullptr, nullptr, pdb, d, ws);
        } else {
          on.be.linear_backward(nullptr, nullptr, pdy, nullptr, nullptr, pdb, s.N, 1, s.outputs);
        }
        got[k] = on.get(pdb, std::size_t(s.outputs));
      }
      const ExactSum db = exact_bias_grad(db0, dy, s.plane);
      const double additions = s.N + s.plane;
      const QByteArray what = QByteArray::number(s.outputs) + " outputs of " + QByteArray::number(s.N * per);
      LOOM_VERIFY_EMPTY(compare_sum(got[0], db.sum, db.magnitude, additions, what + ", cpu"));
      LOOM_VERIFY_EMPTY(compare_sum(got[1], db.sum, db.magnitude, additions, what + ", under test"));
    }
  }

  void poolingAndConcatMatch() {
    lk::PoolDims d;
    d.N = 2, d.C = 3, d.H = 7, d.W = 7, d.kernel = 3, d.stride = 2;  // overlapping windows
    const std::size_t in = std::size_t(d.N) * d.C * d.H * d.W, out = std::size_t(d.N) * d.C * d.out_h() * d.out_w();
    std::mt19937_64 rng(4);
    const auto x = random_vector<float>(in, rng), dy = random_vector<float>(out, rng);
    const std::vector<std::int64_t> widths = {3, 5};
    const int N = 4;
    const auto a = random_vector<float>(N * 3, rng), c = random_vector<float>(N * 5, rng);
    const auto dcat = random_vector<float>(N * 8, rng);
    std::vector<float> y[2], dx[2], cat[2], da[2];
    std::vector<std::int32_t> arg[2];
    for (int k = 0; k < 2; ++k) {
      On on(k == 0 ? *cpu_ : *body_);
      float *px = on.put(x), *pdy = on.put(dy), *py = on.zeros<float>(out), *pdx = on.zeros<float>(in);
      auto* parg = on.zeros<std::int32_t>(out);
      on.be.maxpool2d_forward(px, py, parg, d);
      on.be.maxpool2d_backward(parg, pdy, pdx, d);
      y[k] = on.get(py, out), dx[k] = on.get(pdx, in), arg[k] = on.get(parg, out);
      const float* parts[2] = {on.put(a), on.put(c)};
      float* pcat = on.zeros<float>(N * 8);
      on.be.concat_forward(parts, widths.data(), 2, pcat, N);
      float* dparts[2] = {on.zeros<float>(N * 3), nullptr};  // a branch that needs no gradient
      on.be.concat_backward(on.put(dcat), widths.data(), 2, dparts, N);
      cat[k] = on.get(pcat, N * 8), da[k] = on.get(dparts[0], N * 3);
    }
    LOOM_VERIFY_EMPTY(compare(y[1], y[0], 0, 0, "maxpool y"));
    LOOM_VERIFY_EMPTY(compare(arg[1], arg[0], 0, 0, "maxpool argmax"));
    LOOM_VERIFY_EMPTY(compare(dx[1], dx[0], elementwise_, 1e-7, "maxpool dx (overlapping windows)"));
    LOOM_VERIFY_EMPTY(compare(cat[1], cat[0], 0, 0, "concat"));
    LOOM_VERIFY_EMPTY(compare(da[1], da[0], 0, 0, "concat backward"));
  }

  void lossAndOptimizersMatch() {
    std::mt19937_64 rng(5);
    const int N = 9, C = 10;
    const auto logits = random_vector<float>(N * C, rng, -4, 4);
    std::vector<std::int32_t> labels(N);
    for (int n = 0; n < N; ++n) labels[std::size_t(n)] = std::int32_t((n * 7) % C);
    const std::int64_t n = 257;
    const auto w = random_vector<float>(n, rng), dw = random_vector<float>(n, rng);
    float loss[2];
    int hits[2];
    std::vector<float> probs[2], dlogits[2], sgd[2], mom[2], adam[2];
    for (int k = 0; k < 2; ++k) {
      On on(k == 0 ? *cpu_ : *body_);
      float *pl = on.put(logits), *pp = on.zeros<float>(N * C), *pd = on.zeros<float>(N * C);
      const std::int32_t* plab = on.put(labels);
      loss[k] = on.be.softmax_xent_forward(pl, plab, pp, N, C, &hits[k]);
      on.be.softmax_xent_backward(pp, plab, pd, N, C, 1.0f / 32);
      probs[k] = on.get(pp, N * C), dlogits[k] = on.get(pd, N * C);
      float *pw1 = on.put(w), *pw2 = on.put(w), *pw3 = on.put(w), *pg = on.put(dw);
      float *pv = on.zeros<float>(n), *pm = on.zeros<float>(n), *pv2 = on.zeros<float>(n);
      for (int t = 1; t <= 3; ++t) {
        on.be.sgd_step(pw1, pg, n, 0.1f, 1e-4f);
        on.be.momentum_step(pw2, pg, pv, n, 0.1f, 0.9f, 1e-4f);
        on.be.adam_step(pw3, pg, pm, pv2, n, lk::AdamParams{1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f, t});
      }
      sgd[k] = on.get(pw1, n), mom[k] = on.get(pw2, n), adam[k] = on.get(pw3, n);
    }
    QCOMPARE(hits[1], hits[0]);
    QVERIFY2(std::abs(loss[1] - loss[0]) <= float(elementwise_) * std::abs(loss[0]),
             qPrintable(QString("loss %1 vs %2").arg(loss[1]).arg(loss[0])));
    LOOM_VERIFY_EMPTY(compare(probs[1], probs[0], elementwise_, 1e-8, "softmax"));
    LOOM_VERIFY_EMPTY(compare(dlogits[1], dlogits[0], elementwise_, 1e-8, "dlogits"));
    LOOM_VERIFY_EMPTY(compare(sgd[1], sgd[0], elementwise_, 1e-7, "sgd"));
    LOOM_VERIFY_EMPTY(compare(mom[1], mom[0], elementwise_, 1e-7, "momentum"));
    LOOM_VERIFY_EMPTY(compare(adam[1], adam[0], elementwise_, 1e-7, "adam"));
  }

  // The arena refuses what a GPU would fault on: a host buffer handed to a kernel. The
  // error is sticky and names the operation; the CPU backend has nothing to refuse.
  void hostPointerIsRefusedByTheDevicePath() {
    if (!on_host_) QSKIP("a GPU answers a host pointer with an illegal address: checked by the host arena only");
    auto body = loom::cuda::make_host_body_backend();
    std::vector<float> host(16, 1.0f), out(16);
    {
      On on(*body);
      float* y = on.zeros<float>(16);
      on.be.activation_forward(lk::Activation::Relu, host.data(), y, 16);
    }
    QVERIFY(!body->status().ok());
    QVERIFY2(body->status().error().message.find("activation forward") != std::string::npos,
             body->status().error().message.c_str());
    cpu_->activation_forward(lk::Activation::Relu, host.data(), out.data(), 16);
    QVERIFY(cpu_->status().ok());
    QCOMPARE(out[3], 1.0f);
  }

  void memoryInUseIsCounted() {
    for (Backend* be : {cpu_.get(), body_.get()}) {
      const std::int64_t before = be->bytes_in_use();
      void* p = be->allocate(4000);
      QVERIFY(be->bytes_in_use() >= before + 4000);
      be->release(p);
      QCOMPARE(be->bytes_in_use(), before);
    }
  }

  // A stamp marks the end of the work queued so far, on the host's steady clock (the
  // trace's time base): stamps 5 ms apart on the host resolve 5 ms apart, in order,
  // between the host clock reads around them, and a resolve forgets them. Three rounds:
  // the first resolves against an anchor taken after its stamps, the later ones against
  // that anchor, kept (the CUDA backend re-takes it once a second, not every step).
  void stampsResolveToTheHostClock() {
    using namespace std::chrono;
    const auto slack = duration_cast<nanoseconds>(50us).count();
    for (Backend* be : {cpu_.get(), body_.get()}) {
      for (int round = 0; round < 3; ++round) {
        const std::int64_t before = lk::host_now_ns();
        QCOMPARE(be->stamp(), 0);
        std::this_thread::sleep_for(5ms);
        QCOMPARE(be->stamp(), 1);
        const std::vector<std::int64_t> times = be->resolve_stamps();
        const std::int64_t after = lk::host_now_ns();
        QVERIFY(be->status().ok());
        QCOMPARE(times.size(), std::size_t(2));
        QVERIFY2(times[0] >= before - slack, be->name());
        QVERIFY2(times[1] - times[0] >= duration_cast<nanoseconds>(4900us).count(), be->name());
        QVERIFY2(times[1] <= after + slack, be->name());
        QVERIFY(be->resolve_stamps().empty());
      }
    }
  }

  // CUDA event times onto the host clock: the anchor at the midpoint of the two host
  // reads around it, a stamp `ms` before the anchor that much earlier.
  void eventTimesMapOntoTheHostClock() {
    QCOMPARE(loom::cuda::stamp_host_ns(1000, 3000, 0.0f), std::int64_t(2000));
    QCOMPARE(loom::cuda::stamp_host_ns(1'000'000'000, 1'000'004'000, 1.5f), std::int64_t(1'000'002'000 - 1'500'000));
    // A stamp 250 ms after an anchor kept from an earlier step.
    QCOMPARE(loom::cuda::stamp_host_ns(1'000'000'000, 1'000'004'000, -250.0f), std::int64_t(1'000'002'000 + 250'000'000));
  }
};

QTEST_APPLESS_MAIN(TestKernelBackends)
#include "test_kernel_backends.moc"
