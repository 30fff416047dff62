// Bucketed gradient all-reduce on a communication thread, overlapped with backward.
// Host buckets: packing downloads each gradient from its backend (a plain copy on the
// CPU) and unpacking uploads it, so an MPI communicator never sees device memory. Device
// buckets (a device backend and a communicator that takes device memory): packing and
// unpacking are device-to-device copies.
#include "loom/engine/gradient_sync.h"

#include <algorithm>
#include <cstring>

namespace loom::engine {

using trace::Event;
using trace::EventKind;
using trace::Stream;

GradientSync::GradientSync(comm::Communicator& comm, const std::vector<Param*>& params, double bucket_mb,
                           trace::Recorder* recorder)
    : comm_(comm), recorder_(recorder) {
  const auto bucket_bytes = static_cast<std::int64_t>(bucket_mb * 1024.0 * 1024.0);
  std::int32_t max_layer = 0;
  for (const Param* p : params) max_layer = std::max(max_layer, p->layer);
  buckets_of_layer_.resize(std::size_t(max_layer) + 1);
  params_of_layer_.resize(std::size_t(max_layer) + 1);
  // Backward produces gradients from the last parameter to the first.
  std::int64_t filled = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    Param* p = *it;
    const auto bytes = std::int64_t(p->grad.size() * sizeof(float));
    if (buckets_.empty() || (filled > 0 && filled + bytes > bucket_bytes)) {
      buckets_.emplace_back();
      filled = 0;
    }
    buckets_.back().params.push_back(p);
    filled += bytes;
    auto& owners = buckets_of_layer_[std::size_t(p->layer)];
    if (owners.empty() || owners.back() != buckets_.size() - 1) owners.push_back(buckets_.size() - 1);
    params_of_layer_[std::size_t(p->layer)].push_back(p);
  }
  kernels::Backend* backend = params.empty() ? nullptr : &params.front()->grad.backend();
  on_device_ = backend && !backend->host_memory() && comm.accepts_device_memory();
  for (Bucket& b : buckets_) {
    for (const Param* p : b.params) b.floats += std::int64_t(p->grad.size());
    if (on_device_) {
      b.device.bind(*backend);
      b.device.resize(b.floats);
    } else {
      b.host.resize(std::size_t(b.floats));
    }
  }
  worker_ = std::thread([this] { communicate(); });
}

std::int64_t GradientSync::bytes_per_step() const {
  std::int64_t bytes = 0;
  for (const Bucket& b : buckets_) bytes += b.floats * std::int64_t(sizeof(float));
  return bytes;
}

GradientSync::~GradientSync() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void GradientSync::begin_step(std::int32_t step) {
  step_ = step;
  std::lock_guard lock(mutex_);
  reduced_ = 0;
  first_error_ = {};
  for (Bucket& b : buckets_) {
    b.pending = std::int64_t(b.params.size());
    b.queued = false;
  }
}

void GradientSync::layer_done(std::int32_t layer) {
  if (layer < 0 || std::size_t(layer) >= buckets_of_layer_.size()) return;
  for (std::size_t index : buckets_of_layer_[std::size_t(layer)]) {
    Bucket& b = buckets_[index];
    for (const Param* p : params_of_layer_[std::size_t(layer)]) {
      if (std::find(b.params.begin(), b.params.end(), p) != b.params.end()) --b.pending;
    }
    if (b.pending == 0 && !b.queued) enqueue(b);
  }
}

// Packing happens here, on the training thread, while the gradients are hot in cache;
// the communication thread only moves the packed buffer.
// A device bucket must be complete before the communicator's stream reads it, and that
// stream does not wait for the compute stream: so the training thread waits for the
// device here (it overlaps again as soon as it queues the next layer's backward).
void GradientSync::enqueue(Bucket& b) {
  std::size_t offset = 0;
  for (const Param* p : b.params) {
    if (on_device_) p->grad.backend().copy(b.data() + offset, p->grad.data(), p->grad.bytes());
    else p->grad.backend().download(b.data() + offset, p->grad.data(), p->grad.bytes());
    offset += p->grad.size();
  }
  if (on_device_) b.device.backend().synchronize();
  b.queued = true;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(&b);
  }
  work_ready_.notify_one();
}

void GradientSync::communicate() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    Bucket* b = queue_.front();
    queue_.pop_front();
    lock.unlock();
    reduce(*b);
    lock.lock();
    ++reduced_;
    work_done_.notify_all();
  }
}

// One bucket's blocking all-reduce, traced from the call to its return.
void GradientSync::reduce(Bucket& b) {
  Event e;
  const std::int64_t run_delay = recorder_ ? trace::thread_run_delay_ns() : -1;
  e.start_ns = trace::now_ns();
  const Status s = comm_.allreduce_sum(b.data(), b.floats);
  e.end_ns = trace::now_ns();
  if (recorder_) e.descheduled_us = trace::descheduled_us(run_delay, trace::thread_run_delay_ns());
  if (!s.ok()) {
    std::lock_guard lock(mutex_);
    if (first_error_.ok()) first_error_ = s;
    return;
  }
  if (!recorder_) return;
  e.bytes = b.floats * std::int64_t(sizeof(float));
  e.step = step_;
  e.message = message_++;
  e.kind = EventKind::AllReduce;
  e.stream = Stream::Comm;
  recorder_->record(e);
}

Status GradientSync::finish_step() {
  for (Bucket& b : buckets_) {
    if (!b.queued) enqueue(b);  // a layer the observer never saw (defensive)
  }
  std::unique_lock lock(mutex_);
  work_done_.wait(lock, [this] { return reduced_ == buckets_.size(); });
  if (!first_error_.ok()) return first_error_;
  for (Bucket& b : buckets_) {
    std::size_t offset = 0;
    for (Param* p : b.params) {
      if (on_device_) p->grad.backend().copy(p->grad.data(), b.data() + offset, p->grad.bytes());
      else p->grad.backend().upload(p->grad.data(), b.data() + offset, p->grad.bytes());
      offset += p->grad.size();
    }
  }
  return {};
}

}  // namespace loom::engine
