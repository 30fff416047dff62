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

namespace loom::device {

// An Unavailable error naming the CUDA call and with a hint where the device cannot be
// opened (no driver, no such GPU): the rank fails at start with it.
// tf32: the plan's training.tf32 (TF32 tensor cores for a gpu's fp32 GEMMs).
Expected<std::unique_ptr<kernels::Backend>> open_device(const DeviceSpec& device, bool tf32 = false);

// What the devices table shows for it: "cpu", "gpu 0".
std::string device_label(const DeviceSpec& device);

}  // namespace loom::device
