// Parameter files ("loom-params/1") and training checkpoints ("loom-checkpoint/1").
#include "loom/store/checkpoint_files.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string_view>

namespace loom::store {
namespace {

constexpr char kMagic[] = "loom-params/1\n";
constexpr char kCheckpointMagic[] = "loom-checkpoint/1\n";
// Bounds read from a file before anything is sized by them (a damaged file must not
// allocate terabytes).
constexpr std::uint64_t kMaxTensors = 1 << 20;
constexpr std::uint64_t kMaxNameSize = 4096;
constexpr std::uint64_t kMaxElements = std::uint64_t(1) << 34;

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

bool write_all(std::FILE* f, const void* data, std::size_t bytes) { return std::fwrite(data, 1, bytes, f) == bytes; }
bool read_all(std::FILE* f, void* data, std::size_t bytes) { return std::fread(data, 1, bytes, f) == bytes; }

// Bytes from the read position to the end: no count read from a file may promise more.
std::uint64_t bytes_left(std::FILE* f) {
  const long at = std::ftell(f);
  if (at < 0 || std::fseek(f, 0, SEEK_END) != 0) return 0;
  const long end = std::ftell(f);
  std::fseek(f, at, SEEK_SET);
  return end > at ? std::uint64_t(end - at) : 0;
}

bool write_tensors(std::FILE* f, const std::vector<NamedTensor>& tensors) {
  const auto count = std::uint64_t(tensors.size());
  bool ok = write_all(f, &count, sizeof count);
  for (const NamedTensor& p : tensors) {
    const auto name_size = std::uint64_t(p.name.size());
    const auto elems = std::uint64_t(p.values.size());
    ok = ok && write_all(f, &name_size, sizeof name_size) && write_all(f, p.name.data(), p.name.size()) &&
         write_all(f, &elems, sizeof elems) && write_all(f, p.values.data(), elems * sizeof(float));
  }
  return ok;
}

// False when the file ends early or a size is beyond the bounds above.
bool read_tensors(std::FILE* f, std::vector<NamedTensor>& tensors) {
  std::uint64_t count = 0;
  // Each tensor takes at least its two 8-byte sizes.
  if (!read_all(f, &count, sizeof count) || count > kMaxTensors || count * 16 > bytes_left(f)) return false;
  tensors.resize(count);
  for (NamedTensor& t : tensors) {
    std::uint64_t name_size = 0, elems = 0;
    bool ok = read_all(f, &name_size, sizeof name_size) && name_size < kMaxNameSize;
    if (ok) t.name.resize(name_size);
    ok = ok && read_all(f, t.name.data(), name_size) && read_all(f, &elems, sizeof elems) && elems < kMaxElements &&
         elems * sizeof(float) <= bytes_left(f);
    if (ok) t.values.resize(elems);
    if (!ok || !read_all(f, t.values.data(), elems * sizeof(float))) return false;
  }
  return true;
}

bool has_magic(std::FILE* f, std::string_view magic) {
  std::string read(magic.size(), '\0');
  return read_all(f, read.data(), read.size()) && read == magic;
}

}  // namespace

Status save_params(const std::string& path, const std::vector<NamedTensor>& params) {
  File f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return make_error(ErrorCode::Io, "cannot write parameters to " + path, "check the directory exists");
  const bool ok = write_all(f.get(), kMagic, sizeof kMagic - 1) && write_tensors(f.get(), params);
  if (!ok) return make_error(ErrorCode::Io, "short write to " + path, "is the disk full?");
  return {};
}

Expected<std::vector<NamedTensor>> load_params(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return make_error(ErrorCode::NotFound, "cannot open parameter file " + path);
  if (!has_magic(f.get(), {kMagic, sizeof kMagic - 1}))
    return make_error(ErrorCode::Corrupt, path + " is not a loom-params/1 file");
  std::vector<NamedTensor> tensors;
  if (!read_tensors(f.get(), tensors)) return make_error(ErrorCode::Corrupt, path + " is truncated or damaged");
  return tensors;
}

Status save_checkpoint(const std::string& path, const Checkpoint& c) {
  const std::string temporary = path + ".partial";
  {
    File f(std::fopen(temporary.c_str(), "wb"), &std::fclose);
    if (!f) return make_error(ErrorCode::Io, "cannot write checkpoint " + temporary, "check the directory exists");
    const std::uint64_t header[] = {std::uint64_t(c.step), std::uint64_t(c.optimizer_steps), std::uint64_t(c.rank),
                                    std::uint64_t(c.world), std::uint64_t(c.global_batch)};
    const auto name_size = std::uint64_t(c.optimizer.size());
    bool ok = write_all(f.get(), kCheckpointMagic, sizeof kCheckpointMagic - 1) &&
              write_all(f.get(), header, sizeof header) && write_all(f.get(), &name_size, sizeof name_size) &&
              write_all(f.get(), c.optimizer.data(), c.optimizer.size()) && write_tensors(f.get(), c.tensors);
    // On disk before the rename: a crash after it must not leave a named but empty file.
    ok = ok && std::fflush(f.get()) == 0 && ::fsync(::fileno(f.get())) == 0;
    if (!ok) {
      const int cause = errno;  // before fclose and remove can change it
      f.reset();
      std::remove(temporary.c_str());
      if (cause == ENOSPC || cause == EDQUOT)
        return make_error(ErrorCode::Io, "the disk is full: cannot write checkpoint " + temporary,
                          "free space where the run store is (checkpoints are kept beside it), or set LOOM_DB to "
                          "a store on another disk");
      return make_error(ErrorCode::Io, "cannot write checkpoint " + temporary + ": " + std::strerror(cause));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    return make_error(ErrorCode::Io, "cannot rename " + temporary + " to " + path);
  return {};
}

namespace {

// The header alone: where training stood and who wrote it.
Expected<Checkpoint> read_header(std::FILE* f, const std::string& path) {
  Checkpoint c;
  std::uint64_t header[5] = {};
  if (!has_magic(f, {kCheckpointMagic, sizeof kCheckpointMagic - 1}) || !read_all(f, header, sizeof header))
    return make_error(ErrorCode::Corrupt, path + " is not a loom-checkpoint/1 file");
  c.step = std::int64_t(header[0]);
  c.optimizer_steps = std::int64_t(header[1]);
  c.rank = std::int64_t(header[2]);
  c.world = std::int64_t(header[3]);
  c.global_batch = std::int64_t(header[4]);
  std::uint64_t name_size = 0;
  bool ok = c.step >= 0 && c.world >= 1 && c.world <= (1 << 20) && c.rank >= 0 && c.rank < c.world &&
            read_all(f, &name_size, sizeof name_size) && name_size < 64;
  if (ok) c.optimizer.resize(name_size);
  if (!ok || !read_all(f, c.optimizer.data(), name_size))
    return make_error(ErrorCode::Corrupt, "checkpoint " + path + " has a damaged header");
  return c;
}

Expected<Checkpoint> open_checkpoint(const std::string& path, bool with_tensors) {
  File f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return make_error(ErrorCode::NotFound, "cannot open checkpoint " + path);
  auto c = read_header(f.get(), path);
  if (c.ok() && with_tensors && !read_tensors(f.get(), c->tensors))
    return make_error(ErrorCode::Corrupt, "checkpoint " + path + " is truncated or damaged");
  return c;
}

}  // namespace

Expected<Checkpoint> load_checkpoint(const std::string& path) { return open_checkpoint(path, true); }

Expected<Checkpoint> load_checkpoint_header(const std::string& path) { return open_checkpoint(path, false); }

std::string checkpoint_step_dir(const std::string& run_dir, std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return (std::filesystem::path(run_dir) / name).string();
}

std::string checkpoint_file(const std::string& step_dir, int rank) {
  return (std::filesystem::path(step_dir) / ("rank-" + std::to_string(rank) + ".ckpt")).string();
}

namespace {

// Step directories under run_dir, newest first.
std::vector<std::filesystem::path> step_dirs_newest_first(const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && name.rfind("step-", 0) == 0) dirs.push_back(entry.path());
  }
  std::sort(dirs.rbegin(), dirs.rend());  // zero-padded step numbers sort as text
  return dirs;
}

// Whether every rank of the world that wrote this directory's files has one there.
bool is_complete(const std::filesystem::path& dir) {
  auto first = open_checkpoint(checkpoint_file(dir.string(), 0), false);
  if (!first.ok()) return false;
  for (int r = 1; r < first->world; ++r) {
    std::error_code ec;
    if (!std::filesystem::exists(checkpoint_file(dir.string(), r), ec)) return false;
  }
  return true;
}

}  // namespace

Expected<std::string> latest_checkpoint(const std::string& run_dir) {
  for (const auto& dir : step_dirs_newest_first(run_dir))
    if (is_complete(dir)) return dir.string();
  return make_error(ErrorCode::NotFound, "no complete checkpoint under " + run_dir);
}

void prune_checkpoints(const std::string& run_dir, int rank, int keep) {
  const auto dirs = step_dirs_newest_first(run_dir);
  for (std::size_t i = std::size_t(std::max(keep, 0)); i < dirs.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove(checkpoint_file(dirs[i].string(), rank), ec);
    std::filesystem::remove(dirs[i], ec);  // only succeeds once every rank's file is gone
  }
}

void remove_checkpoints(const std::string& run_dir) {
  std::error_code ec;
  std::filesystem::remove_all(run_dir, ec);
  std::filesystem::remove(std::filesystem::path(run_dir).parent_path(), ec);  // the store's, once empty
}

}  // namespace loom::store
