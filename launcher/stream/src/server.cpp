// The host's stream server: one thread polls the listening socket, a wakeup pipe and every
// rank connection (all non-blocking). Each connection has its own decoder and a small
// state machine: awaiting Hello -> accepted rank -> Done. Whatever a peer does wrong
// costs only that peer its connection; the handler hears about it through on_rejected.
#include "loom/stream/server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <iterator>
#include <mutex>
#include <thread>
#include <variant>

#include "socket_util.h"

namespace loom::stream {

namespace {

using Clock = std::chrono::steady_clock;
using detail::errno_text;

constexpr auto kTickPeriod = std::chrono::milliseconds(50);
constexpr int kListenBacklog = 64;
constexpr std::size_t kRecvChunk = 256 * 1024;
// Bytes read from one connection per poll round, so one busy rank cannot starve the
// others or the tick.
constexpr std::size_t kTurnBudget = 8u << 20;

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

const char* frame_name(const Frame& frame) {
  static constexpr const char* kNames[] = {"Hello", "Events", "Metrics", "Log", "Clock", "Done", "Updates", "Device"};
  static_assert(std::size(kNames) == std::variant_size_v<Frame>, "a name for every frame type");
  return kNames[frame.index()];
}

// Runs over the whole expected secret whatever the input, so timing does not reveal
// how long a matching prefix was.
bool secrets_equal(const std::string& given, const std::string& expected) {
  unsigned diff = given.size() != expected.size() ? 1u : 0u;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

bool is_hex_secret(const std::string& s) {
  return s.size() == kSecretHexChars &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); });
}

// The server whose loop runs on this thread, so stop() can tell it is called from a
// handler callback without touching the std::thread object another thread may be joining.
thread_local const void* tl_serving = nullptr;

struct Connection {
  enum class State { AwaitingHello, Accepted, Done, Closed };
  int fd = -1;
  std::string peer;  // "addr:port", plus the rank once accepted
  FrameDecoder decoder;
  State state = State::AwaitingHello;
  int rank = -1;
  Clock::time_point opened = Clock::now();
};

}  // namespace

struct StreamServer::Impl {
  Impl(const ServerOptions& o, StreamHandler& h) : options(o), handler(h), claimed(std::size_t(o.world_size), false) {}
  ~Impl();

  Status listen_on();
  void run();
  void poll_round(Clock::time_point& last_tick);
  void accept_all();
  void service(Connection& c);
  void handle_eof(Connection& c);
  void dispatch(Connection& c, Frame&& frame);
  void accept_hello(Connection& c, const Hello& hello);
  std::string check_hello(const Hello& hello) const;
  void reject(Connection& c, const std::string& reason);
  void lose(Connection& c, const std::string& reason);
  void close_connection(Connection& c);
  void expire_silent(Clock::time_point now);

  ServerOptions options;
  StreamHandler& handler;
  std::vector<bool> claimed;  // ranks that have sent an accepted Hello in this run
  int listen_fd = -1;
  int wake_read = -1, wake_write = -1;
  int port = 0;
  std::atomic<bool> stopping{false};
  std::atomic<int> connected{0};
  Clock::time_point accept_resume{};  // accepting paused after running out of descriptors
  std::vector<std::unique_ptr<Connection>> connections;
  std::vector<pollfd> pollfds;
  std::vector<char> recv_buffer = std::vector<char>(kRecvChunk);
  std::vector<Frame> frames;
  std::mutex stop_mutex;
  std::thread thread;
};

StreamServer::Impl::~Impl() {
  for (int fd : {listen_fd, wake_read, wake_write})
    if (fd >= 0) ::close(fd);
}

// Binds the first address bind_address resolves to that accepts us.
Status StreamServer::Impl::listen_on() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(options.port);
  if (int rc = getaddrinfo(options.bind_address.c_str(), service.c_str(), &hints, &found); rc != 0)
    return make_error(ErrorCode::InvalidArgument, "cannot resolve stream bind address '" + options.bind_address + "': " + gai_strerror(rc));
  std::string last_error = "no addresses";
  for (addrinfo* ai = found; ai != nullptr && listen_fd < 0; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = errno_text(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, kListenBacklog) == 0) {
      listen_fd = fd;
    } else {
      last_error = errno_text(errno);
      ::close(fd);
    }
  }
  freeaddrinfo(found);
  if (listen_fd < 0)
    return make_error(ErrorCode::Unavailable, "cannot listen on " + options.bind_address + ":" + service + ": " + last_error,
                      "choose another port, or 0 for any free one");
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return {};
}

