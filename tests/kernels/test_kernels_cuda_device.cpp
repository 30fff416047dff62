// The kernel bodies launched on a CUDA device against the same bodies on the CPU
// launcher (themselves checked against kernels/cpu by test_kernels_cuda_bodies): fp32
// within 1e-5 relative (the GPU may fuse multiply-adds and round exp, log and sqrt
// differently). Label gpu; skips, saying why, where no device or driver exists.
#include <QtTest>

#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "loom/cuda/device_kernels.h"

using loom::test::compare;
using loom::test::random_vector;
namespace lc = loom::cuda;

namespace {

lc::DeviceBuffer upload(const std::vector<float>& host) {
  auto b = lc::DeviceBuffer::allocate(std::int64_t(host.size() * sizeof(float)));
  if (!b.ok()) qFatal("%s", b.error().describe().c_str());
  if (!b->upload(host.data(), b->bytes()).ok()) qFatal("upload failed");
  return std::move(b).value();
}

std::vector<float> download(const lc::DeviceBuffer& b) {
  std::vector<float> host(std::size_t(b.bytes()) / sizeof(float));
  if (!b.download(host.data(), b.bytes()).ok()) qFatal("download failed");
  return host;
}

}  // namespace

class TestCudaDevice : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    const auto count = lc::device_count();
    if (!count.ok()) QSKIP(qPrintable("no usable CUDA device: " + QString::fromStdString(count.error().describe())));
    if (*count == 0) QSKIP("no CUDA device on this machine");
  }

  void reluAndOptimizersOnTheDevice() {
    std::mt19937_64 rng(7);
    const std::int64_t n = 100003;
    const auto x = random_vector<float>(n, rng), g = random_vector<float>(n, rng);
    auto dx = upload(x), dy = upload(std::vector<float>(n));
    QVERIFY(lc::device_launch(n, lc::ReluForward{static_cast<float*>(dx.get()), static_cast<float*>(dy.get())}).ok());
    std::vector<float> want(n);
    lc::host_launch(n, lc::ReluForward{x.data(), want.data()});
    LOOM_VERIFY_EMPTY(compare(download(dy), want, 0, 0, "relu on the device"));
    auto w = x;
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    auto dw = upload(w), dg = upload(g), dm = upload(m), dv = upload(v);
    for (std::int64_t t = 1; t <= 3; ++t) {
      const lc::AdamStep host{w.data(), g.data(), m.data(), v.data(), 0.9f, 0.999f, 1e-8f, 0.0f, 0, 0};
      lc::host_launch(n, lc::adam_constants(host, 0.001f, t));
      const lc::AdamStep dev{static_cast<float*>(dw.get()), static_cast<const float*>(dg.get()),
                             static_cast<float*>(dm.get()), static_cast<float*>(dv.get()), 0.9f, 0.999f, 1e-8f, 0.0f, 0, 0};
      QVERIFY(lc::device_launch(n, lc::adam_constants(dev, 0.001f, t)).ok());
    }
    LOOM_VERIFY_EMPTY(compare(download(dw), w, 1e-5, 1e-7, "adam on the device"));
  }
};

QTEST_GUILESS_MAIN(TestCudaDevice)
#include "test_kernels_cuda_device.moc"
