// Small POSIX socket helpers shared by the stream client and server (private to
// loom_stream): errno text, non-blocking mode, peer names.
#pragma once

#include <sys/socket.h>

#include <string>

#include "loom/core/status.h"

namespace loom::stream::detail {

std::string errno_text(int err);
Status set_nonblocking(int fd, bool on);
std::string describe_address(const sockaddr* addr, socklen_t len);  // "1.2.3.4:5678", "[::1]:5678"
// Splits "host:port" or "[v6]:port"; InvalidArgument when there is no port.
Status split_endpoint(const std::string& endpoint, std::string& host, std::string& port);

}  // namespace loom::stream::detail
