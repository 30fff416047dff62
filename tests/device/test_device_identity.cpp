// A rank's device identity (launcher/device describe_device): the parsers of what Linux
// and the NVIDIA driver say, against texts copied from real machines, and the cpu
// identity of this machine against its own /proc/cpuinfo.
#include <QtTest>

#include <fstream>
#include <iterator>
#include <string>

#include "loom/device/open_device.h"

using loom::device::cpu_model_from_cpuinfo;
using loom::device::cuda_version_text;
using loom::device::nvidia_driver_from_proc;

class TestDeviceIdentity : public QObject {
  Q_OBJECT
 private slots:
  void cpuModelFromCpuinfo();
  void nvidiaDriverFromProc();
  void cudaVersions();
  void thisMachinesCpu();
};

void TestDeviceIdentity::cpuModelFromCpuinfo() {
  // x86: the first processor's model name wins; tabs before the colon are Linux's.
  const std::string x86 =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
      "model name\t: AMD EPYC 7B13 64-Core Processor\nstepping\t: 1\n\n"
      "processor\t: 1\nmodel name\t: something else\n";
  QCOMPARE(cpu_model_from_cpuinfo(x86), std::string("AMD EPYC 7B13 64-Core Processor"));
  // "model" alone is not "model name"; an arm64 /proc/cpuinfo has no model name at all.
  QCOMPARE(cpu_model_from_cpuinfo("model\t\t: 85\nflags\t: fpu\n"), std::string());
  QCOMPARE(cpu_model_from_cpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n"), std::string());
  QCOMPARE(cpu_model_from_cpuinfo(""), std::string());
}

void TestDeviceIdentity::nvidiaDriverFromProc() {
  // Proprietary and open kernel modules word the line differently; the version is the
  // first token of digits and dots, not "x86_64".
  QCOMPARE(nvidia_driver_from_proc("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                                   "(dvs-builder@U16-I3-B14-2-1)  Thu Oct  9 2025\nGCC version:  gcc version 13.3.0\n"),
           std::string("580.159.04"));
  QCOMPARE(nvidia_driver_from_proc("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.54.03  Tue Jun  6 22:20:39 UTC 2023\n"),
           std::string("535.54.03"));
  QCOMPARE(nvidia_driver_from_proc("GCC version:  gcc version 13.3.0\n"), std::string());  // no NVRM line
  QCOMPARE(nvidia_driver_from_proc(""), std::string());
}

void TestDeviceIdentity::cudaVersions() {
  QCOMPARE(cuda_version_text(13000), std::string("13.0"));
  QCOMPARE(cuda_version_text(12040), std::string("12.4"));
  QCOMPARE(cuda_version_text(11080), std::string("11.8"));
  QCOMPARE(cuda_version_text(0), std::string());  // no driver: cudaDriverGetVersion says 0
}

// The identity a cpu rank stores is this machine's: its CPU model as /proc/cpuinfo names
// it, at least one core, its memory, the BLAS threads it was given, and the kernel's boot
// id (36 characters, a UUID, with no line end).
void TestDeviceIdentity::thisMachinesCpu() {
  std::ifstream in("/proc/cpuinfo");
  const std::string cpuinfo((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const loom::trace::DeviceInfo cpu = loom::device::describe_device(loom::DeviceSpec{}, 3);
  QCOMPARE(cpu.kind, std::string("cpu"));
  QCOMPARE(cpu.name, cpu_model_from_cpuinfo(cpuinfo));
  if (cpuinfo.find("model name") != std::string::npos) QVERIFY(!cpu.name.empty());
  QVERIFY(cpu.logical_cores >= 1);
  QVERIFY(cpu.memory_bytes > (1LL << 28));
  QCOMPARE(cpu.blas_threads, 3);
  QVERIFY(cpu.driver.empty() && cpu.cuda_runtime.empty() && cpu.nccl.empty());
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (std::getline(boot, boot_id)) QCOMPARE(cpu.machine, boot_id);
  QCOMPARE(cpu.machine.size(), std::size_t(36));
}

QTEST_GUILESS_MAIN(TestDeviceIdentity)
#include "test_device_identity.moc"
