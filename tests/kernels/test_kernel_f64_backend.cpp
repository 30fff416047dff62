// The float64 backend ("cpu-f64", kernels/cpu/src/cpu_f64_backend.cpp), the reference the
// training-equivalence tests judge float32 runs against. Checked here:
//  - its operations are kernels/cpu's double kernels on the widened inputs, exactly (the
//    download is the double result rounded once to float), including operands at an
//    offset inside an allocation (micro-batch slices) and int32 operands (labels, argmax);
//  - values stay double between operations (a sum a float would lose survives);
//  - a linear layer through it differs from the float CPU backend by float rounding: not
//    at all would mean it computes in float, more than the dot-product bound a defect;
//  - a pointer outside its memory fails the backend instead of being read.
#include <QtTest>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "loom/kernels/cpu.h"
#include "loom/kernels/cpu_backend.h"

using loom::kernels::Backend;
using loom::test::random_vector;

namespace {

// Buffers put into one backend, released at the end.
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
  std::vector<T> get(const T* p, std::size_t n) {
    std::vector<T> host(n);
    be.download(host.data(), p, std::int64_t(n * sizeof(T)));
    return host;
  }
  Backend& be;

 private:
  std::vector<void*> owned_;
};

std::vector<double> widened(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Empty when got[i] == float(want[i]) for every i.
QString rounded_once(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  if (got.size() != want.size()) return QString("%1: size %2 vs %3").arg(what).arg(got.size()).arg(want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != float(want[i]))
      return QString("%1[%2]: %3, the double kernel gives %4").arg(what).arg(i).arg(double(got[i]), 0, 'g', 9)
          .arg(want[i], 0, 'g', 17);
  return {};
}

}  // namespace

class TestF64Backend : public QObject {
  Q_OBJECT

 private slots:
  void linearIsTheDoubleKernel() {
    std::mt19937_64 rng(11);
    const int N = 6, in = 37, out = 5, half = N / 2;
    const auto x = random_vector<float>(std::size_t(N) * in, rng), W = random_vector<float>(std::size_t(out) * in, rng),
               b = random_vector<float>(out, rng), dy = random_vector<float>(std::size_t(N) * out, rng);
    auto be = loom::cpu::make_cpu_f64_backend();
    QCOMPARE(be->name(), "cpu-f64");
    QVERIFY(!be->host_memory());
    On on(*be);
    float *px = on.put(x), *pW = on.put(W), *pb = on.put(b), *pdy = on.put(dy);
    float* py = on.put(std::vector<float>(std::size_t(N) * out, 0.0f));
    float* pdx = on.put(std::vector<float>(std::size_t(N) * in, 0.0f));
    float* pdW = on.put(std::vector<float>(W.size(), 0.5f));  // accumulated into
    // The second half of the batch, as a micro-batch slice: pointers inside the blocks.
    be->linear_forward(px + half * in, pW, pb, py + half * out, N - half, in, out);
    be->linear_backward(px + half * in, pW, pdy + half * out, pdx + half * in, pdW, nullptr, N - half, in, out);
    QVERIFY(be->status().ok());

    const auto x64 = widened(x), W64 = widened(W), b64 = widened(b), dy64 = widened(dy);
    std::vector<double> y64(std::size_t(N) * out, 0.0), dx64(std::size_t(N) * in, 0.0), dW64(W.size(), 0.5);
    loom::cpu::linear_forward(x64.data() + half * in, W64.data(), b64.data(), y64.data() + half * out, N - half, in, out);
    loom::cpu::linear_backward(x64.data() + half * in, W64.data(), dy64.data() + half * out, dx64.data() + half * in,
                               dW64.data(), static_cast<double*>(nullptr), N - half, in, out);
    LOOM_VERIFY_EMPTY(rounded_once(on.get(py, y64.size()), y64, "y"));
    LOOM_VERIFY_EMPTY(rounded_once(on.get(pdx, dx64.size()), dx64, "dx"));
    LOOM_VERIFY_EMPTY(rounded_once(on.get(pdW, dW64.size()), dW64, "dW"));
  }

