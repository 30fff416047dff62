// IDX reader (the MNIST file format) through zlib, which reads gzip and raw files alike.
// Each file is read with one header parse and one large gzread into its final buffer.
// Errors name the file, say what is wrong with it and suggest a fix.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "loom/data/dataset.h"

namespace loom::data {
namespace {

constexpr std::uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dims
constexpr std::uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dim
constexpr const char* kInstallHint =
    "install the data with `apt-get install dataset-fashion-mnist` or set data.path to a "
    "directory holding the IDX files";
// A damaged header could claim terabytes; refuse before allocating.
constexpr std::int64_t kMaxPayloadBytes = std::int64_t{1} << 34;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

struct IdxFile {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> payload;
};

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

Expected<GzHandle> open_file(const std::string& path) {
  errno = 0;
  GzHandle gz(gzopen(path.c_str(), "rb"));
  if (!gz) {
    if (errno == ENOENT || !std::filesystem::exists(path)) {
      return make_error(ErrorCode::NotFound, "data file '" + path + "' does not exist", kInstallHint);
    }
    return make_error(ErrorCode::Io, "cannot open data file '" + path + "'", "check its permissions");
  }
  gzbuffer(gz.get(), 1u << 20);  // fewer, larger reads of the compressed stream
  return gz;
}

// Reads up to `size` bytes, in pieces because gzread takes an unsigned int length.
// Returns the bytes read, or -1 when the stream is damaged beyond a short read.
std::int64_t read_fully(gzFile gz, std::uint8_t* out, std::int64_t size) {
  std::int64_t done = 0;
  while (done < size) {
    const auto piece = static_cast<unsigned>(std::min<std::int64_t>(size - done, 1 << 30));
    const int n = gzread(gz, out + done, piece);
    if (n < 0) return -1;
    if (n == 0) break;
    done += n;
  }
  return done;
}

std::uint32_t big_endian(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

Error truncated(const std::string& path, const std::string& what, std::int64_t expected, std::int64_t got, gzFile gz) {
  int zerr = Z_OK;
  const char* zmsg = gzerror(gz, &zerr);
  std::string detail = (zerr != Z_OK && zmsg && *zmsg) ? std::string(" (zlib: ") + zmsg + ")" : "";
  return make_error(ErrorCode::Corrupt,
                    "data file '" + path + "' is truncated: expected " + std::to_string(expected) +
                        " bytes of " + what + ", read " + std::to_string(got) + detail,
                    "the download or copy was interrupted; copy the file again (Fashion-MNIST: reinstall dataset-fashion-mnist)");
}

// Header: 4-byte magic (0, 0, type 0x08, number of dims), then each dim as big-endian u32.
Expected<std::vector<std::int64_t>> read_header(gzFile gz, const std::string& path, std::uint32_t magic,
                                                const char* kind) {
  std::uint8_t head[4];
  const std::int64_t got = read_fully(gz, head, 4);
  if (got != 4) return truncated(path, "header", 4, std::max<std::int64_t>(got, 0), gz);
  const std::uint32_t found = big_endian(head);
  if (found != magic) {
    return make_error(ErrorCode::Corrupt,
                      "data file '" + path + "' has the wrong magic number: expected " + hex32(magic) +
                          " (IDX " + kind + "), found " + hex32(found),
                      "check that the file is an IDX " + std::string(kind) +
                          " file and that image and label files are not swapped");
  }
  const int ndims = head[3];
  std::vector<std::uint8_t> raw(static_cast<std::size_t>(4 * ndims));
  const std::int64_t dims_got = read_fully(gz, raw.data(), 4 * ndims);
  if (dims_got != 4 * ndims) return truncated(path, "header", 4 * ndims, std::max<std::int64_t>(dims_got, 0), gz);
  std::vector<std::int64_t> dims;
  for (int d = 0; d < ndims; ++d) dims.push_back(big_endian(raw.data() + 4 * d));
  return dims;
}

Expected<IdxFile> read_idx(const std::string& path, std::uint32_t magic, const char* kind) {
  auto gz = open_file(path);
  if (!gz) return gz.error();
  auto dims = read_header(gz->get(), path, magic, kind);
  if (!dims) return dims.error();
  std::int64_t bytes = 1;
  for (std::size_t d = 0; d < dims->size(); ++d) {
    const std::int64_t dim = (*dims)[d];
    if (dim == 0 && d > 0) {
      return make_error(ErrorCode::Corrupt, "data file '" + path + "' declares a zero-sized dimension " +
                                                std::to_string(d), "the file header is damaged");
    }
    // Dims are below 2^32, so checking against the cap before multiplying cannot overflow.
    if (dim > 0 && bytes > kMaxPayloadBytes / dim) {
      return make_error(ErrorCode::Corrupt, "data file '" + path + "' declares an implausible size",
                        "the file header is damaged");
    }
    bytes *= dim;
  }
  IdxFile file{std::move(*dims), std::vector<std::uint8_t>(static_cast<std::size_t>(bytes))};
  const std::int64_t got = read_fully(gz->get(), file.payload.data(), static_cast<std::int64_t>(file.payload.size()));
  if (got != static_cast<std::int64_t>(file.payload.size())) {
    return truncated(path, std::string(kind) + " data", static_cast<std::int64_t>(file.payload.size()),
                     std::max<std::int64_t>(got, 0), gz->get());
  }
  return file;
}

}  // namespace

Expected<Dataset> read_idx_pair(const std::string& images_path, const std::string& labels_path) {
  auto images = read_idx(images_path, kImagesMagic, "images");
  if (!images) return images.error();
  auto labels = read_idx(labels_path, kLabelsMagic, "labels");
  if (!labels) return labels.error();
  const std::int64_t count = images->dims[0];
  if (labels->dims[0] != count) {
    return make_error(ErrorCode::Corrupt,
                      "image/label count mismatch: '" + images_path + "' has " + std::to_string(count) +
                          " images but '" + labels_path + "' has " + std::to_string(labels->dims[0]) + " labels",
                      "use image and label files from the same set (train or t10k)");
  }
  Dataset set;
  set.sample_shape = {1, images->dims[1], images->dims[2]};
  set.sample_size = images->dims[1] * images->dims[2];
  set.features.resize(images->payload.size());
  std::transform(images->payload.begin(), images->payload.end(), set.features.begin(),
                 [](std::uint8_t v) { return static_cast<float>(v) / 255.0f; });
  set.labels.assign(labels->payload.begin(), labels->payload.end());
  int max_label = -1;
  for (auto l : set.labels) max_label = std::max(max_label, static_cast<int>(l));
  set.classes = max_label + 1;
  return set;
}

}  // namespace loom::data
