// What a run ran on, per rank and grouped: the ranks' device identities (trace::DeviceInfo,
// stored per rank) gathered for `show`, `compare`, the Runs list and reports. Ranks with
// the same identity form one group ("ranks 0-3: NVIDIA H200, ..."), so a 64-rank run on
// one kind of GPU reads as one line. Like run_mode (compare.h), the short words a list
// shows are made here, where ui/models can reach them; the longer text is loom_text's.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/trace/records.h"

namespace loom::analysis {

struct DeviceGroup {
  std::vector<int> ranks;  // ascending
  trace::DeviceInfo info;  // not recorded (kind "") for ranks that did not say
};

// Identical identities grouped, groups ordered by their first rank.
std::vector<DeviceGroup> group_devices(const std::vector<std::pair<int, trace::DeviceInfo>>& ranks);
std::vector<DeviceGroup> group_devices(const std::vector<trace::RankRecord>& ranks);
// True when any group holds a recorded identity.
bool any_device_recorded(const std::vector<DeviceGroup>& groups);

// "rank 0", "ranks 0-3", "ranks 0-1, 5"; runs of consecutive ranks become ranges.
std::string ranks_text(const std::vector<int>& ranks);
// For a list's mode column: the recorded groups' short names (trace::device_short_name),
// each once, in rank order, joined by " + ": "NVIDIA H200", "cpu", "NVIDIA H200 + cpu";
// "" when nothing was recorded.
std::string devices_short(const std::vector<DeviceGroup>& groups);
// As devices_short, with a cpu's model where known, for a caption with room for it:
// "cpu (AMD EPYC 7B13)", "NVIDIA H200 + cpu (AMD EPYC 7B13)".
std::string devices_named(const std::vector<DeviceGroup>& groups);
// One line per group, as `show` and tooltips print them: "ranks 0-3: NVIDIA H200, 139.7
// GiB, compute 9.0, ..."; ranks that did not say are "rank 4: not recorded".
std::vector<std::string> device_lines(const std::vector<DeviceGroup>& groups);
// [{ranks: [0, 1], text: "NVIDIA H200, ...", device_info: {...} | null}] (device_info.h keys).
nlohmann::json devices_json(const std::vector<DeviceGroup>& groups);

}  // namespace loom::analysis
