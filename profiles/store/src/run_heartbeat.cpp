// The owner's heartbeat thread (see run_heartbeat.h).
#include "loom/store/run_heartbeat.h"

namespace loom::store {

RunHeartbeat::RunHeartbeat(std::string db_path, std::int64_t run_id, std::chrono::milliseconds period)
    : thread_([this, path = std::move(db_path), run_id, period] { beat(path, run_id, period); }) {}

RunHeartbeat::~RunHeartbeat() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

// A failed beat (the file busy or gone) is not an error of the run: the next one retries,
// and a reader only gives up on the owner after kOwnerSilentMs without any.
void RunHeartbeat::beat(const std::string& db_path, std::int64_t run_id, std::chrono::milliseconds period) {
  auto store = RunStore::open(db_path);
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (store.ok()) {
      lock.unlock();
      (void)store->heartbeat(run_id);
      lock.lock();
    }
    wake_.wait_for(lock, period, [this] { return stopping_; });
  }
}

}  // namespace loom::store
