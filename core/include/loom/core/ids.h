// Typed ids: a layer's id cannot be passed where another integer is expected, which bare
// ints allow. Only layers have one: ranks, stages and steps are the plain ints MPI and the
// trace records use, and a run's id is the store's 64-bit row id, so typed ids for them
// would be converted back at every call (the unused RankId, StageId and a 32-bit RunId
// were removed rather than kept as decoration).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace loom {

template <class Tag>
struct Id {
  std::int32_t value = -1;

  constexpr Id() = default;
  constexpr explicit Id(std::int32_t v) : value(v) {}
  constexpr bool valid() const { return value >= 0; }
  constexpr auto operator<=>(const Id&) const = default;
};

using LayerId = Id<struct LayerTag>;

}  // namespace loom

template <class Tag>
struct std::hash<loom::Id<Tag>> {
  std::size_t operator()(loom::Id<Tag> id) const noexcept { return std::hash<std::int32_t>()(id.value); }
};
