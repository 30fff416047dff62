// The home of buffers never given a backend (tensor.h).
#include "loom/engine/tensor.h"

#include "loom/kernels/cpu_backend.h"

namespace loom::engine {

kernels::Backend& default_backend() { return cpu::shared_cpu_backend(); }

}  // namespace loom::engine
