// Who owns a running run and whether it is still alive: the owner's heartbeat, the
// reason a reader gives up on a silent or dead owner and marks the run interrupted, and
// the space reserves such runs leave behind.
#include "loom/store/run_store.h"
#include "loom/store/space_reserve.h"

#include "loom/trace/machine.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "store_rows.h"

namespace loom::store {

namespace {
// Whether a process of this machine still runs (a zombie does not: it has ended).
bool process_alive(std::int64_t pid) {
  const char state = machine::process_state(pid);
  return state != '\0' && state != 'Z';
}
}  // namespace

Status RunStore::heartbeat(std::int64_t run_id) {
  auto q = db_.prepare("UPDATE runs SET heartbeat_unix_ms = ? WHERE id = ? AND status = 'running'");
  if (!q.ok()) return q.error();
  q->bind(1, unix_ms_now()).bind(2, run_id);
  return run_once(*q);
}

std::string orphan_reason(const RunRecord& run, bool owner_on_this_host, bool owner_alive, std::int64_t now_ms) {
  if (run.status != RunStatus::Running) return {};
  if (run.owner_pid <= 0) return "it was started by a Loom that did not record its owner, and is not running";
  const std::string owner = "its owner (process " + std::to_string(run.owner_pid) + " on " + run.host + ")";
  if (owner_on_this_host && !owner_alive) return owner + " ended without finishing it";
  const std::int64_t silent_ms = now_ms - std::max(run.heartbeat_unix_ms, run.started_unix_ms);
  if (silent_ms > kOwnerSilentMs) return owner + " has not reported for " + std::to_string(silent_ms / 1000) + " s";
  return {};
}

// Marks `run` interrupted (in place, and in the store where it can) when its owner is
// gone. Where the write fails (a read-only file, a full disk) the reader still sees the
// truth, and the next reader tries to store it again.
void RunStore::interrupt_if_orphaned(RunRecord& run) {
  if (run.status != RunStatus::Running) return;
  const bool here = run.host == machine::host_name();
  const std::string reason = orphan_reason(run, here, here && process_alive(run.owner_pid), unix_ms_now());
  if (reason.empty()) return;
  const std::int64_t last_seen = std::max(run.heartbeat_unix_ms, run.started_unix_ms);
  const double wall_s = double(std::max<std::int64_t>(0, last_seen - run.started_unix_ms)) / 1000.0;
  const std::string error = "interrupted: " + reason + "; what it recorded until then is kept";
  auto q = db_.prepare(
      "UPDATE runs SET status = 'interrupted', error = ?, ended_unix_ms = ?, wall_s = ? "
      "WHERE id = ? AND status = 'running'");
  if (q.ok()) {
    q->bind(1, error).bind(2, last_seen).bind(3, wall_s).bind(4, run.id);
    const bool stored = run_once(*q).ok();
    if (stored && db_.changes() == 0) return;  // its owner finished it meanwhile
  }
  run.status = RunStatus::Interrupted;
  run.error = error;
  run.ended_unix_ms = last_seen;
  run.wall_s = wall_s;
  std::error_code ec;
  std::filesystem::remove(space_reserve_path(path(), run.id), ec);  // its owner cannot any more
}

// A run's space reserve (space_reserve.h) outlives it when its owner dies: whoever finds
// the run no longer running, on opening the store or when marking it interrupted, gives
// the megabyte back. A reserve of a run still running is its owner's and stays.
void RunStore::remove_stale_reserves() {
  const std::filesystem::path db_path(path());
  const std::string prefix = db_path.filename().string() + ".run-", suffix = ".reserve";
  std::error_code ec;
  const std::filesystem::path dir = db_path.has_parent_path() ? db_path.parent_path() : ".";
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string id_text = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (id_text.find_first_not_of("0123456789") != std::string::npos) continue;
    auto run = load_run(std::stoll(id_text));  // marks it interrupted when its owner is gone
    if (run.ok() && run->status == RunStatus::Running) continue;
    std::error_code removed;
    std::filesystem::remove(entry.path(), removed);
  }
}

}  // namespace loom::store
