// Unwrapping Status and Expected in tests: `must` returns the value, `must_ok` checks a
// Status. A failure ends the test with the error's words and the line that asked, since
// setup that fails makes every later check meaningless (QFAIL cannot return a value).
#pragma once

#include <QtGlobal>

#include <source_location>
#include <utility>

#include "loom/core/status.h"

namespace loom::testing {

[[noreturn]] inline void fail_unexpected(const loom::Error& e, const std::source_location& where) {
  qFatal("%s:%u: unexpected error: %s", where.file_name(), static_cast<unsigned>(where.line()),
         e.describe().c_str());
}

template <class T>
T must(loom::Expected<T> r, std::source_location where = std::source_location::current()) {
  if (!r.ok()) fail_unexpected(r.error(), where);
  return std::move(r).value();
}

inline void must_ok(const loom::Status& s, std::source_location where = std::source_location::current()) {
  if (!s.ok()) fail_unexpected(s.error(), where);
}

}  // namespace loom::testing
