// Typed ids: a RankId cannot be passed where a LayerId is expected, which bare ints allow.
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

using RankId = Id<struct RankTag>;
using LayerId = Id<struct LayerTag>;
using StageId = Id<struct StageTag>;
using RunId = Id<struct RunTag>;

}  // namespace loom

template <class Tag>
struct std::hash<loom::Id<Tag>> {
  std::size_t operator()(loom::Id<Tag> id) const noexcept { return std::hash<std::int32_t>()(id.value); }
};
