// Sums gradients across data-parallel replicas in buckets, overlapped with backward.
// Parameters are grouped into buckets in the order backward produces them (last layer
// first). When backward finishes a layer, every bucket whose gradients are now complete is
// packed and its non-blocking all-reduce started; between layers the requests in flight
// are tested, because a non-blocking MPI collective only progresses inside MPI calls.
// Losses are scaled by 1/global_batch, so the sum over replicas is the full-batch gradient.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/status.h"
#include "loom/engine/tensor.h"
#include "loom/profiles/recorder.h"

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

  void begin_step(std::int32_t step);
  void layer_done(std::int32_t layer) override;
  // Starts what is left, waits for every bucket and writes the sums back into the grads.
  Status finish_step();

  std::size_t bucket_count() const { return buckets_.size(); }
  std::int64_t bytes_per_step() const;

 private:
  struct Bucket {
    std::vector<Param*> params;
    std::vector<float> buffer;
    std::int64_t pending = 0;  // parameters whose gradient is not produced yet this step
    std::unique_ptr<comm::Request> request;
    std::int64_t started_ns = 0;
    bool done = false;
  };
  void start(Bucket& bucket);
  void poll();
  void complete(Bucket& bucket, std::int64_t end_ns);

  comm::Communicator& comm_;
  trace::Recorder* recorder_;
  std::vector<Bucket> buckets_;
  std::vector<std::vector<std::size_t>> buckets_of_layer_;  // layer id -> buckets holding its params
  std::vector<std::vector<Param*>> params_of_layer_;
  std::int32_t step_ = 0;
  std::int32_t message_ = 0;
};

}  // namespace loom::engine
