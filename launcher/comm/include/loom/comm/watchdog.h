// Waiting for an operation the host does not drive, such as a NCCL collective running on
// the GPU: a peer that died or hangs would leave it running forever, and a rank blocked
// in it could never report anything. So the wait polls the operation and its transport's
// error state, and past a deadline aborts the transport (ncclCommAbort) so that the
// operation ends on this rank with a message, instead of hanging. Kept apart from NCCL so
// that this logic is tested in every build.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "loom/core/status.h"

namespace loom::comm {

enum class OpState { Running, Done, Failed };

struct WatchedOp {
  std::function<OpState()> poll;         // must not block
  std::function<std::string()> failure;  // what went wrong, once poll() said Failed
  std::function<void()> abort;           // ends the operation on this rank, whatever it waits for
};

// Polls until done (ok), failed (abort, then the failure) or `timeout` elapsed (abort, then
// an error naming `what` and the timeout). Polling yields the core for the first
// millisecond and then sleeps briefly between polls, so a long wait costs little CPU.
Status wait_watched(const WatchedOp& op, std::chrono::milliseconds timeout, const std::string& what);

}  // namespace loom::comm
