// The CUDA backend's code (BodyBackend) run on the CPU: kernel bodies through
// host_launch, GEMMs through column-major CBLAS with the cuBLAS descriptors, memory in a
// checked host arena that refuses pointers it did not hand out. Not for users' runs (a
// plan cannot select it); it lets the tests train through the GPU path's logic on
// machines without a GPU, and compare it with the CPU backend.
#pragma once

#include <memory>

#include "loom/kernels/backend.h"

namespace loom::cuda {

struct LaunchLog;

// With a log, every kernel launch's geometry is appended to it (launch_geometry.h); the
// log must outlive the backend.
std::unique_ptr<kernels::Backend> make_host_body_backend(LaunchLog* log = nullptr);

}  // namespace loom::cuda
