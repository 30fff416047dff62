// share_unique_id (unique_id.h).
#include "loom/comm/unique_id.h"

#include <string>

namespace loom::comm {

Status share_unique_id(Communicator& comm, UniqueId& id, int root) {
  if (root < 0 || root >= comm.size()) {
    return make_error(ErrorCode::InvalidArgument,
                      "unique id root " + std::to_string(root) + " is not a rank of " + std::to_string(comm.size()));
  }
  return comm.broadcast(id.data(), std::int64_t(id.size()), root);
}

}  // namespace loom::comm
