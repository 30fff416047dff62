// POSIX socket helpers shared by the stream client and server.
#include "socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace loom::stream::detail {

namespace {
// The GNU strerror_r returns the message (maybe not in buf); the XSI one fills buf.
[[maybe_unused]] const char* strerror_result(int, const char* buf) { return buf; }
[[maybe_unused]] const char* strerror_result(const char* message, const char*) { return message; }
}  // namespace

std::string errno_text(int err) {
  char buf[256] = "";
  return strerror_result(strerror_r(err, buf, sizeof buf), buf);
}

Status set_nonblocking(int fd, bool on) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) return make_error(ErrorCode::Io, "fcntl(F_GETFL): " + errno_text(errno));
  const int wanted = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, wanted) < 0) return make_error(ErrorCode::Io, "fcntl(F_SETFL): " + errno_text(errno));
  return {};
}

std::string describe_address(const sockaddr* addr, socklen_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr->sa_family == AF_INET && len >= socklen_t(sizeof(sockaddr_in))) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (addr->sa_family == AF_INET6 && len >= socklen_t(sizeof(sockaddr_in6))) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "unknown peer";
}

Status split_endpoint(const std::string& endpoint, std::string& host, std::string& port) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon + 1 == endpoint.size())
    return make_error(ErrorCode::InvalidArgument, "stream endpoint '" + endpoint + "' is not host:port");
  host = endpoint.substr(0, colon);
  port = endpoint.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return make_error(ErrorCode::InvalidArgument, "stream endpoint '" + endpoint + "' has no host");
  return {};
}

}  // namespace loom::stream::detail
