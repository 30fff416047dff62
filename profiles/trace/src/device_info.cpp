// A rank's device identity as JSON and in words (device_info.h).
#include "loom/trace/device_info.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace loom::trace {
namespace {

using nlohmann::json;

std::string text_of(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  std::string s = it->get<std::string>();
  if (s.size() > kMaxDeviceTextBytes) s.resize(kMaxDeviceTextBytes);
  return s;
}

int count_of(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return 0;
  const std::int64_t v = it->get<std::int64_t>();
  return v >= 0 && v <= kMaxDeviceCount ? int(v) : 0;
}

std::int64_t bytes_of(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return 0;
  const std::int64_t v = it->get<std::int64_t>();
  return v > 0 ? v : 0;
}

// "9.0" -> 9 and 0; anything else leaves both 0.
void read_capability(const std::string& text, DeviceInfo& info) {
  int major = 0, minor = 0;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%d.%d%c", &major, &minor, &extra) != 2) return;
  if (major < 0 || major > 99 || minor < 0 || minor > 99) return;
  info.compute_major = major;
  info.compute_minor = minor;
}

std::string format_gib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(1LL << 30));
  return buf;
}

std::string plural(int n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }

}  // namespace

json device_info_to_json(const DeviceInfo& info) {
  if (!info.recorded()) return nullptr;
  const bool capability = info.compute_major > 0;
  return {{"kind", info.kind},
          {"name", info.name},
          {"memory_bytes", info.memory_bytes},
          {"logical_cores", info.logical_cores},
          {"blas_threads", info.blas_threads},
          {"compute_capability",
           capability ? std::to_string(info.compute_major) + "." + std::to_string(info.compute_minor) : ""},
          {"driver", info.driver},
          {"cuda_driver", info.cuda_driver},
          {"cuda_runtime", info.cuda_runtime},
          {"nccl", info.nccl},
          {"machine", info.machine}};
}

DeviceInfo device_info_from_json(const json& j) {
  DeviceInfo info;
  if (!j.is_object()) return info;
  const std::string kind = text_of(j, "kind");
  if (kind != "cpu" && kind != "gpu") return info;
  info.kind = kind;
  info.name = text_of(j, "name");
  info.memory_bytes = bytes_of(j, "memory_bytes");
  info.logical_cores = count_of(j, "logical_cores");
  info.blas_threads = count_of(j, "blas_threads");
  read_capability(text_of(j, "compute_capability"), info);
  info.driver = text_of(j, "driver");
  info.cuda_driver = text_of(j, "cuda_driver");
  info.cuda_runtime = text_of(j, "cuda_runtime");
  info.nccl = text_of(j, "nccl");
  info.machine = text_of(j, "machine");
  return info;
}

bool DeviceInfo::same_kind(const DeviceInfo& other) const {
  DeviceInfo mine = *this;
  mine.machine = other.machine;
  return mine == other;
}

std::string device_info_to_text(const DeviceInfo& info) {
  return info.recorded() ? device_info_to_json(info).dump() : std::string();
}

DeviceInfo device_info_from_text(const std::string& text) {
  if (text.empty()) return {};
  return device_info_from_json(json::parse(text, nullptr, /*allow_exceptions=*/false));
}

std::string describe_device(const DeviceInfo& info) {
  if (!info.recorded()) return "not recorded";
  std::string out;
  auto add = [&out](const std::string& part) {
    if (part.empty()) return;
    if (!out.empty()) out += ", ";
    out += part;
  };
  if (info.kind == "cpu") {
    add("cpu");
    add(info.name);
    if (info.logical_cores > 0) add(plural(info.logical_cores, "core", "cores"));
    if (info.memory_bytes > 0) add(format_gib(info.memory_bytes));
    if (info.blas_threads > 0) add(plural(info.blas_threads, "BLAS thread", "BLAS threads"));
    return out;
  }
  add(info.name.empty() ? "gpu" : info.name);
  if (info.memory_bytes > 0) add(format_gib(info.memory_bytes));
  if (info.compute_major > 0) add("compute " + std::to_string(info.compute_major) + "." + std::to_string(info.compute_minor));
  if (!info.driver.empty()) {
    add("driver " + info.driver);
  } else if (!info.cuda_driver.empty()) {
    add("driver for CUDA " + info.cuda_driver);
  }
  if (!info.cuda_runtime.empty()) add("CUDA " + info.cuda_runtime);
  if (!info.nccl.empty()) add("NCCL " + info.nccl);
  return out;
}

std::string device_short_name(const DeviceInfo& info) {
  if (!info.recorded()) return {};
  if (info.kind == "cpu") return "cpu";
  return info.name.empty() ? "gpu" : info.name;
}

}  // namespace loom::trace