void StreamServer::Impl::run() {
  tl_serving = this;
  auto last_tick = Clock::now();
  while (!stopping.load(std::memory_order_acquire)) poll_round(last_tick);
  // Whatever already arrived (a rank's last frames and its EOF) is processed before closing.
  for (auto& c : connections)
    if (c->state != Connection::State::Closed) service(*c);
  for (auto& c : connections)
    if (c->fd >= 0) ::close(c->fd);
  connections.clear();
}

void StreamServer::Impl::poll_round(Clock::time_point& last_tick) {
  const std::size_t n = connections.size();
  const auto now = Clock::now();
  pollfds.clear();
  pollfds.push_back({wake_read, POLLIN, 0});
  pollfds.push_back({listen_fd, short(now >= accept_resume ? POLLIN : 0), 0});
  for (const auto& c : connections) pollfds.push_back({c->fd, POLLIN, 0});
  const auto wait = std::clamp(kTickPeriod - (now - last_tick), Clock::duration::zero(), Clock::duration(kTickPeriod));
  const int timeout_ms = int(std::chrono::ceil<std::chrono::milliseconds>(wait).count());
  if (::poll(pollfds.data(), pollfds.size(), timeout_ms) < 0 && errno != EINTR) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // not expected; avoid spinning
  }
  if (pollfds[0].revents != 0) {
    char drain[64];
    while (::read(wake_read, drain, sizeof drain) > 0) {
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    if (pollfds[2 + i].revents != 0 && connections[i]->state != Connection::State::Closed) service(*connections[i]);
  if ((pollfds[1].revents & POLLIN) != 0) accept_all();
  expire_silent(Clock::now());
  std::erase_if(connections, [](const auto& c) { return c->state == Connection::State::Closed; });
  if (Clock::now() - last_tick >= kTickPeriod) {
    handler.on_tick();
    last_tick = Clock::now();
  }
}

void StreamServer::Impl::accept_all() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The pending connection stays in the backlog; retry later instead of spinning.
        handler.on_rejected("(not accepted)", "cannot accept a connection: " + errno_text(errno));
        accept_resume = Clock::now() + std::chrono::milliseconds(100);
      }
      return;  // EAGAIN: nothing more pending
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->peer = detail::describe_address(reinterpret_cast<sockaddr*>(&addr), len);
    connections.push_back(std::move(c));
  }
}

// Reads what is there (up to the turn budget) and dispatches every complete frame.
void StreamServer::Impl::service(Connection& c) {
  std::size_t budget = kTurnBudget;
  while (c.state != Connection::State::Closed && budget > 0) {
    const ssize_t n = ::recv(c.fd, recv_buffer.data(), std::min(recv_buffer.size(), budget), 0);
    if (n == 0) return handle_eof(c);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      const std::string reason = "connection error: " + errno_text(errno);
      return c.state == Connection::State::Accepted ? lose(c, reason) : reject(c, reason);
    }
    budget -= std::size_t(n);
    frames.clear();
    const Status decoded = c.decoder.feed(recv_buffer.data(), std::size_t(n), frames);
    // Frames before a malformed one are real data: deliver them first.
    for (Frame& f : frames) {
      if (c.state == Connection::State::Closed) break;
      dispatch(c, std::move(f));
    }
    if (!decoded.ok() && c.state != Connection::State::Closed) reject(c, "malformed frame: " + decoded.error().message);
  }
}

void StreamServer::Impl::handle_eof(Connection& c) {
  const std::size_t partial = c.decoder.buffered();
  const std::string mid_frame = partial > 0 ? " (in the middle of a frame, " + std::to_string(partial) + " bytes held)" : "";
  switch (c.state) {
    case Connection::State::AwaitingHello: return reject(c, "connection closed before a Hello" + mid_frame);
    case Connection::State::Accepted: return lose(c, "connection closed before Done" + mid_frame);
    case Connection::State::Done: return close_connection(c);  // the clean end of a rank
    case Connection::State::Closed: return;
  }
}

void StreamServer::Impl::dispatch(Connection& c, Frame&& frame) {
  if (c.state == Connection::State::AwaitingHello) {
    if (const Hello* hello = std::get_if<Hello>(&frame)) return accept_hello(c, *hello);
    return reject(c, std::string("first frame is ") + frame_name(frame) + ", expected Hello");
  }
  if (c.state == Connection::State::Done) return reject(c, std::string(frame_name(frame)) + " frame after Done");
  const int rank = c.rank;
  std::visit(Overloaded{
                 [&](Hello&) { reject(c, "a second Hello on one connection"); },
                 [&](EventBatch& b) { handler.on_events(rank, std::move(b.events)); },
                 [&](MetricBatch& b) { handler.on_metrics(rank, std::move(b.metrics)); },
                 [&](UpdateBatch& b) { handler.on_updates(rank, std::move(b.updates)); },
                 [&](LogLine& l) { handler.on_log(rank, l.text); },
                 [&](ClockInfo& clock) { handler.on_clock(rank, clock); },
                 [&](DeviceReport& d) { handler.on_device(rank, d.info); },
                 [&](Done& d) {
                   c.state = Connection::State::Done;
                   handler.on_done(rank, d);
                 },
             },
             frame);
}

