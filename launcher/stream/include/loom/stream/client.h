// The rank side of the live stream: a blocking TCP connection to the host's stream
// server and the RunSink that turns a rank's record into frames on it. A rank under
// mpirun uses this instead of a local run store, so the engine's RunWriter never knows
// whether it writes to SQLite or to the network.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loom/core/status.h"
#include "loom/stream/frame.h"
#include "loom/trace/run_sink.h"

namespace loom::stream {

// connect() resolves "host:port" (getaddrinfo; "[v6addr]:port" for IPv6 literals),
// connects with a timeout and sends the Hello. send() writes a whole frame, handling
// partial writes and EINTR; MSG_NOSIGNAL makes a dead host an error, not SIGPIPE.
class StreamClient {
 public:
  static Expected<std::unique_ptr<StreamClient>> connect(const std::string& endpoint, const Hello& hello,
                                                          std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~StreamClient();  // closes the socket
  StreamClient(const StreamClient&) = delete;
  StreamClient& operator=(const StreamClient&) = delete;

  // Thread-safe: the writer thread and the main thread both send; frames never interleave.
  Status send(const std::string& frame);
  void close();

 private:
  explicit StreamClient(int fd, std::string endpoint) : fd_(fd), endpoint_(std::move(endpoint)) {}

  std::mutex mutex_;
  int fd_ = -1;
  std::string endpoint_;  // for error messages
};

// The rank-side RunSink: events, metrics and updates become frames on the client. It also sends
// the other frames so that a rank has one object to talk to. The rank of every frame is
// the one named in the connection's Hello; write_events' `rank` argument is not sent.
class StreamSink final : public trace::RunSink {
 public:
  explicit StreamSink(StreamClient& client) : client_(client) {}
  Status write_events(int rank, const trace::Event* events, std::size_t count) override;  // frames <= kMaxPayloadBytes
  Status write_metrics(const std::vector<trace::MetricRecord>& metrics) override;        // likewise
  Status write_updates(const std::vector<trace::UpdateRecord>& updates) override;        // likewise
  Status write_log(const std::string& text);
  Status write_clock(const ClockInfo& clock);
  Status write_done(const Done& done);
  Status write_device(const trace::DeviceInfo& info);  // once the rank's device is open

 private:
  StreamClient& client_;
};

}  // namespace loom::stream
