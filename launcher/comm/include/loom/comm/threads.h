// Ranks as threads in one process (gloo's test approach): distributed logic is unit
// tested without mpirun. Each returned communicator is one rank; hand each to its own
// thread. Sums are taken in rank order, so results are deterministic run to run.
#pragma once

#include <memory>
#include <vector>

#include "loom/comm/communicator.h"

namespace loom::comm {

// `size` communicators (ranks 0..size-1) sharing one in-process group; empty if size < 1.
std::vector<std::unique_ptr<Communicator>> make_thread_group(int size);

}  // namespace loom::comm
