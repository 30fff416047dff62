// Room kept aside for closing a run on a full disk (see space_reserve.h).
#include "loom/store/space_reserve.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

namespace loom::store {

SpaceReserve::SpaceReserve(std::string path, std::int64_t bytes) : path_(std::move(path)) {
  std::ofstream out(path_, std::ios::binary | std::ios::trunc);
  const std::vector<char> block(64 * 1024, '\0');  // real blocks: a sparse file frees nothing
  for (std::int64_t left = bytes; out && left > 0; left -= std::int64_t(block.size()))
    out.write(block.data(), std::streamsize(std::min<std::int64_t>(left, std::int64_t(block.size()))));
  out.flush();
  held_ = bool(out);
  if (!held_) std::remove(path_.c_str());
}

SpaceReserve::~SpaceReserve() { release(); }

bool SpaceReserve::release() {
  const bool had = held_;
  if (held_) std::remove(path_.c_str());
  held_ = false;
  return had;
}

std::string space_reserve_path(const std::string& db_path, std::int64_t run_id) {
  return db_path + ".run-" + std::to_string(run_id) + ".reserve";
}

}  // namespace loom::store
