// Factory for the MPI communicator. Only factory functions are here: MPI's own headers
// stay inside launcher/comm/src, so nothing that includes this needs mpi.h.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>

#include "loom/comm/communicator.h"
#include "loom/core/status.h"

namespace loom::comm {

struct MpiOptions {
  // The largest count passed to one MPI call (elements for all-reduce, bytes for the
  // rest). MPI counts are int, so larger operations are split into several calls; tests
  // lower this to exercise the splitting without multi-gigabyte buffers.
  std::int64_t max_count_per_call = std::numeric_limits<int>::max();
  // Ask for MPI_THREAD_MULTIPLE instead of SERIALIZED: needed only when two threads
  // communicate at once (hybrid parallelism), and it costs locking inside MPI otherwise.
  bool thread_multiple = false;
};

// Initialises MPI (MPI_THREAD_SERIALIZED, or MULTIPLE when asked and available) and returns a communicator over all ranks (a
// duplicate of MPI_COMM_WORLD, so Loom's messages never match a user's). MPI errors after
// initialisation come back as values. If MPI is already initialised it is reused. Call
// finalize_mpi() at exit even when this failed (MPI may be up with too low a thread level).
Expected<std::unique_ptr<Communicator>> init_mpi(int* argc, char*** argv, const MpiOptions& options = {});

// Finalises MPI if it was initialised and not yet finalised. Destroy every communicator
// first (one destroyed afterwards skips freeing its MPI handle, which MPI no longer allows).
void finalize_mpi();

// Ends every rank of the job: a rank that cannot go on must not leave its peers blocked
// in a collective that will never complete.
[[noreturn]] void abort_mpi(int exit_code);

}  // namespace loom::comm
