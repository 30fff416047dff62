// Links between hosts learnt from runs across them (see host_links.h).
#include "loom/predict/host_links.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "loom/analysis/stats.h"
#include "loom/predict/calibration.h"
#include "loom/trace/machine.h"

namespace loom::predict {

namespace {

// The last value of a metric the run recorded; nullopt where none.
Expected<std::optional<double>> last_metric(store::RunStore& store, std::int64_t run_id, const std::string& name) {
  auto metrics = store.load_metrics(run_id, name);
  if (!metrics.ok()) return metrics.error();
  if (metrics->empty()) return std::optional<double>();
  return std::optional<double>(metrics->back().value);
}

// The probe's figure counts each message's latency as transfer time: a message of
// `bytes` took bytes / probe; the wire took that less one latency.
double bandwidth_less_latency(double probe_gbs, double bytes, double latency_us) {
  if (bytes <= 0) return probe_gbs;
  const double message_ms = bytes / (probe_gbs * 1e6);
  const double wire_ms = message_ms - latency_us / 1e3;
  return wire_ms > 0 ? bytes / (wire_ms * 1e6) : probe_gbs;
}

// The probe's figure between rank 0 and `first` (the first rank on its host): rank 1's is
// the run's "p2p_gbs", another's its own "host_p2p_gbs". nullopt where none was recorded
// (a run from before 2026-11-29 probed rank 1 only).
std::optional<double> probe_to(const std::vector<trace::MetricRecord>& p2p,
                               const std::vector<trace::MetricRecord>& host_p2p, int first) {
  const auto& figures = first == 1 ? p2p : host_p2p;
  for (auto it = figures.rbegin(); it != figures.rend(); ++it)
    if ((first == 1 || it->rank == first) && it->value > 0) return it->value;
  return std::nullopt;
}

// The metric `name` that rank `rank` recorded last; nullopt where none.
std::optional<double> rank_metric(const std::vector<trace::MetricRecord>& metrics, int rank) {
  for (auto it = metrics.rbegin(); it != metrics.rend(); ++it)
    if (it->rank == rank) return it->value;
  return std::nullopt;
}

const trace::RankRecord* rank_record(const std::vector<trace::RankRecord>& ranks, int rank) {
  for (const trace::RankRecord& r : ranks)
    if (r.rank == rank) return &r;
  return nullptr;
}

// Two ranks' hosts as one observation (hosts by name, the lower first), their cores
// shared where both ranks named one kernel.
LinkObservation between(const trace::RankRecord& a, const trace::RankRecord& b, std::int64_t run, double latency_us,
                        double bandwidth_gbs) {
  LinkObservation o;
  o.first = std::min(a.host, b.host);
  o.second = std::max(a.host, b.host);
  o.run = run;
  o.latency_us = latency_us;
  o.bandwidth_gbs = bandwidth_gbs;
  if (!a.device_info.machine.empty() && a.device_info.machine == b.device_info.machine)
    o.shared_cores = std::max(1, std::min(a.device_info.logical_cores, b.device_info.logical_cores));
  return o;
}

// The links between consecutive hosts neither of which is rank 0's, each measured from
// the first rank on the first of them (trace/machine.h's next-host metrics).
Expected<std::vector<LinkObservation>> observe_next_hosts(store::RunStore& store, std::int64_t run_id,
                                                         const std::vector<trace::RankRecord>& ranks, double probe_bytes) {
  auto peers = store.load_metrics(run_id, machine::kNextHostRankMetric);
  if (!peers.ok()) return peers.error();
  auto latency = store.load_metrics(run_id, machine::kNextHostLatencyMetric);
  if (!latency.ok()) return latency.error();
  auto gbs = store.load_metrics(run_id, machine::kNextHostP2pMetric);
  if (!gbs.ok()) return gbs.error();
  std::vector<LinkObservation> out;
  for (const trace::MetricRecord& peer : *peers) {
    const trace::RankRecord* from = rank_record(ranks, peer.rank);
    const trace::RankRecord* to = rank_record(ranks, int(peer.value));
    const std::optional<double> us = rank_metric(*latency, peer.rank), probe = rank_metric(*gbs, peer.rank);
    if (!from || !to || from->host == to->host || !us || !probe || *us <= 0 || *probe <= 0) continue;
    out.push_back(between(*from, *to, run_id, *us, bandwidth_less_latency(*probe, probe_bytes, *us)));
  }
  return out;
}

}  // namespace

Expected<std::vector<LinkObservation>> observe_links(store::RunStore& store, std::int64_t run_id) {
  auto ranks = store.load_ranks(run_id);
  if (!ranks.ok()) return ranks.error();
  std::vector<LinkObservation> out;
  if (ranks->empty() || (*ranks)[0].rank != 0) return out;  // rank 0 never reported
  auto p2p = store.load_metrics(run_id, "p2p_gbs");
  if (!p2p.ok()) return p2p.error();
  auto host_p2p = store.load_metrics(run_id, "host_p2p_gbs");
  if (!host_p2p.ok()) return host_p2p.error();
  auto bytes = last_metric(store, run_id, "p2p_probe_bytes");
  if (!bytes.ok()) return bytes.error();
  const std::string& home = (*ranks)[0].host;
  std::vector<std::string> seen = {home};
  for (const trace::RankRecord& r : *ranks) {
    if (std::find(seen.begin(), seen.end(), r.host) != seen.end()) continue;
    seen.push_back(r.host);
    const std::optional<double> probe = probe_to(*p2p, *host_p2p, r.rank);
    if (!probe || r.uncertainty_ns <= 0) continue;
    const double latency_us = double(r.uncertainty_ns) / 1e3;
    out.push_back(between((*ranks)[0], r, run_id, latency_us, bandwidth_less_latency(*probe, bytes->value_or(0.0), latency_us)));
  }
  auto next = observe_next_hosts(store, run_id, *ranks, bytes->value_or(0.0));
  if (!next.ok()) return next.error();
  out.insert(out.end(), next->begin(), next->end());
  return out;
}

std::vector<HostLink> fit_links(const std::vector<LinkObservation>& observations) {
  std::map<std::pair<std::string, std::string>, std::vector<const LinkObservation*>> by_pair;
  for (const LinkObservation& o : observations) by_pair[{o.first, o.second}].push_back(&o);
  std::vector<HostLink> out;
  for (const auto& [pair, seen] : by_pair) {
    HostLink h;
    h.first = pair.first, h.second = pair.second;
    std::vector<double> latency, bandwidth;
    h.shared_cores = seen.front()->shared_cores;
    for (const LinkObservation* o : seen) {
      h.runs.push_back(o->run);
      latency.push_back(o->latency_us), bandwidth.push_back(o->bandwidth_gbs);
      h.shared_cores = o->shared_cores > 0 ? std::min(h.shared_cores, o->shared_cores) : 0;
    }
    std::sort(h.runs.begin(), h.runs.end());
    h.link.measured = false;
    h.link.latency_us = analysis::median(latency, 0.0);
    h.link.bandwidth_gbs = analysis::median(bandwidth, 0.0);
    out.push_back(std::move(h));
  }
  return out;
}

const HostLink* find_link(const std::vector<HostLink>& links, const std::string& a, const std::string& b) {
  for (const HostLink& h : links)
    if ((h.first == a && h.second == b) || (h.first == b && h.second == a)) return &h;
  return nullptr;
}

namespace {

// "a and b", "a, b and c".
std::string hosts_text(const std::vector<std::string>& hosts) {
  std::string out;
  for (std::size_t i = 0; i < hosts.size(); ++i) out += (i == 0 ? "" : i + 1 == hosts.size() ? " and " : ", ") + hosts[i];
  return out;
}

std::string link_text(const Link& link) {
  char text[96];
  std::snprintf(text, sizeof text, "%.0f us and %.3g GB/s", link.latency_us, link.bandwidth_gbs);
  return text;
}

// The cores `hosts` share where links found each of them on one machine with the first
// (directly or through another); else 0.
int shared_cores_of(const std::vector<std::string>& hosts, const std::vector<HostLink>& links) {
  std::set<std::string> reached = {hosts.front()};
  int cores = 0;
  for (bool grew = true; grew;) {
    grew = false;
    for (const HostLink& h : links) {
      if (h.shared_cores <= 0 || reached.count(h.first) == reached.count(h.second)) continue;
      reached.insert(h.first), reached.insert(h.second);
      cores = cores == 0 ? h.shared_cores : std::min(cores, h.shared_cores);
      grew = true;
    }
  }
  const bool all = std::all_of(hosts.begin(), hosts.end(), [&](const std::string& host) { return reached.count(host) > 0; });
  return all ? cores : 0;
}

std::vector<std::int64_t> runs_of(const std::vector<HostLink>& links) {
  std::set<std::int64_t> runs;
  for (const HostLink& h : links) runs.insert(h.runs.begin(), h.runs.end());
  return {runs.begin(), runs.end()};
}

// Where links between more than one pair of the cluster's hosts were learnt, each pair
// keeps its own (Cluster::host_pairs); "a-b 12 us and 2.2 GB/s, ..." for the note, or ""
// where one pair or none stands for all.
std::string add_host_pairs(Cluster& c, const std::vector<std::string>& hosts, const std::vector<HostLink>& among) {
  if (among.size() < 2) return "";
  std::string text;
  const auto index = [&](const std::string& host) { return int(std::find(hosts.begin(), hosts.end(), host) - hosts.begin()); };
  for (const HostLink& h : among) {
    const int a = index(h.first), b = index(h.second);
    c.host_pairs[{std::min(a, b), std::max(a, b)}] = h.link;
    text += (text.empty() ? "" : ", ") + h.first + "-" + h.second + " " + link_text(h.link);
  }
  return text;
}

}  // namespace

std::optional<Link> median_link(const std::vector<HostLink>& links, std::string* why) {
  if (links.empty()) return std::nullopt;
  std::vector<double> latency, bandwidth;
  std::vector<std::int64_t> runs;
  for (const HostLink& h : links) {
    latency.push_back(h.link.latency_us), bandwidth.push_back(h.link.bandwidth_gbs);
    runs.insert(runs.end(), h.runs.begin(), h.runs.end());
  }
  Link out;
  out.measured = false;
  out.latency_us = analysis::median(latency, 0.0);
  out.bandwidth_gbs = analysis::median(bandwidth, 0.0);
  if (why) {
    const std::string pairs = links.size() == 1 ? "between " + links[0].first + " and " + links[0].second
                                                : "the median over " + std::to_string(links.size()) + " pairs of hosts";
    *why = "between hosts: " + link_text(out) + ", as " + runs_text(runs) + " measured it (" + pairs + ")";
  }
  return out;
}

Status fill_calibrated_link(Cluster& cluster, const std::vector<HostLink>& links, std::string* why) {
  if (!cluster.between_hosts.calibrated) return {};
  const std::optional<Link> learnt = median_link(links, why);
  if (!learnt)
    return make_error(ErrorCode::InvalidArgument,
                      "cluster '" + cluster.name + "': links.between_hosts is \"calibrated\", but no stored run measured a link "
                      "between two hosts",
                      "run a plan with ranks on two hosts once (its set-up measures their link), or give the link's "
                      "bandwidth_gbs and latency_us");
  cluster.between_hosts.latency_us = learnt->latency_us;
  cluster.between_hosts.bandwidth_gbs = learnt->bandwidth_gbs;
  return {};
}

bool PlanHosts::like_a_cluster() const {
  const bool even = std::all_of(per_host.begin(), per_host.end(), [&](int n) { return n == per_host.front(); });
  return even && std::set<std::string>(hosts.begin(), hosts.end()).size() == hosts.size();
}

PlanHosts hosts_of_plan(const Plan& plan) {
  PlanHosts out;
  for (const DeviceSpec& d : plan.parallel.devices) {
    if (out.hosts.empty() || out.hosts.back() != d.host) out.hosts.push_back(d.host), out.per_host.push_back(0);
    ++out.per_host.back();
  }
  return out;
}

std::optional<Cluster> cluster_of_plan_hosts(const Plan& plan, const std::vector<HostLink>& links,
                                             const std::string& this_host, std::string* note) {
  PlanHosts on = hosts_of_plan(plan);
  if (on.hosts.size() < 2) return std::nullopt;
  const auto say = [&](const std::string& text) {
    if (note) *note = text;
    return std::nullopt;
  };
  if (!on.like_a_cluster())
    return say("the plan's ranks sit on several hosts, not in equal runs of consecutive ranks: predicted as if every rank "
               "were on this machine (--cluster describes such a layout)");
  // Runs record the host's own name; a plan may call this machine "localhost".
  auto& [hosts, per_host] = on;
  if (!this_host.empty()) std::replace(hosts.begin(), hosts.end(), std::string("localhost"), this_host);
  std::vector<HostLink> among;  // the learnt links between two of the plan's hosts
  for (const HostLink& h : links)
    if (std::count(hosts.begin(), hosts.end(), h.first) && std::count(hosts.begin(), hosts.end(), h.second))
      among.push_back(h);
  std::string learnt_from;
  const std::optional<Link> learnt = median_link(among, &learnt_from);
  if (!learnt)
    return say("the plan's ranks sit on " + hosts_text(hosts) + ", and no stored run measured a link between two of "
               "them: predicted as if every rank were on this machine (run the plan there once, or --cluster)");
  Cluster c;
  c.name = hosts[0];
  for (std::size_t i = 1; i < hosts.size(); ++i) c.name += " + " + hosts[i];
  c.hosts = int(hosts.size());
  c.devices_per_host = per_host.front();
  c.between_hosts = *learnt;
  c.shared_cores = shared_cores_of(hosts, among);
  const std::string pairs = add_host_pairs(c, hosts, among);
  if (note) {
    *note = "ranks on " + c.name + ", " + std::to_string(c.devices_per_host) + " each; ";
    if (pairs.empty()) *note += learnt_from;
    else if (c.host_pairs.size() == hosts.size() * (hosts.size() - 1) / 2)
      *note += "between hosts, each pair as " + runs_text(runs_of(among)) + " measured it: " + pairs;
    else *note += learnt_from + " for a pair not measured; each pair as measured: " + pairs;
    if (c.shared_cores > 0)
      *note += "; the hosts are one machine's (their ranks ran on one kernel), sharing its " +
               std::to_string(c.shared_cores) + (c.shared_cores == 1 ? " core" : " cores");
  }
  return c;
}

}  // namespace loom::predict