  // Max pool writes int32 argmax into the backend's memory and reads it back; the loss
  // reads int32 labels. Both must be the raw integers, and the loss the double mean.
  void poolAndLossTakeInt32Operands() {
    std::mt19937_64 rng(12);
    loom::kernels::PoolDims d;
    d.N = 2, d.C = 3, d.H = 6, d.W = 4;
    loom::cpu::PoolGeometry g;
    g.N = d.N, g.C = d.C, g.H = d.H, g.W = d.W;
    const std::size_t ins = std::size_t(d.N) * d.C * d.H * d.W, outs = std::size_t(d.N) * d.C * 3 * 2;
    const auto x = random_vector<float>(ins, rng), dy = random_vector<float>(outs, rng);
    auto be = loom::cpu::make_cpu_f64_backend();
    On on(*be);
    float *px = on.put(x), *pdy = on.put(dy), *py = on.put(std::vector<float>(outs)), *pdx = on.put(std::vector<float>(ins));
    auto* arg = on.put(std::vector<std::int32_t>(outs, -1));
    be->maxpool2d_forward(px, py, arg, d);
    be->maxpool2d_backward(arg, pdy, pdx, d);
    std::vector<double> y64(outs), dx64(ins);
    std::vector<std::int32_t> arg64(outs);
    const auto x64 = widened(x), dyw = widened(dy);
    loom::cpu::maxpool2d_forward(x64.data(), y64.data(), arg64.data(), g);
    loom::cpu::maxpool2d_backward(arg64.data(), dyw.data(), dx64.data(), g);
    QCOMPARE(on.get(arg, outs), arg64);
    LOOM_VERIFY_EMPTY(rounded_once(on.get(py, outs), y64, "pool y"));
    LOOM_VERIFY_EMPTY(rounded_once(on.get(pdx, ins), dx64, "pool dx"));

    const int N = 4, C = 10;
    const auto logits = random_vector<float>(std::size_t(N) * C, rng, -3, 3);
    const std::vector<std::int32_t> labels{3, 0, 9, 3};
    float *pl = on.put(logits), *pp = on.put(std::vector<float>(logits.size())), *pd = on.put(std::vector<float>(logits.size()));
    auto* plab = on.put(labels);
    int correct = -1, correct64 = -2;
    const float loss = be->softmax_xent_forward(pl, plab, pp, N, C, &correct);
    be->softmax_xent_backward(pp, plab, pd, N, C, 0.25f);
    const auto l64 = widened(logits);
    std::vector<double> p64(l64.size()), d64(l64.size());
    const double loss64 = loom::cpu::softmax_xent_forward(l64.data(), labels.data(), p64.data(), N, C, &correct64);
    loom::cpu::softmax_xent_backward(p64.data(), labels.data(), d64.data(), N, C, 0.25);
    QVERIFY(loss == float(loss64));  // exact (QCOMPARE on floats is fuzzy)
    QCOMPARE(correct, correct64);
    QCOMPARE(on.get(plab, labels.size()), labels);
    LOOM_VERIFY_EMPTY(rounded_once(on.get(pd, d64.size()), d64, "dlogits"));
    QVERIFY(be->status().ok());
  }

  // Adam on the shadows: three steps, the state never rounded to float in between.
  void adamKeepsItsStateInDouble() {
    std::mt19937_64 rng(13);
    const std::size_t n = 50;
    const auto w = random_vector<float>(n, rng), g = random_vector<float>(n, rng, -1e-3, 1e-3);
    auto be = loom::cpu::make_cpu_f64_backend();
    On on(*be);
    float *pw = on.put(w), *pg = on.put(g), *pm = on.put(std::vector<float>(n)), *pv = on.put(std::vector<float>(n));
    auto w64 = widened(w), m64 = std::vector<double>(n), v64 = std::vector<double>(n);
    const auto g64 = widened(g);
    for (std::int64_t t = 1; t <= 3; ++t) {
      loom::kernels::AdamParams a{1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, t};
      be->adam_step(pw, pg, pm, pv, std::int64_t(n), a);
      loom::cpu::adam_step(w64.data(), g64.data(), m64.data(), v64.data(), std::int64_t(n), double(a.lr),
                           double(a.beta1), double(a.beta2), double(a.eps), double(a.weight_decay), t);
    }
    LOOM_VERIFY_EMPTY(rounded_once(on.get(pw, n), w64, "w"));
    LOOM_VERIFY_EMPTY(rounded_once(on.get(pv, n), v64, "v"));
  }

