// The gpu part of describe_device (open_device.h), implemented beside open_device by the
// file CMake chose: CUDA's answer in open_device_cuda.cpp, nothing in open_device_cpu.cpp
// (a build without CUDA never opens a gpu).
#pragma once

#include "loom/trace/device_info.h"

namespace loom::device::detail {

// kind "gpu" and whatever CUDA says of gpu `index`; name, memory and versions stay
// unknown where it cannot say.
trace::DeviceInfo describe_gpu(int index);

}  // namespace loom::device::detail
