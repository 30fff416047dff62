// Fuzzes opening a run store file: arbitrary bytes written as a database file, then
// opened and read the way `loom-cli runs` and `show` read it. Every failure must be an
// error value (not a database, a newer schema, a damaged page), never a crash.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "loom/store/run_store.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  char path[] = "/tmp/loom-fuzz-store-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return 0;
  if (::write(fd, data, size) != static_cast<ssize_t>(size)) size = 0;
  ::close(fd);
  if (auto store = loom::store::RunStore::open(path); store.ok()) {
    (void)store->load_all_devices();  // the Runs list's device column
    if (auto runs = store->list_runs(); runs.ok()) {
      for (std::size_t i = 0; i < runs->size() && i < 4; ++i) {
        const std::int64_t id = (*runs)[i].id;
        (void)store->load_run(id);
        (void)store->load_ranks(id);
        (void)store->load_events_after(id, 0, 1000);
        (void)store->load_metrics_after(id, 0, 1000);
      }
    }
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((std::string(path) + suffix).c_str());
  return 0;
}
