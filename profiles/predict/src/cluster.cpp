// Cluster files (see cluster.h): parsing with errors that name the field, and the link
// costs.
#include "loom/predict/cluster.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "loom/core/mpi_allreduce.h"

namespace loom::predict {

bool Cluster::spans_hosts(const std::vector<int>& ranks) const {
  return std::any_of(ranks.begin(), ranks.end(), [&](int r) { return host_of(r) != host_of(ranks.front()); });
}

const Link& Cluster::link(int a, int b) const {
  const int ha = host_of(a), hb = host_of(b);
  if (ha == hb) return inside_host;
  const auto pair = host_pairs.find({std::min(ha, hb), std::max(ha, hb)});
  return pair != host_pairs.end() ? pair->second : between_hosts;
}

Link Cluster::ring_link(const std::vector<int>& ranks) const {
  if (!spans_hosts(ranks)) return inside_host;
  if (host_pairs.empty()) return between_hosts;
  Link worst = between_hosts;
  bool first = true;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int a = ranks[i], b = ranks[(i + 1) % ranks.size()];
    if (host_of(a) == host_of(b)) continue;
    const Link& hop = link(a, b);
    if (first) worst = hop, first = false;
    worst.latency_us = std::max(worst.latency_us, hop.latency_us);
    worst.bandwidth_gbs = std::min(worst.bandwidth_gbs, hop.bandwidth_gbs);
    worst.measured = worst.measured && hop.measured;
  }
  return worst;
}

std::vector<Link> Cluster::ring_hops(const std::vector<int>& ranks) const {
  std::vector<Link> hops;
  for (std::size_t i = 0; i < ranks.size(); ++i) hops.push_back(link(ranks[i], ranks[(i + 1) % ranks.size()]));
  return hops;
}

double ring_allreduce_ms(const std::vector<Link>& hops, double bytes) {
  const std::size_t p = hops.size();
  if (p < 2) return 0;
  // start[i]: when rank i starts sending its current chunk; arrive[i]: when it arrives.
  std::vector<double> start(p, 0.0), arrive(p, 0.0), previous(p, 0.0);
  const auto send_ms = [&](std::size_t i) { return bytes / double(p) / (hops[i].bandwidth_gbs * 1e6); };
  for (std::size_t i = 0; i < p; ++i) arrive[i] = send_ms(i) + hops[i].latency_us / 1e3;
  for (std::size_t step = 1; step < 2 * (p - 1); ++step) {
    previous = arrive;
    for (std::size_t i = 0; i < p; ++i) {
      start[i] = std::max(previous[(i + p - 1) % p], start[i] + send_ms(i));
      arrive[i] = start[i] + send_ms(i) + hops[i].latency_us / 1e3;
    }
  }
  return *std::max_element(arrive.begin(), arrive.end());
}

double ring_allreduce_ms(const Link& link, int ranks, double bytes) {
  if (ranks < 2) return 0;
  const double steps = 2.0 * (ranks - 1);
  return steps * (link.latency_us / 1e3 + bytes / ranks / (link.bandwidth_gbs * 1e6));
}

double tree_allreduce_ms(const Link& link, int ranks, double bytes) {
  if (ranks < 2) return 0;
  const double depth = std::floor(std::log2(double(ranks)));
  return 2.0 * depth * link.latency_us / 1e3 + 2.0 * bytes / (link.bandwidth_gbs * 1e6);
}

