// Batch loading and the loss head (batch.h), the same for every backend.
#include "loom/engine/batch.h"

#include <algorithm>

namespace loom::engine {

void load_batch(const data::Dataset& set, const std::vector<std::int64_t>& order, data::BatchSlice slice,
                Tensor& input, Buffer<std::int32_t>& labels, BatchLoadSpan* span) {
  gather_batch(set, order, slice, input, labels);
  upload_batch(input, labels, span);
}

void gather_batch(const data::Dataset& set, const std::vector<std::int64_t>& order, data::BatchSlice slice,
                  Tensor& input, Buffer<std::int32_t>& labels) {
  input.resize(slice.size, set.sample_shape);
  labels.resize(slice.size);
  data::gather_batch(set, order, slice, input.data.host_write(), labels.host_write());
}

void upload_batch(Tensor& input, Buffer<std::int32_t>& labels, BatchLoadSpan* span) {
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
  }
  return result;
}

void StepLosses::add(const Tensor& logits, const Buffer<std::int32_t>& labels, Tensor& probs, Tensor& dlogits,
                     float scale, double weight) {
  kernels::Backend& backend = logits.data.backend();
  backend_ = &backend;
  if (backend.host_memory()) {
    entries_.push_back({false, softmax_xent(logits, labels, probs, &dlogits, scale), weight});
    return;
  }
  const int rows = int(logits.batch), classes = int(logits.sample_size());
  probs.data.bind(backend);
  probs.resize(logits.batch, logits.sample);
  dlogits.data.bind(backend);
  dlogits.resize(logits.batch, logits.sample);
  backend.softmax_xent_queue(logits.ptr(), labels.data(), probs.ptr(), rows, classes);
  backend.softmax_xent_backward(probs.ptr(), labels.data(), dlogits.ptr(), rows, classes, scale);
  entries_.push_back({true, {}, weight});
}

std::pair<double, std::int64_t> StepLosses::take() {
  std::vector<kernels::LossValue> read;
  const bool any_queued = std::any_of(entries_.begin(), entries_.end(), [](const Entry& e) { return e.queued; });
  if (any_queued) read = backend_->take_losses();
  double loss = 0;
  std::int64_t correct = 0;
  std::size_t next = 0;
  for (const Entry& e : entries_) {
    LossResult r = e.known;
    if (e.queued && next < read.size()) r = {read[next].loss, read[next].correct}, ++next;
    loss += double(r.loss) * e.weight;
    correct += r.correct;
  }
  entries_.clear();
  return {loss, correct};
}

}  // namespace loom::engine
