// A small RAII wrapper over the sqlite3 C API: a Database owns a connection, a Statement
// owns a prepared statement, a Transaction rolls back unless committed. Errors come back
// as Status carrying SQLite's own message and the file path. sqlite3.h stays out of this
// header so users of loom_store need not see SQLite.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "loom/core/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace loom::store {

class Statement {
 public:
  Statement() = default;
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds are 1-based like SQLite's. A failed bind is remembered and reported by step(),
  // so call sites can bind a row without checking each column.
  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<std::int64_t>(value)); }
  Statement& bind(int index, double value);
  // A measured value that may be NaN (a diverged loss): SQLite stores NaN as NULL, which a
  // NOT NULL column refuses and a reader takes for "absent", so NaN is stored as the text
  // 'NaN', which column_double reads back as NaN. Infinities are stored as they are.
  Statement& bind_number(int index, double value);
  Statement& bind(int index, std::string_view text);
  Statement& bind_null(int index);
  // Binds `bytes` as a blob without copying: the buffer must outlive the next step().
  Statement& bind_blob_static(int index, std::span<const std::byte> bytes);

  // true: a row is available; false: done.
  Expected<bool> step();
  // Ready to run again; bindings are cleared.
  void reset();

  std::int64_t column_int64(int index) const;
  double column_double(int index) const;
  std::string column_text(int index) const;
  bool column_is_null(int index) const;
  // Valid until the next step(), reset() or column call on this column.
  std::span<const std::byte> column_blob(int index) const;

  bool valid() const { return stmt_ != nullptr; }

 private:
  friend class Database;
  Statement(sqlite3_stmt* stmt, sqlite3* db, const std::string* path)
      : stmt_(stmt), db_(db), path_(path) {}
  void note_bind(int rc);

  sqlite3_stmt* stmt_ = nullptr;
  sqlite3* db_ = nullptr;
  const std::string* path_ = nullptr;  // owned by the Database (kept stable across moves)
  int bind_rc_ = 0;
};

class Database {
 public:
  // ReadWrite opens, creating if needed. ReadOnly never writes the file. Immutable also
  // makes no -shm or -wal file beside it (a folder that cannot be written, such as a
  // read-only mount), reading the file as it is on disk.
  enum class Access { ReadWrite, ReadOnly, Immutable };
  // Opens a database file; does not touch its content.
  static Expected<Database> open(const std::string& path, Access access = Access::ReadWrite);

  Database() = default;
  ~Database();
  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  Status exec(const std::string& sql);
  Expected<Statement> prepare(std::string_view sql);
  std::int64_t last_insert_rowid() const;
  int changes() const;
  const std::string& path() const { return *path_; }

  // Turns an SQLite result code into a loom Error naming the file and the operation.
  Error error(int rc, std::string_view what) const;

 private:
  sqlite3* db_ = nullptr;
  std::unique_ptr<std::string> path_ = std::make_unique<std::string>();
};

// BEGIN IMMEDIATE takes the write lock up front: in WAL mode that avoids the deadlock of
// two readers that both try to upgrade, and busy_timeout makes a second writer wait.
class Transaction {
 public:
  static Expected<Transaction> begin(Database& db);
  ~Transaction();
  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  Status commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_ = nullptr;
};

// Maps an SQLite result code to a loom error code (exposed for tests and callers).
ErrorCode sqlite_error_code(int rc);

}  // namespace loom::store
