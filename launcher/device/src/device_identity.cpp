// describe_device and its parsers (open_device.h): the same in every build; the gpu's
// own facts come from describe_gpu, which the build's open_device file implements.
#include <cctype>
#include <fstream>
#include <iterator>
#include <sstream>

#include "describe_gpu.h"
#include "loom/device/open_device.h"
#include "loom/trace/machine.h"

namespace loom::device {
namespace {

std::string read_file(const char* path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string trimmed(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// "580.159.04", "535.54": digits, a dot, digits, and more of either.
bool looks_like_version(const std::string& token) {
  const auto dot = token.find('.');
  if (dot == 0 || dot == std::string::npos || dot + 1 >= token.size()) return false;
  for (char c : token)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.') return false;
  return true;
}

}  // namespace

std::string cpu_model_from_cpuinfo(const std::string& cpuinfo) {
  std::istringstream lines(cpuinfo);
  for (std::string line; std::getline(lines, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || trimmed(line.substr(0, colon)) != "model name") continue;
    return trimmed(line.substr(colon + 1));
  }
  return {};
}

std::string nvidia_driver_from_proc(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("NVRM version:", 0) != 0) continue;
    std::istringstream tokens(line.substr(13));
    for (std::string token; tokens >> token;)
      if (looks_like_version(token)) return token;
  }
  return {};
}

std::string cuda_version_text(int version) {
  if (version <= 0) return {};
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

trace::DeviceInfo describe_device(const DeviceSpec& device, int blas_threads) {
  if (device.kind == DeviceKind::Gpu) {
    trace::DeviceInfo gpu = detail::describe_gpu(device.gpu);
    gpu.driver = nvidia_driver_from_proc(read_file("/proc/driver/nvidia/version"));
    gpu.machine = machine::machine_id();
    return gpu;
  }
  trace::DeviceInfo cpu;
  cpu.kind = "cpu";
  cpu.name = cpu_model_from_cpuinfo(read_file("/proc/cpuinfo")).substr(0, trace::kMaxDeviceTextBytes);
  cpu.logical_cores = machine::cores_available();
  cpu.memory_bytes = machine::physical_memory_bytes();
  cpu.blas_threads = blas_threads;
  cpu.machine = machine::machine_id();
  return cpu;
}

}  // namespace loom::device
