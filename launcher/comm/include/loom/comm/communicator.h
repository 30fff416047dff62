// The communicator interface that rank-side code (gradient sync, pipeline stages) talks
// to. Backends live behind it in their own source files: real processes over MPI
// (loom/comm/mpi.h) and ranks as threads in one process for fast unit tests
// (loom/comm/threads.h). No backend type appears here, so code that communicates
// compiles without MPI.
//
// Semantics follow MPI so that a program tested on threads behaves the same under
// mpirun: collectives are called by every rank of a communicator in the same order;
// point-to-point messages between one (source, destination, tag) are received in the
// order they were sent; a buffer handed to a non-blocking operation must stay alive and
// untouched until its Request completes. A Communicator object belongs to one rank and is
// used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "loom/core/status.h"

namespace loom::comm {

// A non-blocking operation in flight. Destroying one that has not completed waits for it,
// because its buffer would otherwise be written after the owner believes it is free.
class Request {
 public:
  virtual ~Request() = default;
  // Progresses the operation (an MPI collective only advances inside MPI calls); true once
  // it has completed, after which wait() returns at once with its result.
  virtual bool test() = 0;
  // Blocks until complete; the operation's result (an error for a size mismatch, a failed
  // transport, ...). Calling it again returns the same result.
  virtual Status wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sums `count` floats element-wise across ranks, in place. Every rank gets bitwise the
  // same result.
  virtual Status allreduce_sum(float* data, std::int64_t count) = 0;
  virtual std::unique_ptr<Request> iallreduce_sum(float* data, std::int64_t count) = 0;
  // Copies `bytes` from `root`'s buffer into every other rank's buffer.
  virtual Status broadcast(void* data, std::int64_t bytes, int root) = 0;

  // A receive must name the same size as the matching send; a mismatch is an error.
  // Blocking point-to-point is the non-blocking operation waited for, in every backend.
  Status send(const void* data, std::int64_t bytes, int peer, int tag) {
    return isend(data, bytes, peer, tag)->wait();
  }
  Status recv(void* data, std::int64_t bytes, int peer, int tag) { return irecv(data, bytes, peer, tag)->wait(); }
  virtual std::unique_ptr<Request> isend(const void* data, std::int64_t bytes, int peer, int tag) = 0;
  virtual std::unique_ptr<Request> irecv(void* data, std::int64_t bytes, int peer, int tag) = 0;

  virtual Status barrier() = 0;

  // Sub-communicator of the ranks with the same color, ordered by key (ties by rank), for
  // hybrid parallelism (e.g. one communicator per pipeline stage for its replicas).
  // Collective: every rank calls it. A rank passing a negative color joins no
  // sub-communicator and gets nullptr (MPI_UNDEFINED); nullptr is also the failure result.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  virtual std::string backend_name() const = 0;  // "mpi", "threads", "nccl"
  // True when all-reduce, broadcast and point-to-point messages also take device memory
  // of this rank's GPU (and move it device to device, NCCL); host memory is accepted by
  // every backend. Callers that hold device buffers hand them over directly here instead
  // of staging them, once the device has finished writing them (the communicator's own
  // stream does not wait for the caller's).
  virtual bool accepts_device_memory() const { return false; }
  // True when this rank's communicators may be used by different threads at the same
  // time (one per thread): hybrid parallelism all-reduces a stage's gradients on a
  // communication thread while the training thread sends activations along the pipeline.
  virtual bool allows_concurrent_threads() const = 0;
};

}  // namespace loom::comm
