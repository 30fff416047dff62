// A rank's setup around its body (see rank_setup.h).
#include "loom/engine/rank_setup.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "loom/kernels/cpu.h"
#include "loom/trace/machine.h"

namespace loom::engine {

trace::Recorder* training_recorder(trace::Recorder& recorder) {
  const char* trace = std::getenv("LOOM_TRACE");
  return trace && std::string_view(trace) == "off" ? nullptr : &recorder;
}

int apply_thread_count(const Plan& plan, int ranks_on_host) {
  int threads = plan.training.threads;
  if (threads <= 0) {
    const int cores = machine::cores_available();
    threads = std::max(1, cores / std::max(1, ranks_on_host));
  }
  cpu::set_blas_threads(threads);
  return threads;
}

}  // namespace loom::engine
