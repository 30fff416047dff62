// Parameter files ("loom-params/1").
#include "loom/engine/checkpoint.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>

namespace loom::engine {
namespace {

constexpr char kMagic[] = "loom-params/1\n";

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

bool write_all(std::FILE* f, const void* data, std::size_t bytes) { return std::fwrite(data, 1, bytes, f) == bytes; }
bool read_all(std::FILE* f, void* data, std::size_t bytes) { return std::fread(data, 1, bytes, f) == bytes; }

}  // namespace

std::vector<NamedTensor> named_copies(const std::vector<Param*>& params) {
  std::vector<NamedTensor> out;
  for (const Param* p : params) out.push_back({p->name, p->value});
  return out;
}

Status save_params(const std::string& path, const std::vector<Param*>& params) {
  return save_params(path, named_copies(params));
}

Status save_params(const std::string& path, const std::vector<NamedTensor>& params) {
  File f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return make_error(ErrorCode::Io, "cannot write parameters to " + path, "check the directory exists");
  bool ok = write_all(f.get(), kMagic, sizeof kMagic - 1);
  const auto count = std::uint64_t(params.size());
  ok = ok && write_all(f.get(), &count, sizeof count);
  for (const NamedTensor& p : params) {
    const auto name_size = std::uint64_t(p.name.size());
    const auto elems = std::uint64_t(p.values.size());
    ok = ok && write_all(f.get(), &name_size, sizeof name_size) && write_all(f.get(), p.name.data(), p.name.size()) &&
         write_all(f.get(), &elems, sizeof elems) && write_all(f.get(), p.values.data(), elems * sizeof(float));
  }
  if (!ok) return make_error(ErrorCode::Io, "short write to " + path, "is the disk full?");
  return {};
}

Expected<std::vector<NamedTensor>> load_params(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return make_error(ErrorCode::NotFound, "cannot open parameter file " + path);
  char magic[sizeof kMagic - 1];
  std::uint64_t count = 0;
  if (!read_all(f.get(), magic, sizeof magic) || std::string(magic, sizeof magic) != kMagic ||
      !read_all(f.get(), &count, sizeof count)) {
    return make_error(ErrorCode::Corrupt, path + " is not a loom-params/1 file");
  }
  std::vector<NamedTensor> tensors(count);
  for (NamedTensor& t : tensors) {
    std::uint64_t name_size = 0, elems = 0;
    bool ok = read_all(f.get(), &name_size, sizeof name_size) && name_size < 4096;
    if (ok) t.name.resize(name_size);
    ok = ok && read_all(f.get(), t.name.data(), name_size) && read_all(f.get(), &elems, sizeof elems) &&
         elems < (std::uint64_t(1) << 34);
    if (ok) t.values.resize(elems);
    if (!ok || !read_all(f.get(), t.values.data(), elems * sizeof(float))) {
      return make_error(ErrorCode::Corrupt, path + " is truncated");
    }
  }
  return tensors;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(a[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace loom::engine
