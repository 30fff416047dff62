// Oversubscription detection (see oversubscription.h).
#include "loom/host/oversubscription.h"

#include <algorithm>
#include <filesystem>

#include "loom/host/launch_command.h"
#include "loom/store/run_store.h"
#include "loom/trace/machine.h"

namespace loom::host {

bool Oversubscription::any() const {
  return std::any_of(hosts.begin(), hosts.end(), [](const HostLoad& h) { return h.oversubscribed(); });
}

const HostLoad* Oversubscription::worst() const {
  const HostLoad* worst = nullptr;
  for (const HostLoad& h : hosts) {
    if (!h.oversubscribed()) continue;
    // ranks/cores compared without division: a/b > c/d  <=>  a*d > c*b
    if (!worst || h.ranks * worst->cores > worst->ranks * h.cores) worst = &h;
  }
  return worst;
}

std::vector<std::string> Oversubscription::messages() const {
  std::vector<std::string> out;
  for (const HostLoad& h : hosts) {
    if (!h.oversubscribed()) continue;
    out.push_back(std::to_string(h.ranks) + " ranks share " + std::to_string(h.cores) + " core" +
                  (h.cores == 1 ? "" : "s") + " on " + h.host +
                  ": ranks take turns on the cores, so step times and communication waits include time a rank "
                  "waited for a core; expect lower throughput than 1 process");
  }
  return out;
}

std::vector<std::pair<std::string, int>> ranks_per_host(const Plan& plan, const std::string& this_host) {
  std::vector<std::pair<std::string, int>> hosts;
  const int ranks = world_size(plan);
  for (int r = 0; r < ranks; ++r) {
    const auto& devices = plan.parallel.devices;
    std::string host = std::size_t(r) < devices.size() ? devices[std::size_t(r)].host : "localhost";
    if (is_local_host(host, this_host)) host = "localhost";
    auto it = std::find_if(hosts.begin(), hosts.end(), [&](const auto& h) { return h.first == host; });
    if (it == hosts.end()) hosts.emplace_back(host, 1);
    else ++it->second;
  }
  return hosts;
}

namespace {

// "this machine, whose network namespaces the plan names as hosts (loom-a, loom-b)"
std::string this_machine_with(const std::set<std::string>& namespace_hosts) {
  std::string names;
  for (const std::string& host : namespace_hosts) names += (names.empty() ? "" : ", ") + host;
  return "this machine, whose network namespaces the plan names as hosts (" + names + ")";
}

}  // namespace

Oversubscription detect_oversubscription(const Plan& plan, const std::string& this_host, int local_cores,
                                         const std::map<std::string, int>& known_cores,
                                         const std::set<std::string>& namespace_hosts) {
  Oversubscription result;
  std::optional<std::size_t> here;  // this machine's load, its namespaces' ranks included
  std::set<std::string> named;      // the namespaces the plan places ranks on
  for (const auto& [host, ranks] : ranks_per_host(plan, this_host)) {
    const bool in_namespace = namespace_hosts.count(host) > 0;
    if (host == "localhost" || in_namespace) {
      if (in_namespace) named.insert(host);
      if (!here) {
        here = result.hosts.size();
        result.hosts.push_back(HostLoad{"localhost", 0, std::max(0, local_cores)});
      }
      result.hosts[*here].ranks += ranks;
      continue;
    }
    HostLoad load{host, ranks, 0};
    if (auto it = known_cores.find(host); it != known_cores.end()) load.cores = std::max(0, it->second);
    result.hosts.push_back(load);
  }
  if (here && !named.empty()) result.hosts[*here].host = this_machine_with(named);
  return result;
}

std::set<std::string> namespace_hosts(const Plan& plan, const std::string& netns_dir) {
  std::set<std::string> found;
  std::error_code ignored;
  for (const DeviceSpec& device : plan.parallel.devices) {
    const std::string& host = device.host;
    if (host.empty() || host.find('/') != std::string::npos || host == "." || host == "..") continue;
    if (std::filesystem::exists(std::filesystem::path(netns_dir) / host, ignored)) found.insert(host);
  }
  return found;
}

Oversubscription oversubscription_here(const Plan& plan) {
  return detect_oversubscription(plan, machine::host_name(), cores_available(), {}, namespace_hosts(plan));
}

Expected<std::optional<HostLoad>> recorded_oversubscription(store::RunStore& store, std::int64_t run_id) {
  auto ranks = store.load_metrics(run_id, kOversubscribedRanksMetric);
  if (!ranks.ok()) return ranks.error();
  auto cores = store.load_metrics(run_id, kOversubscribedCoresMetric);
  if (!cores.ok()) return cores.error();
  if (ranks->empty() || cores->empty()) return std::optional<HostLoad>();
  return std::optional<HostLoad>(HostLoad{"", int(ranks->back().value), int(cores->back().value)});
}

}  // namespace loom::host
