// The kernel backend of a rank's device (the plan's devices[rank]), for loom-rank and
// for one-rank runs in process. A cpu device gets the CPU backend; a gpu device the CUDA
// backend on its "gpu" index. Two implementations, chosen by CMake: open_device_cuda.cpp
// where the CUDA backend is built, open_device_cpu.cpp elsewhere (validation refuses gpu
// devices there; this says why again should a plan get past it).
#pragma once

#include <memory>
#include <string>

#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/kernels/backend.h"
#include "loom/trace/device_info.h"

namespace loom::device {

// An Unavailable error naming the CUDA call and with a hint where the device cannot be
// opened (no driver, no such GPU): the rank fails at start with it.
// tf32: the plan's training.tf32 (TF32 tensor cores for a gpu's fp32 GEMMs).
Expected<std::unique_ptr<kernels::Backend>> open_device(const DeviceSpec& device, bool tf32 = false);

// What the devices table shows for it: "cpu", "gpu 0".
std::string device_label(const DeviceSpec& device);

// What the device really is, for the run's record (trace::DeviceInfo), asked once it is
// open. A cpu: this machine's CPU model (/proc/cpuinfo), the cores this process may use
// (machine::cores_available), its memory, and `blas_threads`, the BLAS threads the rank
// set. A gpu: CUDA's answer (name, memory, compute capability, driver and runtime
// versions; kernels/cuda query_cuda_device) and the NVIDIA driver's version
// (/proc/driver/nvidia/version). Never fails: what cannot be read stays unknown. The
// NCCL version is the caller's to add, where it joined NCCL (comm::nccl_version).
trace::DeviceInfo describe_device(const DeviceSpec& device, int blas_threads);

// The pure parts, for tests. The first "model name" in /proc/cpuinfo's text ("" if none).
std::string cpu_model_from_cpuinfo(const std::string& cpuinfo);
// The driver version in /proc/driver/nvidia/version's text: "580.159.04" ("" if none).
std::string nvidia_driver_from_proc(const std::string& text);
// CUDA's version number as text: 13000 -> "13.0", 12040 -> "12.4"; "" for 0 or less.
std::string cuda_version_text(int version);

}  // namespace loom::device
