// The NCCL communicator (built where NCCL, the CUDA backend and MPI are found; see
// this_build().nccl). It wraps the communicator the ranks already share (MPI in a real
// run): that one carries the NCCL unique ids, barriers, and every message and collective
// on host memory. On device memory of this rank's GPU, all-reduce and broadcast run over
// NCCL on a stream of the communicator's own (gradient buckets go device to device), and
// point-to-point messages over NCCL too: one two-rank NCCL communicator per (source,
// destination, tag), made on first use, which keeps MPI's matching rule (a receive takes
// the sends of its source and tag in order; NCCL itself matches by order alone) and lets
// crossing sends progress (nccl_communicator.cpp says why one communicator would not).
// Every NCCL operation is waited for with wait_watched (watchdog.h): NCCL's asynchronous
// errors (ncclCommGetAsyncError) are polled, and a failing or timed-out communicator is
// aborted (ncclCommAbort) rather than left hanging.
#pragma once

#include <chrono>
#include <memory>
#include <string>

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

// The NCCL library this process runs with (ncclGetVersion, which needs no GPU): "2.28.3";
// "" when it cannot say. A rank stores it with its device's identity (trace::DeviceInfo).
std::string nccl_version();

}  // namespace loom::comm
