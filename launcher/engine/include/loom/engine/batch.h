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

struct LossResult {
  float loss = 0;   // mean over the rows
  int correct = 0;  // rows whose argmax is the label
};

// Softmax cross-entropy of logits [N, classes] in their backend: probs receives the
// softmax; when dlogits is given it receives (probs - onehot) * scale.
LossResult softmax_xent(const Tensor& logits, const Buffer<std::int32_t>& labels, Tensor& probs, Tensor* dlogits,
                        float scale);

}  // namespace loom::engine
