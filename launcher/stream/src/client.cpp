// The rank side of the live stream: connect to the host with a timeout, send whole frames
// under a mutex (the RunWriter thread and the rank's main thread share one connection),
// and split large batches so every frame stays under the decoder's payload limit.
#include "loom/stream/client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "socket_util.h"

namespace loom::stream {

namespace {

using detail::errno_text;

// Non-blocking connect + poll, so an unreachable host fails after `timeout` rather than
// after the kernel's minutes-long SYN retries. Returns the errno text on failure.
std::string connect_with_timeout(int fd, const addrinfo& ai, std::chrono::milliseconds timeout) {
  if (Status s = detail::set_nonblocking(fd, true); !s.ok()) return s.error().message;
  if (::connect(fd, ai.ai_addr, ai.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return errno_text(errno);
    pollfd p{fd, POLLOUT, 0};
    int ready;
    do ready = ::poll(&p, 1, int(timeout.count()));
    while (ready < 0 && errno == EINTR);
    if (ready == 0) return "timed out after " + std::to_string(timeout.count()) + " ms";
    if (ready < 0) return errno_text(errno);
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno_text(errno);
    if (err != 0) return errno_text(err);
  }
  if (Status s = detail::set_nonblocking(fd, false); !s.ok()) return s.error().message;
  return {};
}

// Tries every address the name resolves to; returns a connected, blocking socket.
Expected<int> open_connection(const std::string& endpoint, std::chrono::milliseconds timeout) {
  std::string host, port;
  LOOM_TRY(detail::split_endpoint(endpoint, host, port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return make_error(ErrorCode::NotFound, "cannot resolve stream endpoint " + endpoint + ": " + gai_strerror(rc),
                      "check the host name the launcher passed to the ranks");
  std::string last_error = "no addresses";
  int fd = -1;
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = errno_text(errno);
      continue;
    }
    last_error = connect_with_timeout(fd, *ai, timeout);
    if (!last_error.empty()) {
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0)
    return make_error(ErrorCode::Unavailable, "cannot connect to the host's stream server at " + endpoint + ": " + last_error,
                      "is the host still running, and is the port reachable from this machine (firewall)?");
  // Frames are written whole; Nagle would only add latency to small log/clock frames.
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

Expected<std::unique_ptr<StreamClient>> StreamClient::connect(const std::string& endpoint, const Hello& hello,
                                                              std::chrono::milliseconds timeout) {
  auto fd = open_connection(endpoint, timeout);
  if (!fd.ok()) return fd.error();
  std::unique_ptr<StreamClient> client(new StreamClient(*fd, endpoint));
  LOOM_TRY(client->send(encode(hello)));
  return Expected<std::unique_ptr<StreamClient>>(std::move(client));
}

StreamClient::~StreamClient() { close(); }

Status StreamClient::send(const std::string& frame) {
  std::lock_guard lock(mutex_);
  if (fd_ < 0) return make_error(ErrorCode::Io, "stream to " + endpoint_ + " is closed");
  const char* p = frame.data();
  std::size_t left = frame.size();
  while (left > 0) {
    const ssize_t n = ::send(fd_, p, left, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return make_error(ErrorCode::Io, "sending to the host at " + endpoint_ + " failed: " + errno_text(errno),
                        "the host closed the connection (it stopped, or rejected this rank: see its log)");
    p += n;
    left -= std::size_t(n);
  }
  return {};
}

void StreamClient::close() {
  std::lock_guard lock(mutex_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// ---- StreamSink --------------------------------------------------------------------

Status StreamSink::write_events(int /*rank: fixed by the Hello*/, const trace::Event* events, std::size_t count) {
  while (count > 0) {
    const std::size_t n = std::min(count, kMaxEventsPerFrame);
    LOOM_TRY(client_.send(encode_events(events, n)));
    events += n;
    count -= n;
  }
  return {};
}

Status StreamSink::write_metrics(const std::vector<trace::MetricRecord>& metrics) {
  // Usually one frame; split (copying) only when the names would pass the payload limit.
  std::size_t total = 4;
  for (const auto& m : metrics) total += 32 + std::min<std::size_t>(m.name.size(), kMaxStringBytes);
  if (metrics.empty()) return {};
  if (total <= kMaxPayloadBytes) return client_.send(encode_metrics(metrics));
  std::vector<trace::MetricRecord> part;
  std::size_t part_bytes = 4;
  for (const auto& m : metrics) {
    const std::size_t bytes = 32 + std::min<std::size_t>(m.name.size(), kMaxStringBytes);
    if (part_bytes + bytes > kMaxPayloadBytes) {
      LOOM_TRY(client_.send(encode_metrics(part)));
      part.clear();
      part_bytes = 4;
    }
    part.push_back(m);
    part_bytes += bytes;
  }
  if (!part.empty()) LOOM_TRY(client_.send(encode_metrics(part)));
  return {};
}

Status StreamSink::write_updates(const std::vector<trace::UpdateRecord>& updates) {
  const trace::UpdateRecord* next = updates.data();
  std::size_t left = updates.size();
  while (left > 0) {  // fixed-size records: split by count
    const std::size_t n = std::min(left, kMaxUpdatesPerFrame);
    LOOM_TRY(client_.send(encode_updates(next, n)));
    next += n;
    left -= n;
  }
  return {};
}

Status StreamSink::write_log(const std::string& text) { return client_.send(encode(LogLine{text})); }
Status StreamSink::write_clock(const ClockInfo& clock) { return client_.send(encode(clock)); }
Status StreamSink::write_done(const Done& done) { return client_.send(encode(done)); }
Status StreamSink::write_device(const trace::DeviceInfo& info) { return client_.send(encode(DeviceReport{info})); }

}  // namespace loom::stream
