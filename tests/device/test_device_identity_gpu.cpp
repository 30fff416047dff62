// On a GPU machine: what describe_device says of gpu 0 is what CUDA says, with the NVIDIA
// driver's version. Skips where no GPU can be opened (this project's build machines).
#include <QtTest>

#include "loom/device/open_device.h"

class TestDeviceIdentityGpu : public QObject {
  Q_OBJECT
 private slots:
  void gpuZero();
};

void TestDeviceIdentityGpu::gpuZero() {
  loom::DeviceSpec gpu;
  gpu.kind = loom::DeviceKind::Gpu;
  gpu.gpu = 0;
  auto backend = loom::device::open_device(gpu);
  if (!backend.ok()) QSKIP(("no GPU here: " + backend.error().message).c_str());
  const loom::trace::DeviceInfo info = loom::device::describe_device(gpu, 1);
  qInfo("gpu 0: %s", loom::trace::describe_device(info).c_str());
  QCOMPARE(info.kind, std::string("gpu"));
  QVERIFY2(info.name.rfind("NVIDIA", 0) == 0, info.name.c_str());
  QVERIFY(info.memory_bytes > (1LL << 30));
  QVERIFY(info.compute_major >= 7);
  QVERIFY(!info.cuda_runtime.empty() && !info.cuda_driver.empty());
}

QTEST_GUILESS_MAIN(TestDeviceIdentityGpu)
#include "test_device_identity_gpu.moc"
