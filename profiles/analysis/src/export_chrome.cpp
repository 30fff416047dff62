// Chrome Trace Event export. Preparing (alignment, time origin, nesting) is shared by the
// in-memory document and the streaming file writer, so both produce the same trace; the
// writer emits one event per line without ever holding the whole document.
#include "loom/analysis/export_chrome.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "loom/analysis/analysis.h"
#include "loom/core/plan.h"
#include "loom/trace/clock_align.h"

namespace loom::chrome {
namespace {

using nlohmann::json;
using trace::Event;

struct Slice {
  int pid = 0;
  int tid = 0;  // stream index on lane 0; kLaneStride * lane + stream on extra lanes
  Event e;      // on rank 0's clock
};

// Work that overlaps on one stream (several all-reduce buckets in flight) cannot nest on
// one thread, and clipping would misstate how long each took: such a slice goes to an
// extra lane of its stream, shown as its own thread ("comm #2").
constexpr int kLaneStride = 16;

// A message from a Send slice to its Recv slice (indices into Prepared::slices).
struct Flow {
  std::size_t send = 0, recv = 0;
};

struct Prepared {
  json metadata = json::array();     // "M" events: process and thread names, sort order
  std::vector<Slice> slices;         // sorted by pid, tid, start asc, end desc
  std::vector<Flow> flows;           // ordered by send slice; the flow id is the index
  json header = json::object();      // every top-level key except traceEvents
  std::vector<std::string> layer_names;  // by LayerId; empty when the plan does not parse
  std::int64_t t0 = 0;               // time origin: earliest aligned start, rank 0's clock
  ExportStats stats;
};

int stream_of(const Event& e) { return static_cast<int>(e.stream); }

std::string thread_name(int tid) {
  const std::string stream(trace::stream_name(static_cast<trace::Stream>(tid % kLaneStride)));
  return tid < kLaneStride ? stream : stream + " #" + std::to_string(tid / kLaneStride + 1);
}

std::string backend_of(const std::string& plan_json) {
  const json plan = json::parse(plan_json, nullptr, /*allow_exceptions=*/false);
  if (plan.is_object()) {
    auto parallel = plan.find("parallel");
    if (parallel != plan.end() && parallel->is_object()) {
      auto backend = parallel->find("backend");
      if (backend != parallel->end() && backend->is_string()) return backend->get<std::string>();
    }
  }
  return "mpi";  // the default backend of a plan
}

json metadata_event(const char* name, int pid, int tid, json args) {
  return {{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

void add_process_metadata(json& out, const trace::RankRecord& r) {
  const std::string process = "rank " + std::to_string(r.rank) + (r.host.empty() ? "" : " (" + r.host + ")");
  out.push_back(metadata_event("process_name", r.rank, 0, {{"name", process}}));
  out.push_back(metadata_event("process_sort_index", r.rank, 0, {{"sort_index", r.rank}}));
}

// Thread names for every (pid, tid) that has slices; lanes sort right after their stream.
void add_thread_metadata(json& out, const std::vector<Slice>& slices) {
  std::set<std::pair<int, int>> threads;
  for (const Slice& s : slices) threads.insert({s.pid, s.tid});
  for (const auto& [pid, tid] : threads) {
    out.push_back(metadata_event("thread_name", pid, tid, {{"name", thread_name(tid)}}));
    out.push_back(metadata_event("thread_sort_index", pid, tid, {{"sort_index", (tid % kLaneStride) * 100 + tid / kLaneStride}}));
  }
}

json rank_info(const trace::RankRecord& r) {
  return {{"rank", r.rank},
          {"host", r.host},
          {"device", r.device},
          {"device_info", trace::device_info_to_json(r.device_info)},
          {"pid", r.pid},
          {"offset_ns", r.offset_ns},
          {"offset_end_ns", clock::has_end_estimate(r) ? r.offset_end_ns : r.offset_ns},
          {"uncertainty_ns", r.uncertainty_ns},
          {"drift_ppm", clock::drift_ppm(r)}};
}

// Places each slice on the first lane of its (rank, stream) where it nests (it ends
// before the innermost open slice there ends), opening a lane when none fits; then sorts
// slices by thread, parent first. Returns how many extra lanes were opened.
std::int64_t assign_lanes(std::vector<Slice>& slices) {
  std::stable_sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    return std::make_tuple(a.pid, stream_of(a.e), a.e.start_ns, -a.e.end_ns) <
           std::make_tuple(b.pid, stream_of(b.e), b.e.start_ns, -b.e.end_ns);
  });
  std::int64_t extra_lanes = 0;
  std::vector<std::vector<std::int64_t>> lanes;  // per lane: ends of the open slices
  for (std::size_t i = 0; i < slices.size(); ++i) {
    Slice& s = slices[i];
    if (i == 0 || s.pid != slices[i - 1].pid || stream_of(s.e) != stream_of(slices[i - 1].e)) lanes.clear();
    std::size_t lane = 0;
    for (; lane < lanes.size(); ++lane) {
      auto& open = lanes[lane];
      while (!open.empty() && open.back() <= s.e.start_ns) open.pop_back();
      if (open.empty() || s.e.end_ns <= open.back()) break;
    }
    if (lane == lanes.size()) {
      lanes.emplace_back();
      if (lane > 0) ++extra_lanes;
    }
    lanes[lane].push_back(s.e.end_ns);
    s.tid = int(lane) * kLaneStride + stream_of(s.e);
  }
  std::stable_sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    return std::make_tuple(a.pid, a.tid, a.e.start_ns, -a.e.end_ns) <
           std::make_tuple(b.pid, b.tid, b.e.start_ns, -b.e.end_ns);
  });
  return extra_lanes;
}

// Both ends of one message carry the sender's step (-1 when not about a step).
bool same_step(const Event& a, const Event& b) { return a.step < 0 || b.step < 0 || a.step == b.step; }

// Pairs one key's sends and receives, both in time order. Pipeline ids repeat every 4096
// steps, so an end whose partner was lost (dropped from a full buffer) is skipped by its
// step rather than paired with the next repeat, which would shift every later pair.
void pair_in_order(const std::vector<Slice>& slices, const std::vector<std::size_t>& sends,
                   const std::vector<std::size_t>& recvs, std::vector<Flow>& flows) {
  std::size_t i = 0, j = 0;
  while (i < sends.size() && j < recvs.size()) {
    const Event& s = slices[sends[i]].e;
    const Event& r = slices[recvs[j]].e;
    if (same_step(s, r)) {
      flows.push_back({sends[i++], recvs[j++]});
    } else if (s.step < r.step) {
      ++i;
    } else {
      ++j;
    }
  }
}

// A parameter server's exchange is asymmetric: a worker's Push is received by the
// server's Recv and the server's Send is received by the worker's Pull, so Push counts
// as a sending end and Pull as a receiving end.
bool is_send_end(trace::EventKind k) { return k == trace::EventKind::Send || k == trace::EventKind::Push; }
bool is_recv_end(trace::EventKind k) { return k == trace::EventKind::Recv || k == trace::EventKind::Pull; }

// Pairs each sending end with its receiving end: same (sender, receiver, message id), in
// time order. Runs after lane assignment, which fixes each slice's index and thread.
std::vector<Flow> match_flows(const std::vector<Slice>& slices) {
  using Key = std::tuple<int, int, std::int32_t>;  // sender, receiver, message
  std::map<Key, std::vector<std::size_t>> sends, recvs;
  for (std::size_t i = 0; i < slices.size(); ++i) {
    const Event& e = slices[i].e;
    if (e.peer < 0) continue;
    if (is_send_end(e.kind)) sends[{slices[i].pid, e.peer, e.message}].push_back(i);
    if (is_recv_end(e.kind)) recvs[{e.peer, slices[i].pid, e.message}].push_back(i);
  }
  auto by_start = [&](std::size_t a, std::size_t b) { return slices[a].e.start_ns < slices[b].e.start_ns; };
  std::vector<Flow> flows;
  for (auto& [key, send_list] : sends) {
    auto it = recvs.find(key);
    if (it == recvs.end()) continue;
    std::stable_sort(send_list.begin(), send_list.end(), by_start);
    std::stable_sort(it->second.begin(), it->second.end(), by_start);
    pair_in_order(slices, send_list, it->second, flows);
  }
  std::sort(flows.begin(), flows.end(), [](const Flow& a, const Flow& b) { return a.send < b.send; });
  return flows;
}

// Aligns one rank's events and moves them into `p.slices`; records its metadata.
void add_rank(Prepared& p, RankEvents& r, json& rank_infos) {
  clock::align_events(r.record, r.events);
  for (Event& e : r.events) {
    e.end_ns = std::max(e.end_ns, e.start_ns);  // a malformed span becomes an instant
    p.slices.push_back({r.record.rank, stream_of(e), e});
  }
  std::vector<Event>().swap(r.events);  // free as we go: the slices hold the copies
  add_process_metadata(p.metadata, r.record);
  rank_infos.push_back(rank_info(r.record));
}

Prepared prepare(const trace::RunRecord& run, std::vector<RankEvents> ranks) {
  Prepared p;
  std::sort(ranks.begin(), ranks.end(),
            [](const RankEvents& a, const RankEvents& b) { return a.record.rank < b.record.rank; });
  p.layer_names = analysis::layer_names_by_id(run.plan_json);
  json rank_infos = json::array();
  for (RankEvents& r : ranks) add_rank(p, r, rank_infos);
  if (!p.slices.empty()) {
    p.t0 = std::min_element(p.slices.begin(), p.slices.end(), [](const Slice& a, const Slice& b) {
             return a.e.start_ns < b.e.start_ns;
           })->e.start_ns;
  }
  p.stats.extra_lanes = assign_lanes(p.slices);
  p.flows = match_flows(p.slices);
  p.stats.flows = static_cast<std::int64_t>(p.flows.size());
  add_thread_metadata(p.metadata, p.slices);
  p.stats.events = static_cast<std::int64_t>(p.slices.size());
  p.stats.ranks = static_cast<int>(ranks.size());
  p.header["displayTimeUnit"] = "ms";
  p.header["distributedInfo"] = {
      {"backend", backend_of(run.plan_json)}, {"world_size", run.world_size}, {"ranks", std::move(rank_infos)}};
  p.header["otherData"] = {{"run_id", run.id},
                           {"name", run.name},
                           {"status", run.status},
                           {"loom_version", run.version},
                           {"extra_lanes", p.stats.extra_lanes},
                           {"time_origin_ns", p.t0}};
  return p;
}

std::string slice_name(const Event& e, const std::vector<std::string>& layer_names) {
  std::string name(trace::event_kind_name(e.kind));
  if (e.kind == trace::EventKind::Setup) return name + ": " + std::string(trace::setup_phase_name(e.message));
  if (e.layer < 0) return name;
  if (std::size_t(e.layer) < layer_names.size() && !layer_names[std::size_t(e.layer)].empty())
    return name + " " + layer_names[std::size_t(e.layer)];
  return name + " L" + std::to_string(e.layer);
}

json slice_json(const Slice& s, std::int64_t t0, const std::vector<std::string>& layer_names) {
  const Event& e = s.e;
  json args = json::object();
  if (e.step >= 0) args["step"] = e.step;
  if (e.layer >= 0) args["layer"] = e.layer;
  if (e.microbatch >= 0) args["microbatch"] = e.microbatch;
  if (e.bytes > 0) args["bytes"] = e.bytes;
  if (e.peer >= 0) args["peer"] = e.peer;
  if (e.message >= 0 && e.kind != trace::EventKind::Setup) args["message"] = e.message;
  if (e.descheduled_us > 0) args["descheduled_us"] = e.descheduled_us;
  return {{"ph", "X"},
          {"pid", s.pid},
          {"tid", s.tid},
          {"name", slice_name(e, layer_names)},
          {"cat", std::string(trace::event_kind_name(e.kind))},
          {"ts", static_cast<double>(e.start_ns - t0) / 1e3},
          {"dur", static_cast<double>(e.end_ns - e.start_ns) / 1e3},
          {"args", std::move(args)}};
}

// A flow arrow as Chrome's "s"/"f" pair: it leaves the send slice where the send starts
// and binds to the enclosing receive slice ("bp": "e") at its end, when the data arrived.
std::pair<json, json> flow_json(const Flow& f, std::size_t id, const Prepared& p) {
  const Slice& send = p.slices[f.send];
  const Slice& recv = p.slices[f.recv];
  json start = {{"ph", "s"},       {"id", id},          {"pid", send.pid},
                {"tid", send.tid}, {"cat", "message"},  {"name", "message"},
                {"ts", static_cast<double>(send.e.start_ns - p.t0) / 1e3}};
  json end = {{"ph", "f"},       {"bp", "e"},         {"id", id},
              {"pid", recv.pid}, {"tid", recv.tid},   {"cat", "message"},
              {"name", "message"}, {"ts", static_cast<double>(recv.e.end_ns - p.t0) / 1e3}};
  return {std::move(start), std::move(end)};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void write_trace(std::ostream& out, const Prepared& p) {
  out << "{\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const json& event) {
    if (!first) out << ",\n";
    first = false;
    out << dump(event);
  };
  for (const json& m : p.metadata) emit(m);
  for (const Slice& s : p.slices) emit(slice_json(s, p.t0, p.layer_names));
  for (std::size_t i = 0; i < p.flows.size(); ++i) {
    auto [start, end] = flow_json(p.flows[i], i, p);
    emit(start);
    emit(end);
  }
  out << "\n]";
  for (const auto& [key, value] : p.header.items()) out << ",\n" << dump(json(key)) << ":" << dump(value);
  out << "}\n";
}

Error write_error(const std::string& path, const std::string& why) {
  return make_error(ErrorCode::Io, "cannot write chrome trace " + path + ": " + why,
                    "check that the directory exists and is writable, or choose another file");
}

Status write_file(const Prepared& p, const std::string& path) {
  const std::string tmp = path + ".tmp";
  std::error_code ec;  // cleanup failures are ignored: the write error is the news
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return write_error(path, std::strerror(errno));
    write_trace(out, p);
    out.close();
    if (!out) {
      const std::string why = std::strerror(errno);
      std::filesystem::remove(tmp, ec);
      return write_error(path, why);
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    return write_error(path, why);
  }
  return {};
}

// Every rank with a record, with events, or below world_size (like the analysis).
Expected<std::vector<RankEvents>> load_rank_events(store::RunStore& store, const trace::RunRecord& run) {
  auto records = store.load_ranks(run.id);
  if (!records.ok()) return records.error();
  auto event_ranks = store.event_ranks(run.id);
  if (!event_ranks.ok()) return event_ranks.error();
  std::set<int> ids(event_ranks->begin(), event_ranks->end());
  for (const auto& r : *records) ids.insert(r.rank);
  for (int r = 0; r < run.world_size; ++r) ids.insert(r);
  std::vector<RankEvents> ranks;
  for (int id : ids) {
    RankEvents r;
    r.record.rank = id;  // no ranks row: offset 0
    for (const auto& rec : *records)
      if (rec.rank == id) r.record = rec;
    auto events = store.load_events(run.id, id);
    if (!events.ok()) return events.error();
    r.events = std::move(events).value();
    ranks.push_back(std::move(r));
  }
  return ranks;
}

}  // namespace

json chrome_trace(const trace::RunRecord& run, std::vector<RankEvents> ranks, ExportStats* stats) {
  Prepared p = prepare(run, std::move(ranks));
  json trace = p.header;
  json events = std::move(p.metadata);
  for (const Slice& s : p.slices) events.push_back(slice_json(s, p.t0, p.layer_names));
  for (std::size_t i = 0; i < p.flows.size(); ++i) {
    auto [start, end] = flow_json(p.flows[i], i, p);
    events.push_back(std::move(start));
    events.push_back(std::move(end));
  }
  trace["traceEvents"] = std::move(events);
  if (stats) *stats = p.stats;
  return trace;
}

Expected<ExportStats> export_chrome_trace(store::RunStore& store, std::int64_t run_id, const std::string& path) {
  auto run = store.load_run(run_id);
  if (!run.ok()) return run.error();
  auto ranks = load_rank_events(store, *run);
  if (!ranks.ok()) return ranks.error();
  const Prepared p = prepare(*run, std::move(ranks).value());
  LOOM_TRY(write_file(p, path));
  return p.stats;
}

}  // namespace loom::chrome
