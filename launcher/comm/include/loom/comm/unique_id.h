// NCCL starts a communicator from an opaque id that one rank creates (ncclGetUniqueId)
// and every rank must receive before ncclCommInitRank. Loom hands it over the
// communicator the ranks already share (MPI in a real run), so the exchange is ordinary
// code, tested over any backend without NCCL: the NCCL communicator only fills and
// consumes the bytes.
#pragma once

#include <array>
#include <cstddef>

#include "loom/comm/communicator.h"

namespace loom::comm {

inline constexpr std::size_t kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
using UniqueId = std::array<char, kUniqueIdBytes>;

// Collective: every rank calls it; afterwards every rank's id holds root's bytes.
Status share_unique_id(Communicator& comm, UniqueId& id, int root);

}  // namespace loom::comm
