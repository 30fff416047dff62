// The wire protocol between rank processes and the host: length-prefixed binary frames
// over TCP. Ranks may run on other machines with no shared file system, so everything a
// run records (events, metrics, updates, log lines, clock estimates, the device's
// identity, the final status) travels as one of these frames and the host writes it into
// the run store.
//
// A frame is a 16-byte header (magic u32, version u16, type u16, payload_bytes u32,
// reserved u32 = 0) followed by the payload. Integers are little-endian, doubles are
// their IEEE bits, strings are u32 length + bytes. Events go as raw 48-byte structs: rank
// and host share the architecture, and the magic+version check catches foreign peers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "loom/core/status.h"
#include "loom/trace/event.h"
#include "loom/trace/records.h"

namespace loom::stream {

inline constexpr std::uint32_t kMagic = 0x4d4f4f4cu;  // "LOOM" as little-endian bytes
// 2: the Device frame (a rank's device identity) was added. 3: it ends with the machine's
// boot id.
inline constexpr std::uint16_t kProtocolVersion = 3;
inline constexpr std::size_t kHeaderBytes = 16;
inline constexpr std::uint32_t kMaxPayloadBytes = 16u << 20;
inline constexpr std::uint32_t kMaxStringBytes = 1u << 20;  // encoders truncate, the decoder rejects
inline constexpr std::size_t kSecretHexChars = 64;          // 32 random bytes, hex

enum class FrameType : std::uint16_t {
  Hello = 1, Events = 2, Metrics = 3, Log = 4, Clock = 5, Done = 6, Updates = 7, Device = 8
};
inline constexpr std::uint16_t kLastFrameType = 8;

struct Hello {  // first frame on every connection
  std::string secret;  // must equal the run's secret (compared in constant time)
  std::int64_t run_id = 0;
  std::int32_t rank = 0, world_size = 1, pid = 0;
  std::string host, device;
};

struct ClockInfo {  // this rank's clock relative to rank 0, estimated by ping-pong at start and end
  std::int64_t offset_start_ns = 0, offset_end_ns = 0;  // rank clock minus rank-0 clock
  std::int64_t sync_start_ns = 0, sync_end_ns = 0;      // this rank's clock at the two estimates (end 0 = not yet)
  std::int64_t uncertainty_ns = 0;                      // half the best round trip (max of the two)
  std::int64_t t0_ns = 0;                               // this rank's clock at training start
};

struct LogLine {
  std::string text;
};

// A rank's end. Its status travels as text (trace::to_text); a frame with any status but
// completed, failed or stopped does not decode.
struct Done {
  std::int64_t events_recorded = 0;
  trace::RunStatus status = trace::RunStatus::Failed;
  std::string error;
};

struct EventBatch {
  std::vector<trace::Event> events;
};

struct MetricBatch {
  std::vector<trace::MetricRecord> metrics;
};

// Gradients a parameter-server rank applied (asynchronous modes); stored as sent, since
// one server speaks for every worker whose gradient it applied.
struct UpdateBatch {
  std::vector<trace::UpdateRecord> updates;
};

// What the rank's device is (trace::DeviceInfo), sent once the device is open. Its texts
// are at most trace::kMaxDeviceTextBytes and its counts at most trace::kMaxDeviceCount
// (encoders cut, the decoder refuses); kind must be "cpu" or "gpu".
struct DeviceReport {
  trace::DeviceInfo info;
};

// The variant's order is FrameType's order (index = type - 1).
using Frame = std::variant<Hello, EventBatch, MetricBatch, LogLine, ClockInfo, Done, UpdateBatch, DeviceReport>;

// Encoders return one complete frame (header + payload) as bytes. Strings longer than
// kMaxStringBytes are truncated. The caller keeps payloads under kMaxPayloadBytes
// (StreamSink splits large batches); a larger frame is refused by the decoder.
std::string encode(const Hello& hello);
std::string encode(const ClockInfo& clock);
std::string encode(const LogLine& line);
std::string encode(const Done& done);
std::string encode(const DeviceReport& device);
std::string encode_events(const trace::Event* events, std::size_t count);
std::string encode_metrics(const std::vector<trace::MetricRecord>& metrics);
std::string encode_updates(const std::vector<trace::UpdateRecord>& updates);
std::string encode_updates(const trace::UpdateRecord* updates, std::size_t count);  // a slice, for splitting

// Events that fit in one frame's payload (u32 count + 48 bytes each).
inline constexpr std::size_t kMaxEventsPerFrame = (kMaxPayloadBytes - 4) / sizeof(trace::Event);
// Updates that fit in one frame's payload (u32 count + 2 x i32 + 5 x i64 each).
inline constexpr std::size_t kUpdateWireBytes = 2 * 4 + 5 * 8;
inline constexpr std::size_t kMaxUpdatesPerFrame = (kMaxPayloadBytes - 4) / kUpdateWireBytes;

// Incremental decoder for one connection: feed whatever recv() returned; complete frames
// are appended to `out`. The first malformed frame returns an error naming what was
// wrong (frames decoded before it are still appended); after an error the decoder refuses
// further input. Never reads out of bounds, never throws, never holds more than one
// frame's declared (bounded) payload.
class FrameDecoder {
 public:
  Status feed(const char* data, std::size_t size, std::vector<Frame>& out);
  std::size_t buffered() const { return buffer_.size(); }  // bytes of an incomplete frame held back

 private:
  Status fail(Error error);

  std::string buffer_;  // the start of a frame whose remaining bytes have not arrived
  bool failed_ = false;
  Error error_;
};

std::string random_secret();  // kSecretHexChars hex chars from std::random_device

}  // namespace loom::stream
