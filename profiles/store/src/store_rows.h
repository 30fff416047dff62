// What the RunStore's files share (run_store.cpp queries, run_store_schema.cpp,
// run_store_writes.cpp, event_blocks.cpp, run_liveness.cpp): running a statement once,
// stepping through rows, the clock and the error for an unknown run. Private to the store.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/status.h"
#include "loom/store/sqlite_db.h"

namespace loom::store {

inline std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline Status run_once(Statement& st) {
  auto r = st.step();
  st.reset();
  if (!r.ok()) return r.error();
  return {};
}

inline Error unknown_run(std::int64_t run_id, const std::string& path) {
  return make_error(ErrorCode::NotFound, "no run " + std::to_string(run_id) + " in " + path,
                    "list the stored runs to see valid ids");
}

// Steps `q` to its last row, calling on_row for each.
template <class OnRow>
Status each_row(Statement& q, OnRow on_row) {
  for (;;) {
    auto row = q.step();
    if (!row.ok()) return row.error();
    if (!*row) return {};
    on_row(q);
  }
}

// Steps `q` to its last row, turning each row into a T with `read`.
template <class T, class Read>
Expected<std::vector<T>> collect_rows(Statement& q, Read read, std::size_t expected_rows = 0) {
  std::vector<T> rows;
  rows.reserve(expected_rows);
  LOOM_TRY(each_row(q, [&rows, &read](const Statement& row) { rows.push_back(read(row)); }));
  return rows;
}

}  // namespace loom::store
