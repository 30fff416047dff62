// Ranks' device identities grouped and named (device_identity.h).
#include "loom/analysis/device_identity.h"

#include <algorithm>

#include "loom/analysis/analysis.h"

namespace loom::analysis {

std::vector<DeviceGroup> group_devices(const std::vector<std::pair<int, trace::DeviceInfo>>& ranks) {
  std::vector<std::pair<int, trace::DeviceInfo>> sorted = ranks;
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<DeviceGroup> groups;
  for (auto& entry : sorted) {
    // Named, not a structured binding: older clang cannot capture a binding in a lambda.
    const int rank = entry.first;
    trace::DeviceInfo& info = entry.second;
    auto same = std::find_if(groups.begin(), groups.end(), [&info](const DeviceGroup& g) { return g.info.same_kind(info); });
    if (same == groups.end()) {
      groups.push_back({{rank}, std::move(info)});
    } else {
      same->ranks.push_back(rank);
    }
  }
  return groups;
}

std::vector<DeviceGroup> group_devices(const std::vector<trace::RankRecord>& ranks) {
  std::vector<std::pair<int, trace::DeviceInfo>> pairs;
  pairs.reserve(ranks.size());
  for (const trace::RankRecord& r : ranks) pairs.emplace_back(r.rank, r.device_info);
  return group_devices(pairs);
}

bool any_device_recorded(const std::vector<DeviceGroup>& groups) {
  return std::any_of(groups.begin(), groups.end(), [](const DeviceGroup& g) { return g.info.recorded(); });
}

std::string ranks_text(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return "rank " + std::to_string(ranks.front());
  std::string out = "ranks ";
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

namespace {
std::string joined_names(const std::vector<DeviceGroup>& groups, bool cpu_model) {
  std::vector<std::string> names;
  for (const DeviceGroup& g : groups) {
    std::string name = trace::device_short_name(g.info);
    if (cpu_model && g.info.kind == "cpu" && !g.info.name.empty()) name += " (" + g.info.name + ")";
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : " + ") + n;
  return out;
}
}  // namespace

std::string devices_short(const std::vector<DeviceGroup>& groups) { return joined_names(groups, false); }
std::string devices_named(const std::vector<DeviceGroup>& groups) { return joined_names(groups, true); }

std::vector<std::string> device_lines(const std::vector<DeviceGroup>& groups) {
  std::vector<std::string> lines;
  for (const DeviceGroup& g : groups) lines.push_back(ranks_text(g.ranks) + ": " + trace::describe_device(g.info));
  return lines;
}

nlohmann::json devices_json(const std::vector<DeviceGroup>& groups) {
  nlohmann::json out = nlohmann::json::array();
  for (const DeviceGroup& g : groups)
    out.push_back({{"ranks", g.ranks},
                   {"text", trace::describe_device(g.info)},
                   {"device_info", trace::device_info_to_json(g.info)}});
  return out;
}

void attach_devices(RunSummary& s, const std::vector<trace::RankRecord>& records) {
  for (RankBreakdown& b : s.ranks)
    for (const trace::RankRecord& r : records)
      if (r.rank == b.rank) b.device_info = r.device_info;
  std::vector<std::pair<int, trace::DeviceInfo>> pairs;
  for (const RankBreakdown& b : s.ranks) pairs.emplace_back(b.rank, b.device_info);
  s.devices = group_devices(pairs);
}

}  // namespace loom::analysis
