// Tracing a device without stopping it. Traced on the CPU, a layer's span is timed by the
// host clock around the call (trace::SpanChain); on a device the call only queues the
// work, so a host-timed span would need a synchronize per layer, which serialises host
// and device and slows the run being measured. Instead each span boundary is a stamp
// (kernels::Backend::stamp: a CUDA event), and the spans are resolved to host times once a
// step, after the device has finished the step anyway (flush), and recorded then.
// docs/figures.md ("GPU ranks") says which spans are stamped and which are host-timed.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/kernels/backend.h"
#include "loom/trace/recorder.h"

namespace loom::engine {

class DeviceTrace {
 public:
  DeviceTrace(kernels::Backend& backend, trace::Recorder& recorder) : backend_(backend), recorder_(recorder) {}

  std::int32_t stamp() { return backend_.stamp(); }
  // A span from stamp `start` to stamp `end` with `fields` (kind, stream, step, ...).
  void add(const trace::Event& fields, std::int32_t start, std::int32_t end) { pending_.push_back({fields, start, end}); }
  // A span that starts on the host clock (fields.start_ns) and ends at stamp `end`.
  void add_host_started(const trace::Event& fields, std::int32_t end) { pending_.push_back({fields, kHostStart, end}); }
  // A captured step (kernels::Backend::capture_begin) runs its stamps again at every
  // replay: the spans added while it was captured are kept as a template, and
  // add_template gives each replay the same spans with its step number, the host-started
  // ones (the batch load) starting at `host_start_ns`.
  void begin_template() { template_from_ = pending_.size(); }
  void end_template() { template_.assign(pending_.begin() + std::ptrdiff_t(template_from_), pending_.end()); }
  void drop_template_spans() { pending_.resize(template_from_), template_.clear(); }
  // Keeps the template but records none of it now (a capture ran nothing).
  void discard_template_pending() { pending_.resize(template_from_); }
  void add_template(std::int32_t step, std::int64_t host_start_ns);
  // Waits for the device and records every pending span with its host times. A span that
  // started on the host clock (a batch load) starts on the compute lane no earlier than
  // the device finished the span before it: the host may prepare a batch while the device
  // still runs earlier work, and that stretch is the device's, not the load's.
  void flush();

 private:
  static constexpr std::int32_t kHostStart = -1;
  struct Pending {
    trace::Event event;
    std::int32_t start, end;  // stamps; start kHostStart: event.start_ns is already set
  };
  kernels::Backend& backend_;
  trace::Recorder& recorder_;
  std::vector<Pending> pending_;
  std::vector<Pending> template_;
  std::size_t template_from_ = 0;
};

// A batch's load: from the host starting to prepare it to the device holding it (its
// upload from page-locked memory is asynchronous, so a host-timed span would end when the
// copy was queued, and the copy would fall between the data span and the first layer).
// Host-timed, like trace::Span, where there is no DeviceTrace.
class BatchLoadSpan {
 public:
  BatchLoadSpan(trace::Recorder* recorder, DeviceTrace* device, std::int32_t step, std::int16_t microbatch = -1)
      : recorder_(recorder), device_(device) {
    event_ = trace::span_event(trace::EventKind::DataLoad, trace::Stream::Compute, step, -1, microbatch);
    if (recorder_) event_.start_ns = trace::now_ns();
  }
  // Around the batch's upload (load_batch): on a device, the copy's own span on the copy
  // lane, from a stamp just before it was queued to one just after.
  void upload_starts() {
    if (recorder_ && device_) upload_start_ = device_->stamp();
  }
  void upload_ends(std::int64_t bytes) {
    if (!recorder_ || !device_) return;
    upload_end_ = device_->stamp();
    trace::Event copy = event_;
    copy.kind = trace::EventKind::Copy;
    copy.stream = trace::Stream::Copy;
    copy.bytes = bytes;
    device_->add(copy, upload_start_, upload_end_);
  }
  ~BatchLoadSpan() {
    if (!recorder_) return;
    if (device_) {
      device_->add_host_started(event_, upload_end_ >= 0 ? upload_end_ : device_->stamp());
      return;
    }
    event_.end_ns = trace::now_ns();
    recorder_->record(event_);
  }
  BatchLoadSpan(const BatchLoadSpan&) = delete;
  BatchLoadSpan& operator=(const BatchLoadSpan&) = delete;
  trace::Event& event() { return event_; }  // to set bytes

 private:
  trace::Recorder* recorder_;
  DeviceTrace* device_;
  trace::Event event_;
  std::int32_t upload_start_ = -1, upload_end_ = -1;
};

// A span of work queued on the rank's device, on the compute lane: between two stamps
// where there is a DeviceTrace (its start stamp marks the end of the work queued before,
// so spans on the lane never overlap), host-timed by a trace::Span on the CPU, where the
// work is done when its call returns.
class ComputeSpan {
 public:
  ComputeSpan(trace::Recorder* recorder, DeviceTrace* device, trace::EventKind kind, std::int32_t step,
              std::int32_t layer = -1, std::int16_t microbatch = -1)
      : host_(device ? nullptr : recorder, kind, trace::Stream::Compute, step, layer, microbatch), device_(device) {
    if (!device_) return;
    event_ = trace::span_event(kind, trace::Stream::Compute, step, layer, microbatch);
    start_ = device_->stamp();
  }
  ~ComputeSpan() {
    if (device_) device_->add(event_, start_, device_->stamp());
  }
  ComputeSpan(const ComputeSpan&) = delete;
  ComputeSpan& operator=(const ComputeSpan&) = delete;

 private:
  trace::Span host_;
  DeviceTrace* device_;
  trace::Event event_;
  std::int32_t start_ = 0;
};

// Where a span of the host waiting (for a peer, a collective, a server) goes. On the CPU
// the waiting thread is the one that computes, so the compute lane; on a traced device the
// device may still be working through what was queued, and the compute lane is the
// device's, so the host lane (the device's own time stays its spans').
inline trace::Stream waiting_stream(const DeviceTrace* device) {
  return device ? trace::Stream::Host : trace::Stream::Compute;
}

// The spans of a run of layers, back to back like trace::SpanChain: stamped on the device
// when there is a DeviceTrace, else host-timed by a SpanChain on `recorder` (no-op if null).
class LayerSpans {
 public:
  LayerSpans(trace::Recorder* recorder, DeviceTrace* device) : host_(device ? nullptr : recorder), device_(device) {}
  ~LayerSpans() { close(); }
  LayerSpans(const LayerSpans&) = delete;
  LayerSpans& operator=(const LayerSpans&) = delete;

  void next(trace::EventKind kind, trace::Stream stream, std::int32_t step, std::int32_t layer, std::int16_t microbatch) {
    if (!device_) return host_.next(kind, stream, step, layer, microbatch);
    const std::int32_t at = device_->stamp();
    end_open(at);
    open_ = trace::span_event(kind, stream, step, layer, microbatch);
    open_start_ = at;
    is_open_ = true;
  }
  void close() {
    host_.close();
    if (device_ && is_open_) end_open(device_->stamp());
  }

 private:
  void end_open(std::int32_t at) {
    if (!is_open_) return;
    device_->add(open_, open_start_, at);
    is_open_ = false;
  }

  trace::SpanChain host_;
  DeviceTrace* device_;
  trace::Event open_;
  std::int32_t open_start_ = 0;
  bool is_open_ = false;
};

}  // namespace loom::engine
