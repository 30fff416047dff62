// Room kept aside on the run store's disk so that a run can still be closed when the disk
// fills up: the owner of a run holds a small file next to the store and deletes it when a
// write fails, which frees enough for the run's final status (a few SQLite pages in the
// WAL). Without it the disk-full run could only be found "interrupted" by a later reader.
#pragma once

#include <cstdint>
#include <string>

namespace loom::store {

class SpaceReserve {
 public:
  // Writes `bytes` to `path` (a failure leaves no reserve, which is allowed: the disk may
  // already be full). The file is removed by release() or the destructor.
  SpaceReserve(std::string path, std::int64_t bytes);
  ~SpaceReserve();
  SpaceReserve(const SpaceReserve&) = delete;
  SpaceReserve& operator=(const SpaceReserve&) = delete;

  // Gives the room back to the disk (idempotent); true if there was any.
  bool release();
  bool held() const { return held_; }

 private:
  std::string path_;
  bool held_ = false;
};

// The reserve's file for one run: beside the store, named after it and the run.
std::string space_reserve_path(const std::string& db_path, std::int64_t run_id);

inline constexpr std::int64_t kRunSpaceReserveBytes = 1 << 20;

}  // namespace loom::store
