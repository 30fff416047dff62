// A request that is complete when it is made (an error found before anything was sent,
// or an operation done at once), shared by the communicator backends in this directory.
#pragma once

#include <utility>

#include "loom/comm/communicator.h"

namespace loom::comm {

class ReadyRequest final : public Request {
 public:
  explicit ReadyRequest(Status status) : status_(std::move(status)) {}
  bool test() override { return true; }
  Status wait() override { return status_; }

 private:
  Status status_;
};

}  // namespace loom::comm
