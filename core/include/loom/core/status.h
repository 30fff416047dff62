// Errors are values inside Loom's libraries: a function that can fail returns Status or
// Expected<T>. Only executables turn an error into a message and an exit code, so a user
// sees what failed, where, and a hint for the fix rather than a stack trace.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace loom {

enum class ErrorCode {
  InvalidArgument,  // bad input from the user: plan, flag, file content
  NotFound,         // a file, run or dataset that is not there
  Io,               // the OS refused a read/write
  Corrupt,          // a file or database that exists but is damaged
  Unavailable,      // a backend or device this build or machine lacks
  Internal,         // a bug in Loom
};

struct Error {
  ErrorCode code = ErrorCode::Internal;
  std::string message;  // what failed and where
  std::string hint;     // what the user can do about it (may be empty)

  std::string describe() const { return hint.empty() ? message : message + " (hint: " + hint + ")"; }
};

inline Error make_error(ErrorCode code, std::string message, std::string hint = {}) {
  return Error{code, std::move(message), std::move(hint)};
}

// Both are [[nodiscard]]: an error dropped on the floor is a bug the compiler names; a
// caller that means to ignore one says so with (void).
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design
  static Status ok_status() { return Status(); }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

// A value or an error. C++20 has no std::expected; this is the small subset we need.
template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}        // NOLINT: implicit by design
  Expected(Error error) : state_(std::move(error)) {}    // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<T>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<Error>(state_);
  }
  Status status() const { return ok() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> state_;
};

}  // namespace loom

// Propagates a failed Status/Expected to the caller.
#define LOOM_TRY(expr)                                   \
  do {                                                   \
    auto loom_try_result_ = (expr);                      \
    if (!loom_try_result_.ok()) return loom_try_result_.error(); \
  } while (0)
