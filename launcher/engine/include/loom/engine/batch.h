// What every training loop does around the model: load a batch of samples into the
// backend's memory, and apply the softmax cross-entropy loss to the model's logits.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/data/dataset.h"
#include "loom/engine/device_trace.h"
#include "loom/engine/tensor.h"

namespace loom::engine {

// Samples order[slice] into input [slice.size, sample shape] and their labels, gathered on
// the host straight into the buffers (CPU) or into host mirrors then uploaded (device);
// `span`, when given, is told where the upload is (its copy-lane span on a device).
void load_batch(const data::Dataset& set, const std::vector<std::int64_t>& order, data::BatchSlice slice,
                Tensor& input, Buffer<std::int32_t>& labels, BatchLoadSpan* span = nullptr);
// load_batch in its two halves: the host's gather (into the host mirrors on a device),
// and the upload of what was gathered (nothing on the CPU). A captured step holds only
// the upload: the host gathers each step's batch before replaying it.
void gather_batch(const data::Dataset& set, const std::vector<std::int64_t>& order, data::BatchSlice slice,
                  Tensor& input, Buffer<std::int32_t>& labels);
void upload_batch(Tensor& input, Buffer<std::int32_t>& labels, BatchLoadSpan* span = nullptr);

struct LossResult {
  float loss = 0;   // mean over the rows
  int correct = 0;  // rows whose argmax is the label
};

// Softmax cross-entropy of logits [N, classes] in their backend: probs receives the
// softmax; when dlogits is given it receives (probs - onehot) * scale.
LossResult softmax_xent(const Tensor& logits, const Buffer<std::int32_t>& labels, Tensor& probs, Tensor* dlogits,
                        float scale);

// The losses of one training step, read once at its end. A device queues each loss
// (kernels::Backend::softmax_xent_queue) and is waited for once, in take(); where work is
// done when its call returns (the CPU backend, which ranks that are threads may share)
// each loss is computed when added.
class StepLosses {
 public:
  // Adds the loss of logits against labels with weight `weight` (its share of the step's
  // samples), and its gradient into dlogits, scaled by `scale`.
  void add(const Tensor& logits, const Buffer<std::int32_t>& labels, Tensor& probs, Tensor& dlogits, float scale,
           double weight);
  // A loss a replayed capture queued (kernels::Backend::capture_begin), with its weight.
  void expect_queued(kernels::Backend& backend, double weight) {
    backend_ = &backend;
    entries_.push_back({true, {}, weight});
  }
  // Forgets the losses added since the last take (a capture that failed queued nothing).
  void drop() { entries_.clear(); }
  // The weighted sum of the losses and the correct count since the last take.
  std::pair<double, std::int64_t> take();

 private:
  struct Entry {
    bool queued = false;
    LossResult known;
    double weight = 0;
  };
  kernels::Backend* backend_ = nullptr;
  std::vector<Entry> entries_;
};

}  // namespace loom::engine
