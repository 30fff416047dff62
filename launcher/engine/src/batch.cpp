// Batch loading and the loss head (batch.h), the same for every backend.
#include "loom/engine/batch.h"

namespace loom::engine {

void load_batch(const data::Dataset& set, const std::vector<std::int64_t>& order, data::BatchSlice slice,
                Tensor& input, Buffer<std::int32_t>& labels, BatchLoadSpan* span) {
  input.resize(slice.size, set.sample_shape);
  labels.resize(slice.size);
  data::gather_batch(set, order, slice, input.data.host_write(), labels.host_write());
  if (span) span->upload_starts();
  input.data.commit();
  labels.commit();
  if (span) span->upload_ends(input.data.bytes() + labels.bytes());
}

LossResult softmax_xent(const Tensor& logits, const Buffer<std::int32_t>& labels, Tensor& probs, Tensor* dlogits,
                        float scale) {
  kernels::Backend& backend = logits.data.backend();
  const int rows = int(logits.batch), classes = int(logits.sample_size());
  probs.data.bind(backend);
  probs.resize(logits.batch, logits.sample);
  LossResult result;
  result.loss = backend.softmax_xent_forward(logits.ptr(), labels.data(), probs.ptr(), rows, classes, &result.correct);
  if (dlogits) {
    dlogits->data.bind(backend);
    dlogits->resize(logits.batch, logits.sample);
    backend.softmax_xent_backward(probs.ptr(), labels.data(), dlogits->ptr(), rows, classes, scale);
    backend.synchronize();  // the caller's Loss span covers the device's work
  }
  return result;
}

}  // namespace loom::engine