  // 1 + 1000 * 2^-30: a float accumulator stays at 1 (each addend is under half an ulp),
  // the double shadow does not. Copy carries the shadow too.
  void valuesStayDoubleBetweenOperations() {
    for (const bool f64 : {true, false}) {
      auto be = f64 ? loom::cpu::make_cpu_f64_backend() : loom::cpu::make_cpu_backend();
      On on(*be);
      float* sum = on.put(std::vector<float>{1.0f});
      float* tiny = on.put(std::vector<float>{std::ldexp(1.0f, -30)});
      for (int i = 0; i < 1000; ++i) be->accumulate(sum, tiny, 1);
      float* moved = on.put(std::vector<float>{0.0f});
      be->copy(moved, sum, sizeof(float));
      be->accumulate(moved, moved, 1);  // 2 * (1 + 1000 * 2^-30)
      const float got = on.get(moved, 1)[0];
      const float want = f64 ? float(2.0 * (1.0 + 1000.0 * std::ldexp(1.0, -30))) : 2.0f;
      QVERIFY2(got == want, qPrintable(QString("%1: %2, want %3").arg(be->name()).arg(double(got), 0, 'g', 9)
                                           .arg(double(want), 0, 'g', 9)));  // exact: QCOMPARE on floats is fuzzy
    }
  }

  // Against the float CPU backend: 0 < |y32 - y64| <= gamma_in * (|x| |W|)_ij + u |y| per
  // element (Higham's dot-product bound, gamma_k = k u / (1 - k u), u = 2^-24).
  void linearDiffersFromFloatByRounding() {
    std::mt19937_64 rng(14);
    const int N = 16, in = 300, out = 20;
    const auto x = random_vector<float>(std::size_t(N) * in, rng), W = random_vector<float>(std::size_t(out) * in, rng);
    auto f32 = loom::cpu::make_cpu_backend(), f64 = loom::cpu::make_cpu_f64_backend();
    On a(*f32), b(*f64);
    float* y32 = a.put(std::vector<float>(std::size_t(N) * out));
    float* y64 = b.put(std::vector<float>(std::size_t(N) * out));
    f32->linear_forward(a.put(x), a.put(W), nullptr, y32, N, in, out);
    f64->linear_forward(b.put(x), b.put(W), nullptr, y64, N, in, out);
    const auto r32 = a.get(y32, std::size_t(N) * out), r64 = b.get(y64, std::size_t(N) * out);
    const double u = std::ldexp(1.0, -24), gamma = in * u / (1 - in * u);
    int differing = 0;
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < out; ++o) {
        double abs_dot = 0;
        for (int i = 0; i < in; ++i) abs_dot += std::abs(double(x[n * in + i]) * double(W[o * in + i]));
        const double diff = std::abs(double(r32[n * out + o]) - double(r64[n * out + o]));
        QVERIFY2(diff <= gamma * abs_dot + u * std::abs(double(r64[n * out + o])),
                 qPrintable(QString("y[%1,%2] differs by %3").arg(n).arg(o).arg(diff)));
        differing += diff > 0 ? 1 : 0;
      }
    QVERIFY2(differing > N * out / 4, qPrintable(QString("only %1 of %2 outputs differ: float arithmetic?")
                                                     .arg(differing).arg(N * out)));
  }

  void refusesPointersOutsideItsMemory() {
    auto be = loom::cpu::make_cpu_f64_backend();
    On on(*be);
    float* y = on.put(std::vector<float>(4));
    std::vector<float> host(4, 1.0f);
    be->accumulate(y, host.data(), 4);
    QVERIFY(!be->status().ok());
    QVERIFY(be->status().error().message.find("outside") != std::string::npos);
    // Sticky: later operations are skipped (transfers still run, for the owner to look).
    float* z = on.put(std::vector<float>(4, 2.0f));
    be->fill(z, 3.0f, 4);
    QCOMPARE(on.get(z, 4), std::vector<float>(4, 2.0f));
    QCOMPARE(be->bytes_in_use(), std::int64_t(32));
  }
};

QTEST_GUILESS_MAIN(TestF64Backend)
#include "test_kernel_f64_backend.moc"
