// RAII over the sqlite3 C API; see sqlite_db.h. Every failure becomes a Status carrying
// SQLite's message, the database path, and a hint where one helps.
#include "loom/store/sqlite_db.h"

#include <sqlite3.h>

#include <cmath>
#include <limits>
#include <string_view>
#include <utility>

namespace loom::store {

ErrorCode sqlite_error_code(int rc) {
  switch (rc & 0xff) {  // primary code; extended codes keep it in the low byte
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return ErrorCode::Corrupt;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_READONLY:
    case SQLITE_FULL:
    case SQLITE_PERM:
      return ErrorCode::Io;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return ErrorCode::Unavailable;
    case SQLITE_CONSTRAINT:
    case SQLITE_RANGE:
    case SQLITE_MISMATCH:
      return ErrorCode::InvalidArgument;
    default:
      return ErrorCode::Internal;
  }
}

namespace {
std::string hint_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::Corrupt:
      return "the file is not a Loom run database or is damaged; move it aside or point "
             "LOOM_DB at another file";
    case ErrorCode::Io:
      return "check that the directory exists and is writable, and that the disk is not full";
    case ErrorCode::Unavailable:
      return "another process holds the database lock; retry when it finishes";
    default:
      return {};
  }
}
}  // namespace

// ---- Statement ----

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept
    : stmt_(std::exchange(other.stmt_, nullptr)),
      db_(other.db_),
      path_(other.path_),
      bind_rc_(other.bind_rc_) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_) sqlite3_finalize(stmt_);
    stmt_ = std::exchange(other.stmt_, nullptr);
    db_ = other.db_;
    path_ = other.path_;
    bind_rc_ = other.bind_rc_;
  }
  return *this;
}

void Statement::note_bind(int rc) {
  if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
}

Statement& Statement::bind(int index, std::int64_t value) {
  note_bind(sqlite3_bind_int64(stmt_, index, value));
  return *this;
}

Statement& Statement::bind(int index, double value) {
  note_bind(sqlite3_bind_double(stmt_, index, value));
  return *this;
}

Statement& Statement::bind_number(int index, double value) {
  if (std::isnan(value)) return bind(index, std::string_view("NaN"));
  return bind(index, value);
}

Statement& Statement::bind(int index, std::string_view text) {
  // SQLITE_TRANSIENT: SQLite copies, so the caller's buffer may go away before step().
  note_bind(sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT,
                                SQLITE_UTF8));
  return *this;
}

Statement& Statement::bind_blob_static(int index, std::span<const std::byte> bytes) {
  note_bind(sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_STATIC));
  return *this;
}

Statement& Statement::bind_null(int index) {
  note_bind(sqlite3_bind_null(stmt_, index));
  return *this;
}

Expected<bool> Statement::step() {
  auto fail = [&](int rc) {
    ErrorCode code = sqlite_error_code(rc);
    return make_error(code,
                      std::string("SQLite: ") + (rc == bind_rc_ ? sqlite3_errstr(rc) : sqlite3_errmsg(db_)) +
                          " in " + *path_ + " (statement: " + sqlite3_sql(stmt_) + ")",
                      hint_for(code));
  };
  if (bind_rc_ != SQLITE_OK) return fail(bind_rc_);
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return fail(rc);
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_rc_ = SQLITE_OK;
}

std::int64_t Statement::column_int64(int index) const { return sqlite3_column_int64(stmt_, index); }
double Statement::column_double(int index) const {
  if (sqlite3_column_type(stmt_, index) == SQLITE_TEXT) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, index));
    if (text && std::string_view(text) == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  return sqlite3_column_double(stmt_, index);
}
bool Statement::column_is_null(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

std::string Statement::column_text(int index) const {
  const unsigned char* text = sqlite3_column_text(stmt_, index);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<std::size_t>(sqlite3_column_bytes(stmt_, index)));
}

std::span<const std::byte> Statement::column_blob(int index) const {
  const void* data = sqlite3_column_blob(stmt_, index);
  if (data == nullptr) return {};
  return {static_cast<const std::byte*>(data), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, index))};
}

// ---- Database ----

namespace {
// A path as an SQLite URI ("file:..."): the characters a URI gives a meaning are escaped.
std::string file_uri(const std::string& path, bool immutable) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%') uri += "%25";
    else if (c == '?') uri += "%3f";
    else if (c == '#') uri += "%23";
    else uri += c;
  }
  return immutable ? uri + "?immutable=1" : uri;
}
}  // namespace

Expected<Database> Database::open(const std::string& path, Access access) {
  Database db;
  *db.path_ = path;
  // NOMUTEX: a connection is used by one thread at a time (documented on RunStore).
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  std::string name = path;
  if (access != Access::ReadWrite) {
    flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
    name = file_uri(path, access == Access::Immutable);
  }
  int rc = sqlite3_open_v2(name.c_str(), &db.db_, flags, nullptr);
  if (rc != SQLITE_OK) return db.error(rc, "cannot open database");
  sqlite3_extended_result_codes(db.db_, 1);
  return db;
}

Database::~Database() {
  // close_v2 defers the close if a Statement outlives us instead of leaking the handle.
  if (db_) sqlite3_close_v2(db_);
}

Database::Database(Database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

Error Database::error(int rc, std::string_view what) const {
  ErrorCode code = sqlite_error_code(rc);
  std::string detail = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  return make_error(code, std::string(what) + ": " + *path_ + ": " + detail, hint_for(code));
}

Status Database::exec(const std::string& sql) {
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return error(rc, "SQLite exec failed");
  return {};
}

Expected<Statement> Database::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                              &stmt, nullptr);
  if (rc != SQLITE_OK) return error(rc, "SQLite prepare failed");
  return Statement(stmt, db_, path_.get());
}

std::int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
int Database::changes() const { return sqlite3_changes(db_); }

// ---- Transaction ----

Expected<Transaction> Transaction::begin(Database& db) {
  LOOM_TRY(db.exec("BEGIN IMMEDIATE"));
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (db_) (void)db_->exec("ROLLBACK");  // undoing what was not committed: nothing to report
}

Status Transaction::commit() {
  Database* db = std::exchange(db_, nullptr);
  Status s = db->exec("COMMIT");
  if (!s.ok()) (void)db->exec("ROLLBACK");  // the commit's error is the one to report
  return s;
}

}  // namespace loom::store
