// The NCCL communicator (built where NCCL and the CUDA compiler are found; see
// this_build().nccl). It wraps the communicator the ranks already share (MPI in a real
// run): that one carries the NCCL unique id at start, every point-to-point message and
// barrier, and any collective on host memory; all-reduce and broadcast on device memory
// of this rank's GPU run over NCCL on a stream of the communicator's own, so gradient
// buckets go device to device. Every NCCL operation is waited for with wait_watched
// (watchdog.h): NCCL's asynchronous errors (ncclCommGetAsyncError) are polled, and a
// failing or timed-out communicator is aborted (ncclCommAbort) rather than left hanging.
//
// Device-memory point-to-point is refused with an error: NCCL matches sends by order, not
// tag, and a send blocks its stream until the peer receives, so 1F1B's crossing
// activations and gradients deadlock on one communicator. The pipeline sends host-staged
// tensors, which go over the wrapped communicator.
#pragma once

#include <chrono>
#include <memory>

#include "loom/comm/communicator.h"
#include "loom/core/status.h"

namespace loom::comm {

struct NcclOptions {
  int device = 0;  // this rank's GPU index (cudaSetDevice)
  // An operation still running after this is aborted: a peer is hung or dead.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
};

// Collective over `host` (every rank calls it): rank 0 makes the unique id, share_unique_id
// hands it to all, each rank joins with ncclCommInitRank on its device. `host` must outlive
// the result. An Unavailable error names the failing CUDA or NCCL call and gives a hint.
Expected<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& host, const NcclOptions& options);

}  // namespace loom::comm