namespace {

double flat_ms(const Link& link, int ranks, double bytes) {
  return std::min(ring_allreduce_ms(link, ranks, bytes), tree_allreduce_ms(link, ranks, bytes));
}

// Inside a host the k ranks reduce-scatter and all-gather in rings (each k - 1 steps of
// bytes / k); between hosts each of the k shards is all-reduced by one rank per host, over
// `between` (the slowest link of a ring through the hosts).
double hierarchical_ms(const Cluster& c, const Link& between, int per_host, int hosts, double bytes) {
  const double inside = (per_host - 1) * (c.inside_host.latency_us / 1e3 + bytes / per_host / (c.inside_host.bandwidth_gbs * 1e6));
  return 2 * inside + flat_ms(between, hosts, bytes / per_host);
}

// A ring through these ranks: over each hop's own link where pairs of hosts have their
// own, else over the one link every hop crosses. (A hop inside a host whose link is the
// calibration's, with no figures, leaves the ring to its slowest hop.)
double ring_ms(const Cluster& c, const std::vector<int>& ranks, double bytes) {
  const std::vector<Link> hops = c.ring_hops(ranks);
  const bool figures = std::none_of(hops.begin(), hops.end(), [](const Link& h) { return h.measured; });
  if (c.host_pairs.empty() || !c.spans_hosts(ranks) || !figures)
    return ring_allreduce_ms(c.ring_link(ranks), int(ranks.size()), bytes);
  return ring_allreduce_ms(hops, bytes);
}

// The first of `ranks` on each host they use, in their order.
std::vector<int> one_per_host(const Cluster& c, const std::vector<int>& ranks) {
  std::vector<int> heads;
  for (int r : ranks)
    if (std::none_of(heads.begin(), heads.end(), [&](int h) { return c.host_of(h) == c.host_of(r); })) heads.push_back(r);
  return heads;
}

}  // namespace

double allreduce_ms(const Cluster& c, const std::vector<int>& ranks, double bytes, std::string* algorithm) {
  const Link link = c.ring_link(ranks);
  const int p = int(ranks.size());
  const double ring = ring_ms(c, ranks, bytes), tree = tree_allreduce_ms(link, p, bytes);
  double best = std::min(ring, tree);
  std::string name = ring <= tree ? "ring" : "tree";
  std::map<int, int> per_host;
  for (int r : ranks) ++per_host[c.host_of(r)];
  const int k = per_host.begin()->second;
  const bool even = std::all_of(per_host.begin(), per_host.end(), [&](const auto& h) { return h.second == k; });
  if (per_host.size() > 1 && k > 1 && even && !c.inside_host.measured) {
    const double h = hierarchical_ms(c, c.ring_link(one_per_host(c, ranks)), k, int(per_host.size()), bytes);
    if (h < best) best = h, name = "hierarchical";
  }
  if (algorithm) *algorithm = name;
  return best;
}

double mpi_allreduce_ms(const Cluster& c, const std::vector<int>& ranks, double bytes, std::string* algorithm) {
  const Link link = c.ring_link(ranks);
  const int p = int(ranks.size());
  const auto say = [&](const char* name, double ms) {
    if (algorithm) *algorithm = name;
    return ms;
  };
  switch (mpi_allreduce_algorithm(p, std::int64_t(std::ceil(bytes / sizeof(float))))) {
    case MpiAllreduce::NonBlocking: return say("tree", tree_allreduce_ms(link, p, bytes));
    case MpiAllreduce::RecursiveDoubling: return say("recursive doubling", std::log2(double(p)) * link.ms(bytes));
    case MpiAllreduce::Ring: break;
  }
  return say("ring", ring_ms(c, ranks, bytes));
}