// Empty when the Hello belongs to this run; otherwise why not.
std::string StreamServer::Impl::check_hello(const Hello& h) const {
  if (!secrets_equal(h.secret, options.secret)) return "wrong secret";
  if (h.run_id != options.run_id)
    return "run id " + std::to_string(h.run_id) + " is not this run's (" + std::to_string(options.run_id) + ")";
  if (h.world_size != options.world_size)
    return "world size " + std::to_string(h.world_size) + " is not this run's (" + std::to_string(options.world_size) + ")";
  if (h.rank < 0 || h.rank >= options.world_size)
    return "rank " + std::to_string(h.rank) + " outside 0.." + std::to_string(options.world_size - 1);
  if (claimed[std::size_t(h.rank)]) return "rank " + std::to_string(h.rank) + " already connected";
  return {};
}

void StreamServer::Impl::accept_hello(Connection& c, const Hello& hello) {
  if (std::string why = check_hello(hello); !why.empty()) return reject(c, "Hello refused: " + why);
  claimed[std::size_t(hello.rank)] = true;
  c.state = Connection::State::Accepted;
  c.rank = hello.rank;
  c.peer += " (rank " + std::to_string(hello.rank) + ")";
  connected.fetch_add(1, std::memory_order_release);
  handler.on_hello(hello);
}

// A rank dropped for cause is also lost: the host must not wait for its Done.
void StreamServer::Impl::reject(Connection& c, const std::string& reason) {
  const bool was_rank = c.state == Connection::State::Accepted;
  handler.on_rejected(c.peer, reason);
  if (was_rank) handler.on_lost(c.rank, reason);
  close_connection(c);
}

void StreamServer::Impl::lose(Connection& c, const std::string& reason) {
  handler.on_lost(c.rank, reason);
  close_connection(c);
}

void StreamServer::Impl::close_connection(Connection& c) {
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -1;
  c.state = Connection::State::Closed;
}

void StreamServer::Impl::expire_silent(Clock::time_point now) {
  for (auto& c : connections)
    if (c->state == Connection::State::AwaitingHello && now - c->opened >= options.hello_timeout)
      reject(*c, "no Hello within " + std::to_string(options.hello_timeout.count()) + " ms");
}

// ---- StreamServer ------------------------------------------------------------------

Expected<std::unique_ptr<StreamServer>> StreamServer::start(const ServerOptions& options, StreamHandler& handler) {
  if (!is_hex_secret(options.secret))
    return make_error(ErrorCode::InvalidArgument, "stream server needs a secret of " + std::to_string(kSecretHexChars) + " hex characters",
                      "use loom::stream::random_secret()");
  if (options.world_size < 1)
    return make_error(ErrorCode::InvalidArgument, "stream server world size " + std::to_string(options.world_size) + " < 1");
  auto impl = std::make_unique<Impl>(options, handler);
  LOOM_TRY(impl->listen_on());
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0)
    return make_error(ErrorCode::Io, "cannot create the stream server's wakeup pipe: " + errno_text(errno));
  impl->wake_read = pipe_fds[0];
  impl->wake_write = pipe_fds[1];
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  return Expected<std::unique_ptr<StreamServer>>(std::unique_ptr<StreamServer>(new StreamServer(std::move(impl))));
}

StreamServer::StreamServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StreamServer::~StreamServer() { stop(); }

int StreamServer::port() const { return impl_->port; }

int StreamServer::ranks_connected() const { return impl_->connected.load(std::memory_order_acquire); }

void StreamServer::stop() {
  impl_->stopping.store(true, std::memory_order_release);
  // From a handler callback (the server thread itself) we can only ask: the loop ends
  // after the current round and the destructor, on another thread, joins.
  if (tl_serving == impl_.get()) return;
  std::lock_guard lock(impl_->stop_mutex);
  if (!impl_->thread.joinable()) return;
  const char byte = 1;
  [[maybe_unused]] ssize_t ignored = ::write(impl_->wake_write, &byte, 1);
  impl_->thread.join();
}

}  // namespace loom::stream
