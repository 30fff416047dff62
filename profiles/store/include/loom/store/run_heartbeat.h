// Keeps a running run's heartbeat fresh (RunStore::heartbeat) from a thread of its own,
// with its own connection, for as long as the object lives: whoever owns a run (loom-cli,
// the workbench, a single-process run) holds one while the run goes on. When the owner
// dies, the heartbeat stops with it, and the next reader marks the run interrupted
// (run_store.h orphan_reason). A thread rather than the owner's loop: the loop may block
// for seconds (mpirun's shutdown, a long step) without its owner being gone.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "loom/store/run_store.h"

namespace loom::store {

class RunHeartbeat {
 public:
  RunHeartbeat(std::string db_path, std::int64_t run_id,
               std::chrono::milliseconds period = std::chrono::milliseconds(kHeartbeatPeriodMs));
  ~RunHeartbeat();  // stops the thread and waits for it
  RunHeartbeat(const RunHeartbeat&) = delete;
  RunHeartbeat& operator=(const RunHeartbeat&) = delete;

 private:
  void beat(const std::string& db_path, std::int64_t run_id, std::chrono::milliseconds period);

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace loom::store
