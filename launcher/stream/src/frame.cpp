// Encoding and incremental decoding of stream frames. The decoder faces the network (the
// host may listen on 0.0.0.0), so every length is checked against what is actually there
// before it is used, and nothing is allocated beyond the declared, bounded payload.
#include "loom/stream/frame.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <random>

namespace loom::stream {

static_assert(std::endian::native == std::endian::little,
              "events travel as raw structs; the protocol assumes little-endian peers");

namespace {

const char* type_name(FrameType type) {
  switch (type) {
    case FrameType::Hello: return "Hello";
    case FrameType::Events: return "Events";
    case FrameType::Metrics: return "Metrics";
    case FrameType::Log: return "Log";
    case FrameType::Clock: return "Clock";
    case FrameType::Done: return "Done";
    case FrameType::Updates: return "Updates";
    case FrameType::Device: return "Device";
  }
  return "unknown";
}

// ---- encoding ----------------------------------------------------------------------

class Writer {
 public:
  explicit Writer(FrameType type, std::size_t payload_hint = 0) {
    out_.reserve(kHeaderBytes + payload_hint);
    u32(kMagic);
    u16(kProtocolVersion);
    u16(static_cast<std::uint16_t>(type));
    u32(0);  // payload_bytes, patched by finish()
    u32(0);  // reserved
  }
  void u16(std::uint16_t v) { put(v, 2); }
  void u32(std::uint32_t v) { put(v, 4); }
  void i32(std::int32_t v) { put(static_cast<std::uint32_t>(v), 4); }
  void i64(std::int64_t v) { put(static_cast<std::uint64_t>(v), 8); }
  void f64(double v) { put(std::bit_cast<std::uint64_t>(v), 8); }
  void str(const std::string& s) {
    const std::size_t n = std::min<std::size_t>(s.size(), kMaxStringBytes);
    u32(static_cast<std::uint32_t>(n));
    out_.append(s.data(), n);
  }
  void raw(const void* data, std::size_t size) { out_.append(static_cast<const char*>(data), size); }
  std::string finish() {
    const auto payload = static_cast<std::uint32_t>(out_.size() - kHeaderBytes);
    for (int i = 0; i < 4; ++i) out_[8 + i] = static_cast<char>((payload >> (8 * i)) & 0xff);
    return std::move(out_);
  }

