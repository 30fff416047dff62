// The CUDA backend's code (BodyBackend) run on the CPU: kernel bodies through
// host_launch, GEMMs through column-major CBLAS with the cuBLAS descriptors, memory in a
// checked host arena that refuses pointers it did not hand out. Not for users' runs (a
// plan cannot select it); it lets the tests train through the GPU path's logic on
// machines without a GPU, and compare it with the CPU backend.
//
// Synchronous by default: work is done when its call returns. Asynchronous on request,
// as a GPU is: every operation is queued on a stream of its own, a worker thread that
// runs them in order, and a call returns at once; stamps are taken when the worker
// reaches them, downloads and synchronize() wait for the queue, uploads read host memory
// when their turn comes. `lag_us` makes that worker sleep before each operation, a device
// that trails the host, so that an engine path which reads a result before waiting for
// it, or rewrites staging memory an upload has yet to read, gives wrong numbers in a
// test instead of passing by luck.
#pragma once

#include <memory>

#include "loom/kernels/backend.h"

namespace loom::cuda {

struct LaunchLog;

struct HostBodyOptions {
  bool asynchronous = false;
  int lag_us = 0;               // asynchronous only
  LaunchLog* log = nullptr;     // every launch's geometry appended (launch_geometry.h); outlives the backend
};

std::unique_ptr<kernels::Backend> make_host_body_backend(HostBodyOptions options = {});

}  // namespace loom::cuda
