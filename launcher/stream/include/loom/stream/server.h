// The host side of the live stream: one thread that accepts the ranks' connections,
// checks each Hello against the run (secret, run id, rank range), decodes frames and
// hands them to a StreamHandler, which writes the run store. A misbehaving peer is
// rejected and disconnected; it never stops the server or disturbs other ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/status.h"
#include "loom/stream/frame.h"

namespace loom::stream {

// Called on the server's thread, in arrival order per connection.
class StreamHandler {
 public:
  virtual ~StreamHandler() = default;
  virtual void on_hello(const Hello& hello) = 0;  // accepted (secret, run id, rank range checked)
  virtual void on_events(int rank, std::vector<trace::Event>&& events) = 0;
  virtual void on_metrics(int rank, std::vector<trace::MetricRecord>&& metrics) = 0;
  virtual void on_updates(int rank, std::vector<trace::UpdateRecord>&& updates) = 0;  // from a server rank
  virtual void on_log(int rank, const std::string& text) = 0;
  virtual void on_clock(int rank, const ClockInfo& clock) = 0;
  virtual void on_device(int rank, const trace::DeviceInfo& device) = 0;  // its device, once open
  virtual void on_done(int rank, const Done& done) = 0;
  // An accepted rank's connection closed before its Done frame (the rank died or was
  // killed), or was dropped for a malformed frame (then on_rejected comes first).
  virtual void on_lost(int rank, const std::string& reason) = 0;
  // A connection refused or dropped for cause: wrong secret, wrong run id, rank out of
  // range or already connected, a first frame that is not Hello, no Hello in time, a
  // malformed or truncated frame, a frame after Done. The connection is closed.
  virtual void on_rejected(const std::string& peer, const std::string& reason) = 0;
  virtual void on_tick() {}  // at least every 50 ms, for batching/flushing on the server thread
};

struct ServerOptions {
  std::string bind_address = "127.0.0.1";  // loopback by default; "0.0.0.0" when ranks run on other hosts
  int port = 0;                            // 0 = any free port
  std::string secret;                      // required, kSecretHexChars hex chars
  std::int64_t run_id = 0;
  int world_size = 1;
  std::chrono::milliseconds hello_timeout = std::chrono::seconds(10);  // a silent connection is rejected after this
};

class StreamServer {
 public:
  // Binds, listens and starts the thread; the handler must outlive the server.
  static Expected<std::unique_ptr<StreamServer>> start(const ServerOptions& options, StreamHandler& handler);
  ~StreamServer();  // stop()
  StreamServer(const StreamServer&) = delete;
  StreamServer& operator=(const StreamServer&) = delete;

  int port() const;
  // Processes what has already arrived (one bounded read per connection), then joins the
  // thread and closes every socket; idempotent. Ranks still connected get no on_lost.
  void stop();
  int ranks_connected() const;  // accepted Hellos so far

 private:
  struct Impl;
  explicit StreamServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::stream
