// What a rank really ran on: the identity of its device, beyond the plan's label ("cpu",
// "gpu 0"). A rank fills it once its device is open (launcher/device describe_device),
// sends it to the host (the stream's Device frame) or writes it directly (one process),
// and the store keeps it per rank as JSON (ranks.device_info, schema v7) so that `show`,
// `compare`, the Runs list and reports can say "NVIDIA H200" instead of "one process".
//
// JSON keys (the store's column, `show --json` ranks[].device_info, the Chrome export):
//   kind "cpu" | "gpu"; name (CPU model or GPU name); memory_bytes (a gpu's total memory,
//   a cpu rank's host memory); logical_cores and blas_threads (cpu: the cores this process
//   may use, the BLAS threads the rank set); compute_capability ("9.0"; gpu); driver (the
//   NVIDIA driver, "580.159.04", "" when unreadable); cuda_driver (the CUDA version the
//   driver supports, "13.0"); cuda_runtime ("13.0"); nccl ("2.28.3" where the rank used
//   NCCL, else ""); machine (the kernel's boot id, one per running machine: ranks on
//   simulated hosts, network namespaces of one machine, share it and so its cores; not
//   shown, and not part of what groups ranks as alike). Zero and "" mean not known. A rank without an identity (runs stored
//   before schema v7, traces that do not carry one) has kind "" and is "not recorded".
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace loom::trace {

// Every text field is at most this long: the stream's decoder refuses longer ones, and
// readers of the store and of imported traces cut them.
inline constexpr std::size_t kMaxDeviceTextBytes = 256;
// Counts beyond this are not a machine's: refused on the wire, dropped when read.
inline constexpr int kMaxDeviceCount = 1 << 16;

struct DeviceInfo {
  std::string kind;  // "cpu", "gpu"; "" = not recorded
  std::string name;  // "AMD EPYC 7B13", "NVIDIA H200"
  std::int64_t memory_bytes = 0;
  int logical_cores = 0, blas_threads = 0;  // cpu ranks
  int compute_major = 0, compute_minor = 0;  // gpu ranks
  std::string driver, cuda_driver, cuda_runtime, nccl;
  std::string machine;  // /proc/sys/kernel/random/boot_id; "" where unread or not recorded

  bool recorded() const { return !kind.empty(); }
  bool operator==(const DeviceInfo&) const = default;
  // The same device whichever machine holds it: how `show` groups ranks.
  bool same_kind(const DeviceInfo& other) const;
};

// The JSON object above; null for an identity that was not recorded.
nlohmann::json device_info_to_json(const DeviceInfo& info);
// Tolerant: anything that is not an object with kind "cpu" or "gpu" is "not recorded";
// fields of the wrong type are left unknown, texts cut to kMaxDeviceTextBytes, counts
// outside 0..kMaxDeviceCount and negative sizes dropped. Never throws.
DeviceInfo device_info_from_json(const nlohmann::json& json);
// The store's text: "" when not recorded, else the JSON object dumped.
std::string device_info_to_text(const DeviceInfo& info);
DeviceInfo device_info_from_text(const std::string& text);  // "" or unparsable: not recorded

// In words, as `show` prints it per rank:
//   "NVIDIA H200, 139.7 GiB, compute 9.0, driver 580.159.04, CUDA 13.0, NCCL 2.28.3"
//   "cpu, AMD EPYC 7B13, 2 cores, 23.5 GiB, 1 BLAS thread"
//   "not recorded"
// Unknown fields are left out.
std::string describe_device(const DeviceInfo& info);
// As short as a list column allows: the GPU's name, or "cpu"; "" when not recorded.
std::string device_short_name(const DeviceInfo& info);

}  // namespace loom::trace