namespace {

using nlohmann::json;

Error field_error(const std::string& where, const std::string& field, const std::string& what) {
  return make_error(ErrorCode::InvalidArgument, where + ": " + field + " " + what,
                    "docs/prediction.md, \"Clusters\", lists the fields");
}

// A number at `key` of `object`, > 0 (>= 0 when zero_ok); `fallback` when absent.
Expected<double> positive(const json& object, const std::string& key, double fallback, const std::string& where,
                          const std::string& path, bool zero_ok = false) {
  if (!object.contains(key)) return fallback;
  const json& v = object.at(key);
  if (!v.is_number()) return field_error(where, path + key, "must be a number");
  const double x = v.get<double>();
  if (!(zero_ok ? x >= 0 : x > 0) || x > 1e12) return field_error(where, path + key, zero_ok ? "must be 0 or more" : "must be more than 0");
  return x;
}

Expected<Link> parse_link(const json& j, const std::string& key, const std::string& where, bool may_be_measured) {
  Link link;
  if (!j.contains(key)) {
    if (may_be_measured) return link;
    return field_error(where, key, "is missing (a link needs bandwidth_gbs and latency_us)");
  }
  const json& l = j.at(key);
  if (key == "between_hosts" && l.is_string() && l.get<std::string>() == "calibrated") {
    link.measured = false, link.calibrated = true;
    return link;
  }
  if (!l.is_object())
    return field_error(where, key,
                       std::string("must be an object {\"bandwidth_gbs\": ..., \"latency_us\": ...}") +
                           (key == "between_hosts" ? " or \"calibrated\"" : ""));
  const std::string path = key + ".";
  if (!l.contains("bandwidth_gbs")) return field_error(where, path + "bandwidth_gbs", "is missing");
  auto bw = positive(l, "bandwidth_gbs", 0, where, path);
  if (!bw.ok()) return bw.error();
  auto latency = positive(l, "latency_us", 0, where, path, true);
  if (!latency.ok()) return latency.error();
  link.measured = false;
  link.bandwidth_gbs = *bw;
  link.latency_us = *latency;
  return link;
}

Expected<ClusterDevice> parse_device(const json& j, const std::string& where) {
  ClusterDevice d;
  if (!j.contains("device")) return d;  // this machine's, calibrated
  const json& o = j.at("device");
  if (o.is_string() && o.get<std::string>() == "calibrated") return d;
  if (!o.is_object()) return field_error(where, "device", "must be \"calibrated\" or an object with peak_tflops and memory_bandwidth_gbs");
  d.calibrated = false;
  d.name = o.value("name", std::string("roofline device"));
  struct Field {
    const char* key;
    double* value;
    bool required;
  };
  for (const Field& f : {Field{"peak_tflops", &d.peak_tflops, true}, Field{"memory_bandwidth_gbs", &d.memory_bandwidth_gbs, true},
                         Field{"host_link_gbs", &d.host_link_gbs, false}, Field{"launch_us", &d.launch_us, false},
                         Field{"efficiency", &d.efficiency, false}, Field{"memory_gib", &d.memory_gib, false}}) {
    if (f.required && !o.contains(f.key)) return field_error(where, std::string("device.") + f.key, "is missing");
    const bool zero_ok = std::string(f.key) == "launch_us" || std::string(f.key) == "memory_gib";
    auto v = positive(o, f.key, *f.value, where, "device.", zero_ok);
    if (!v.ok()) return v.error();
    *f.value = *v;
  }
  if (d.efficiency > 1) return field_error(where, "device.efficiency", "must be at most 1 (a share of the peaks)");
  return d;
}

Expected<int> count(const json& j, const std::string& key, const std::string& where) {
  if (!j.contains(key)) return 1;
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 65536)
    return field_error(where, key, "must be a whole number from 1 to 65536");
  return int(v.get<long long>());
}

}  // namespace

Expected<Cluster> cluster_from_json(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return make_error(ErrorCode::InvalidArgument, where + " is not JSON: " + e.what());
  }
  if (!j.is_object()) return field_error(where, "the top level", "must be an object");
  Cluster c;
  c.name = j.value("name", std::string("cluster"));
  auto hosts = count(j, "hosts", where);
  if (!hosts.ok()) return hosts.error();
  auto per_host = count(j, "devices_per_host", where);
  if (!per_host.ok()) return per_host.error();
  c.hosts = *hosts, c.devices_per_host = *per_host;
  auto device = parse_device(j, where);
  if (!device.ok()) return device.error();
  c.device = *device;
  const json links = j.value("links", json::object());
  if (!links.is_object()) return field_error(where, "links", "must be an object with inside_host and between_hosts");
  // Inside a host of this machine's kind its runs measured the messages; a roofline device
  // has no such runs, so several of them on a host need the link said.
  auto inside = parse_link(links, "inside_host", where + " links", c.device.calibrated || c.devices_per_host == 1);
  if (!inside.ok()) return inside.error();
  auto between = parse_link(links, "between_hosts", where + " links", c.hosts == 1);
  if (!between.ok()) return between.error();
  c.inside_host = *inside, c.between_hosts = *between;
  if (j.contains("shared_cores")) {
    if (!c.device.calibrated) return field_error(where, "shared_cores", "needs the calibrated device (this machine's cores)");
    auto cores = count(j, "shared_cores", where);
    if (!cores.ok()) return cores.error();
    c.shared_cores = *cores;
  }
  return c;
}

Expected<Cluster> load_cluster(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::NotFound, "cannot read cluster file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return cluster_from_json(text.str(), "cluster file '" + path + "'");
}

}  // namespace loom::predict