 private:
  void put(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

// ---- decoding ----------------------------------------------------------------------

struct Header {
  FrameType type;
  std::uint32_t payload_bytes;
};

std::uint64_t load_le(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

Expected<Header> parse_header(const char* p) {
  const auto magic = static_cast<std::uint32_t>(load_le(p, 4));
  const auto version = static_cast<std::uint16_t>(load_le(p + 4, 2));
  const auto type = static_cast<std::uint16_t>(load_le(p + 6, 2));
  const auto payload = static_cast<std::uint32_t>(load_le(p + 8, 4));
  const auto reserved = static_cast<std::uint32_t>(load_le(p + 12, 4));
  if (magic != kMagic) return make_error(ErrorCode::Corrupt, "bad magic " + hex32(magic) + " (not a Loom stream)");
  if (version != kProtocolVersion)
    return make_error(ErrorCode::Corrupt, "unsupported protocol version " + std::to_string(version) +
                                              " (this build speaks " + std::to_string(kProtocolVersion) + ")");
  if (type < 1 || type > kLastFrameType) return make_error(ErrorCode::Corrupt, "unknown frame type " + std::to_string(type));
  if (payload > kMaxPayloadBytes)
    return make_error(ErrorCode::Corrupt, "payload of " + std::to_string(payload) + " bytes exceeds the limit of " +
                                              std::to_string(kMaxPayloadBytes));
  if (reserved != 0) return make_error(ErrorCode::Corrupt, "reserved header field is " + std::to_string(reserved) + ", expected 0");
  return Header{static_cast<FrameType>(type), payload};
}

// Bounds-checked cursor over one payload. The first failure sticks and is described in
// error_; later reads return zeros so decoders can read all fields and check once.
class Reader {
 public:
  Reader(const char* data, std::size_t size) : p_(data), end_(data + size) {}
  std::uint32_t u32() { return static_cast<std::uint32_t>(take(4)); }
  std::int32_t i32() { return static_cast<std::int32_t>(static_cast<std::uint32_t>(take(4))); }
  std::int64_t i64() { return static_cast<std::int64_t>(take(8)); }
  double f64() { return std::bit_cast<double>(take(8)); }
  std::string str() {
    const std::uint32_t n = u32();
    if (!error_.empty()) return {};
    if (n > kMaxStringBytes) {
      fail("string length " + std::to_string(n) + " exceeds the 1 MiB cap");
      return {};
    }
    if (n > left()) {
      fail("string length " + std::to_string(n) + " past the end of the payload (" + std::to_string(left()) +
           " bytes left)");
      return {};
    }
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  const char* raw(std::size_t n) {
    const char* at = p_;
    p_ += n;  // callers check left() first
    return at;
  }
  std::size_t left() const { return std::size_t(end_ - p_); }
  void fail(std::string what) {
    if (error_.empty()) error_ = std::move(what);
  }
  // The decoded value or the first problem; trailing bytes are a problem too.
  Status finish() {
    if (error_.empty() && left() != 0) fail(std::to_string(left()) + " trailing bytes after the last field");
    if (error_.empty()) return {};
    return make_error(ErrorCode::Corrupt, error_);
  }

 private:
  std::uint64_t take(int bytes) {
    if (!error_.empty()) return 0;
    if (left() < std::size_t(bytes)) {
      fail("payload ends inside a " + std::to_string(8 * bytes) + "-bit field");
      return 0;
    }
    const std::uint64_t v = load_le(p_, bytes);
    p_ += bytes;
    return v;
  }
  const char* p_;
  const char* end_;
  std::string error_;
};

Frame read_hello(Reader& r) {
  Hello h;
  h.secret = r.str();
  h.run_id = r.i64();
  h.rank = r.i32();
  h.world_size = r.i32();
  h.pid = r.i32();
  h.host = r.str();
  h.device = r.str();
  return h;
}

Frame read_events(Reader& r) {
  EventBatch batch;
  const std::uint32_t count = r.u32();
  const std::uint64_t need = std::uint64_t(count) * sizeof(trace::Event);
  if (need != r.left()) {
    r.fail(std::to_string(count) + " events need " + std::to_string(need) + " bytes, the payload has " +
           std::to_string(r.left()) + " after the count");
    return batch;
  }
  batch.events.resize(count);
  if (count > 0) std::memcpy(batch.events.data(), r.raw(need), need);
  return batch;
}

Frame read_metrics(Reader& r) {
  constexpr std::size_t kMinMetricBytes = 4 + 8 + 8 + 8 + 4;
  MetricBatch batch;
  const std::uint32_t count = r.u32();
  // Checked before reserving, so a lying count cannot make us allocate beyond the payload.
  if (std::uint64_t(count) * kMinMetricBytes > r.left()) {
    r.fail(std::to_string(count) + " metrics cannot fit in the " + std::to_string(r.left()) + " bytes left");
    return batch;
  }
  batch.metrics.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    trace::MetricRecord m;
    m.rank = r.i32();
    m.step = r.i64();
    m.t_ns = r.i64();
    m.value = r.f64();
    m.name = r.str();
    batch.metrics.push_back(std::move(m));
  }
  return batch;
}

Frame read_updates(Reader& r) {
  UpdateBatch batch;
  const std::uint32_t count = r.u32();
  // Fixed-size records: the count must account for the payload exactly.
  const std::uint64_t need = std::uint64_t(count) * kUpdateWireBytes;
  if (need != r.left()) {
    r.fail(std::to_string(count) + " updates need " + std::to_string(need) + " bytes, the payload has " +
           std::to_string(r.left()) + " after the count");
    return batch;
  }
  batch.updates.resize(count);
  for (trace::UpdateRecord& u : batch.updates) {
    u.worker = r.i32();
    u.server = r.i32();
    u.step = r.i64();
    u.version_read = r.i64();
    u.version_applied = r.i64();
    u.staleness = r.i64();
    u.t_ns = r.i64();
  }
  return batch;
}

Frame read_clock(Reader& r) {
  ClockInfo c;
  c.offset_start_ns = r.i64();
  c.offset_end_ns = r.i64();
  c.sync_start_ns = r.i64();
  c.sync_end_ns = r.i64();
  c.uncertainty_ns = r.i64();
  c.t0_ns = r.i64();
  return c;
}

Frame read_done(Reader& r) {
  Done d;
  d.events_recorded = r.i64();
  const std::string status = r.str();
  d.error = r.str();
  const auto known = trace::run_status_from(status);
  if (known == trace::RunStatus::Completed || known == trace::RunStatus::Failed || known == trace::RunStatus::Stopped)
    d.status = *known;
  else
    r.fail("status '" + status.substr(0, 64) + "' is not completed|failed|stopped");
  return d;
}

// A device text: bounded tighter than other strings, since nothing about a device is long.
std::string device_text(Reader& r, const char* field) {
  std::string s = r.str();
  if (s.size() > trace::kMaxDeviceTextBytes)
    r.fail(std::string("device ") + field + " of " + std::to_string(s.size()) + " bytes exceeds " +
           std::to_string(trace::kMaxDeviceTextBytes));
  return s;
}

int device_count(Reader& r, const char* field) {
  const std::int32_t v = r.i32();
  if (v < 0 || v > trace::kMaxDeviceCount)
    r.fail(std::string("device ") + field + " " + std::to_string(v) + " outside 0.." + std::to_string(trace::kMaxDeviceCount));
  return v;
}

Frame read_device(Reader& r) {
  DeviceReport d;
  trace::DeviceInfo& i = d.info;
  i.kind = device_text(r, "kind");
  i.name = device_text(r, "name");
  i.memory_bytes = r.i64();
  i.logical_cores = device_count(r, "cores");
  i.blas_threads = device_count(r, "BLAS threads");
  i.compute_major = device_count(r, "compute capability");
  i.compute_minor = device_count(r, "compute capability");
  i.driver = device_text(r, "driver");
  i.cuda_driver = device_text(r, "CUDA driver");
  i.cuda_runtime = device_text(r, "CUDA runtime");
  i.nccl = device_text(r, "NCCL version");
  i.machine = device_text(r, "machine");
  if (i.memory_bytes < 0) r.fail("device memory of " + std::to_string(i.memory_bytes) + " bytes");
  if (i.kind != "cpu" && i.kind != "gpu") r.fail("device kind '" + i.kind.substr(0, 16) + "' is not cpu|gpu");
  return d;
}

Expected<Frame> decode_payload(FrameType type, const char* data, std::size_t size) {
  Reader r(data, size);
  Frame frame;
  switch (type) {
    case FrameType::Hello: frame = read_hello(r); break;
    case FrameType::Events: frame = read_events(r); break;
    case FrameType::Metrics: frame = read_metrics(r); break;
    case FrameType::Log: frame = LogLine{r.str()}; break;
    case FrameType::Clock: frame = read_clock(r); break;
    case FrameType::Done: frame = read_done(r); break;
    case FrameType::Updates: frame = read_updates(r); break;
    case FrameType::Device: frame = read_device(r); break;
  }
  Status s = r.finish();
  if (!s.ok()) return make_error(ErrorCode::Corrupt, std::string(type_name(type)) + " frame: " + s.error().message);
  return frame;
}

}  // namespace

// ---- encoders ----------------------------------------------------------------------

std::string encode(const Hello& hello) {
  Writer w(FrameType::Hello, 64 + hello.secret.size() + hello.host.size() + hello.device.size());
  w.str(hello.secret);
  w.i64(hello.run_id);
  w.i32(hello.rank);
  w.i32(hello.world_size);
  w.i32(hello.pid);
  w.str(hello.host);
  w.str(hello.device);
  return w.finish();
}

std::string encode(const ClockInfo& clock) {
  Writer w(FrameType::Clock, 48);
  for (std::int64_t v : {clock.offset_start_ns, clock.offset_end_ns, clock.sync_start_ns, clock.sync_end_ns,
                         clock.uncertainty_ns, clock.t0_ns})
    w.i64(v);
  return w.finish();
}

std::string encode(const LogLine& line) {
  Writer w(FrameType::Log, 4 + line.text.size());
  w.str(line.text);
  return w.finish();
}

std::string encode(const Done& done) {
  const std::string status(trace::to_text(done.status));
  Writer w(FrameType::Done, 16 + status.size() + done.error.size());
  w.i64(done.events_recorded);
  w.str(status);
  w.str(done.error);
  return w.finish();
}

std::string encode(const DeviceReport& device) {
  const trace::DeviceInfo& i = device.info;
  // Cut to the decoder's bounds here, so a strange /proc/cpuinfo cannot fail the stream.
  auto text = [](const std::string& s) { return s.substr(0, trace::kMaxDeviceTextBytes); };
  auto count = [](int v) { return std::clamp(v, 0, trace::kMaxDeviceCount); };
  Writer w(FrameType::Device, 64 + i.name.size());
  w.str(text(i.kind));
  w.str(text(i.name));
  w.i64(std::max<std::int64_t>(i.memory_bytes, 0));
  for (int v : {i.logical_cores, i.blas_threads, i.compute_major, i.compute_minor}) w.i32(count(v));
  for (const std::string* s : {&i.driver, &i.cuda_driver, &i.cuda_runtime, &i.nccl, &i.machine}) w.str(text(*s));
  return w.finish();
}

std::string encode_events(const trace::Event* events, std::size_t count) {
  Writer w(FrameType::Events, 4 + count * sizeof(trace::Event));
  w.u32(static_cast<std::uint32_t>(count));
  if (count > 0) w.raw(events, count * sizeof(trace::Event));
  return w.finish();
}

std::string encode_metrics(const std::vector<trace::MetricRecord>& metrics) {
  std::size_t hint = 4;
  for (const auto& m : metrics) hint += 32 + m.name.size();
  Writer w(FrameType::Metrics, hint);
  w.u32(static_cast<std::uint32_t>(metrics.size()));
  for (const auto& m : metrics) {
    w.i32(m.rank);
    w.i64(m.step);
    w.i64(m.t_ns);
    w.f64(m.value);
    w.str(m.name);
  }
  return w.finish();
}

std::string encode_updates(const trace::UpdateRecord* updates, std::size_t count) {
  Writer w(FrameType::Updates, 4 + count * kUpdateWireBytes);
  w.u32(static_cast<std::uint32_t>(count));
  for (std::size_t i = 0; i < count; ++i) {
    const trace::UpdateRecord& u = updates[i];
    w.i32(u.worker);
    w.i32(u.server);
    for (std::int64_t v : {u.step, u.version_read, u.version_applied, u.staleness, u.t_ns}) w.i64(v);
  }
  return w.finish();
}

std::string encode_updates(const std::vector<trace::UpdateRecord>& updates) {
  return encode_updates(updates.data(), updates.size());
}

// ---- decoder -----------------------------------------------------------------------

Status FrameDecoder::fail(Error error) {
  failed_ = true;
  buffer_.clear();
  buffer_.shrink_to_fit();
  error_ = std::move(error);
  return error_;
}

Status FrameDecoder::feed(const char* data, std::size_t size, std::vector<Frame>& out) {
  if (failed_) return make_error(error_.code, "stream already failed: " + error_.message);
  while (size > 0) {
    // Fast path: frames wholly inside the input are decoded in place, without copying.
    if (buffer_.empty() && size >= kHeaderBytes) {
      auto header = parse_header(data);
      if (!header.ok()) return fail(header.error());
      const std::size_t total = kHeaderBytes + header->payload_bytes;
      if (size >= total) {
        auto frame = decode_payload(header->type, data + kHeaderBytes, header->payload_bytes);
        if (!frame.ok()) return fail(frame.error());
        out.push_back(std::move(frame).value());
        data += total;
        size -= total;
        continue;
      }
    }
    // Slow path: gather one frame's bytes (first the header, then exactly its payload).
    std::size_t want = kHeaderBytes;
    if (buffer_.size() >= kHeaderBytes) {
      auto header = parse_header(buffer_.data());
      if (!header.ok()) return fail(header.error());
      want = kHeaderBytes + header->payload_bytes;
    }
    const std::size_t take = std::min(size, want - buffer_.size());
    // Grow with what arrived, never past the declared frame: a peer that announces 16 MiB
    // and sends little costs little.
    if (buffer_.capacity() < buffer_.size() + take)
      buffer_.reserve(std::min(want, std::max(2 * buffer_.capacity(), buffer_.size() + take)));
    buffer_.append(data, take);
    data += take;
    size -= take;
    if (buffer_.size() == kHeaderBytes) {
      auto header = parse_header(buffer_.data());  // reject early, before the payload arrives
      if (!header.ok()) return fail(header.error());
      want = kHeaderBytes + header->payload_bytes;
    }
    if (buffer_.size() < want) continue;
    auto header = parse_header(buffer_.data());
    auto frame = decode_payload(header->type, buffer_.data() + kHeaderBytes, header->payload_bytes);
    if (!frame.ok()) return fail(frame.error());
    out.push_back(std::move(frame).value());
    buffer_.clear();
  }
  return {};
}

std::string random_secret() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device device;
  std::string secret;
  secret.reserve(kSecretHexChars);
  while (secret.size() < kSecretHexChars) {
    const std::uint32_t word = device();
    for (int i = 0; i < 4 && secret.size() < kSecretHexChars; ++i) {
      const unsigned byte = (word >> (8 * i)) & 0xff;
      secret.push_back(kHex[byte >> 4]);
      secret.push_back(kHex[byte & 0xf]);
    }
  }
  return secret;
}

}  // namespace loom::stream
