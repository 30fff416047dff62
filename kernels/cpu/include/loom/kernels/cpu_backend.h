// The CPU implementation of the kernel backend: kernels/cpu's functions (CBLAS GEMMs,
// vectorised loops) over host memory. Results are exactly those of calling kernels/cpu
// directly, which is what the engine did before the backend interface existed.
#pragma once

#include <memory>

#include "loom/kernels/backend.h"

namespace loom::cpu {

std::unique_ptr<kernels::Backend> make_cpu_backend();

// "cpu-f64": the same kernels in double (cpu_f64_backend.cpp), the float64 reference of
// the training-equivalence tests. Memory the engine sees as float is held in double behind
// upload/download (host_memory() is false); one thread per backend, host-staged traffic only.
std::unique_ptr<kernels::Backend> make_cpu_f64_backend();

// One process-wide CPU backend: the home of tensors that were never given a backend.
// Stateless apart from its byte count, so sharing it between threads is safe.
kernels::Backend& shared_cpu_backend();

}  // namespace loom::cpu
