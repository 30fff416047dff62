// wait_watched (watchdog.h).
#include "loom/comm/watchdog.h"

#include <cstdio>
#include <thread>

namespace loom::comm {

Status wait_watched(const WatchedOp& op, std::chrono::milliseconds timeout, const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (;;) {
    const OpState state = op.poll();
    if (state == OpState::Done) return {};
    if (state == OpState::Failed) {
      const std::string why = op.failure ? op.failure() : "unknown error";
      op.abort();
      return make_error(ErrorCode::Unavailable, what + " failed: " + why,
                        "a peer rank or its GPU failed; the communicator was aborted so this rank could end");
    }
    const auto waited = Clock::now() - start;
    if (waited >= timeout) {
      op.abort();
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", double(timeout.count()) / 1000.0);
      return make_error(ErrorCode::Unavailable, what + " did not complete within " + seconds + " s",
                        "a peer rank is hung or dead; the communicator was aborted so this rank could end");
    }
    if (waited < std::chrono::milliseconds(1)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace loom::comm
