// Sums gradients across data-parallel replicas in buckets, overlapped with backward.
// Parameters are grouped into buckets in the order backward produces them (last layer
// first). When backward finishes a layer, every bucket whose gradients are now complete is
// packed and handed to a communication thread, which all-reduces the buckets in order
// with the blocking collective while backward goes on.
// Why a thread: a non-blocking MPI collective only progresses inside MPI calls, and the
// training thread makes none while a layer's GEMM runs, so with MPI_Iallreduce polled
// between layers nothing was really transferred during backward (bench_dp measured 0%
// hidden), and Open MPI's non-blocking all-reduce reached only 43-77% of the blocking
// one's bandwidth (bench_allreduce). The communicator is still used by one thread at a
// time: the training thread makes no call between begin_step() and finish_step()'s return.
// Losses are scaled by 1/global_batch, so the sum over replicas is the full-batch gradient.
// Buckets live in host memory, or, when the gradients are in device memory and the
// communicator takes device memory (NCCL), in the device's memory: then nothing crosses
// to the host and the all-reduce runs on the communicator's own stream.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/status.h"
#include "loom/engine/tensor.h"
#include "loom/trace/recorder.h"

namespace loom::engine {

// Told by the model when backward has finished a layer (all its parameter gradients).
class BackwardObserver {
 public:
  virtual ~BackwardObserver() = default;
  virtual void layer_done(std::int32_t layer) = 0;
};

class GradientSync final : public BackwardObserver {
 public:
  GradientSync(comm::Communicator& comm, const std::vector<Param*>& params, double bucket_mb,
               trace::Recorder* recorder);
  ~GradientSync() override;  // stops the communication thread
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  void begin_step(std::int32_t step);
  void layer_done(std::int32_t layer) override;
  // Hands over what is left, waits for every bucket and writes the sums back into the grads.
  Status finish_step();

  std::size_t bucket_count() const { return buckets_.size(); }
  std::int64_t bytes_per_step() const;

 private:
  struct Bucket {
    std::vector<Param*> params;
    std::int64_t floats = 0;
    std::vector<float> host;  // the bucket, on the host path
    Buffer<float> device;     // the bucket, on the device path
    float* data() { return device.size() ? device.data() : host.data(); }
    std::int64_t pending = 0;  // parameters whose gradient is not produced yet this step
    bool queued = false;
  };
  void enqueue(Bucket& bucket);
  void communicate();  // the communication thread's loop
  void reduce(Bucket& bucket);

  comm::Communicator& comm_;
  trace::Recorder* recorder_;
  bool on_device_ = false;  // buckets in device memory, handed to the communicator as they are
  std::vector<Bucket> buckets_;
  std::vector<std::vector<std::size_t>> buckets_of_layer_;  // layer id -> buckets holding its params
  std::vector<std::vector<Param*>> params_of_layer_;
  std::int32_t step_ = 0;
  std::int32_t message_ = 0;

  std::mutex mutex_;  // guards the queue, the counters and stopping_
  std::condition_variable work_ready_, work_done_;
  std::deque<Bucket*> queue_;
  std::size_t reduced_ = 0;  // buckets finished this step
  Status first_error_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace loom::engine
