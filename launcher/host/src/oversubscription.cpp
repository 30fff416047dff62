// Oversubscription detection (see oversubscription.h).
#include "loom/host/oversubscription.h"

#include <algorithm>

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

Oversubscription detect_oversubscription(const Plan& plan, const std::string& this_host, int local_cores,
                                         const std::map<std::string, int>& known_cores) {
  Oversubscription result;
  for (const auto& [host, ranks] : ranks_per_host(plan, this_host)) {
    HostLoad load{host, ranks, 0};
    if (host == "localhost") {
      load.cores = std::max(0, local_cores);
    } else if (auto it = known_cores.find(host); it != known_cores.end()) {
      load.cores = std::max(0, it->second);
    }
    result.hosts.push_back(load);
  }
  return result;
}

Oversubscription oversubscription_here(const Plan& plan) {
  return detect_oversubscription(plan, machine::host_name(), cores_available());
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
