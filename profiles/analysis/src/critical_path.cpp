#include "loom/analysis/critical_path.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "loom/analysis/analysis.h"
#include "loom/trace/clock_align.h"

namespace loom::analysis {

using trace::Event;
using trace::EventKind;

namespace {

// One span of a rank's own thread of work in a step: the innermost spans only, so a
// container (a block's forward holding its branches, a wait holding a pull) never hides
// what happened inside it.
struct Leaf {
  std::int64_t start = 0, end = 0;
  EventKind kind = EventKind::Forward;
  int layer = -1, peer = -1, message = -1;
  std::int64_t descheduled_ns = 0;
};

struct RankSteps {
  std::map<std::int32_t, std::vector<Leaf>> leaves;  // by step, sorted by start
  std::map<std::int32_t, std::pair<std::int64_t, std::int64_t>> step_spans;
  std::map<std::int32_t, std::vector<std::size_t>> waits;  // Wait leaves of a step, in order
  // Communication off the rank's thread (a Comm stream, PyTorch's gloo/NCCL threads), by
  // step, sorted by end: what an untraced gap of the thread may have waited for.
  std::map<std::int32_t, std::vector<Leaf>> background_comm;
};

struct Index {
  std::vector<RankSteps> ranks;
  std::map<std::pair<int, int>, std::int64_t> send_start;  // (sender, message) -> start
};

bool on_the_ranks_thread(const Event& e) {
  if (e.stream == trace::Stream::Comm || e.step < 0) return false;
  return e.kind != EventKind::Step && e.kind != EventKind::Setup && e.kind != EventKind::Evaluate;
}

// A receive and its idle twin cover the same interval: the receive, which names its
// sender, sorts last among equals and survives.
int keep_priority(EventKind kind) { return kind == EventKind::Recv ? 1 : 0; }

std::vector<Leaf> innermost(std::vector<Leaf> spans) {
  std::sort(spans.begin(), spans.end(), [](const Leaf& a, const Leaf& b) {
    return std::tie(a.start, b.end) < std::tie(b.start, a.end) ||
           (a.start == b.start && a.end == b.end && keep_priority(a.kind) < keep_priority(b.kind));
  });
  std::vector<Leaf> out;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const bool holds_next = i + 1 < spans.size() && spans[i + 1].start < spans[i].end;
    if (!holds_next) out.push_back(spans[i]);
  }
  return out;
}

RankSteps index_rank(const std::vector<Event>& events, int rank, Index& index) {
  RankSteps r;
  std::map<std::int32_t, std::vector<Leaf>> spans;
  for (const Event& e : events) {
    if (e.kind == EventKind::Send && e.message >= 0) index.send_start[{rank, e.message}] = e.start_ns;
    if (e.kind == EventKind::Step && e.step >= 0) r.step_spans[e.step] = {e.start_ns, e.end_ns};
    if (on_the_ranks_thread(e)) spans[e.step].push_back({e.start_ns, e.end_ns, e.kind, e.layer, e.peer, e.message, std::int64_t(e.descheduled_us) * 1000});
    else if (e.step >= 0 && trace::is_communication(e.kind))
      r.background_comm[e.step].push_back({e.start_ns, e.end_ns, e.kind, e.layer, e.peer, e.message, 0});
  }
  for (auto& [step, list] : r.background_comm)
    std::sort(list.begin(), list.end(), [](const Leaf& a, const Leaf& b) { return a.end < b.end; });
  for (auto& [step, list] : spans) {
    r.leaves[step] = innermost(std::move(list));
    const auto& leaves = r.leaves[step];
    for (std::size_t i = 0; i < leaves.size(); ++i)
      if (leaves[i].kind == EventKind::Wait) r.waits[step].push_back(i);
  }
  return r;
}

Index build_index(const std::vector<std::vector<Event>>& events_by_rank) {
  Index index;
  for (std::size_t r = 0; r < events_by_rank.size(); ++r)
    index.ranks.push_back(index_rank(events_by_rank[r], int(r), index));
  return index;
}

// The last rank to arrive at the k-th collective wait of a step in rank r's group.
struct Arrival {
  int rank = -1;
  std::int64_t start = 0;
};

Arrival last_arrival(const Index& index, const std::vector<int>& group, int r, std::int32_t step, std::size_t k) {
  Arrival last;
  for (std::size_t q = 0; q < index.ranks.size(); ++q) {
    if (q >= group.size() || group[q] != group[std::size_t(r)]) continue;
    const RankSteps& rs = index.ranks[q];
    auto w = rs.waits.find(step);
    if (w == rs.waits.end() || w->second.size() <= k) continue;
    const Leaf& leaf = rs.leaves.at(step)[w->second[k]];
    if (last.rank < 0 || leaf.start > last.start) last = {int(q), leaf.start};
  }
  return last;
}

std::size_t ordinal_of(const RankSteps& rs, std::int32_t step, std::size_t leaf_index) {
  const auto& w = rs.waits.at(step);
  return std::size_t(std::find(w.begin(), w.end(), leaf_index) - w.begin());
}

PathPart part_of(EventKind kind) {
  if (trace::is_communication(kind)) return PathPart::Communication;
  if (kind == EventKind::Wait || kind == EventKind::Idle) return PathPart::Waiting;
  return PathPart::Work;
}

// Walks one step backwards from its end; see the header.
class Walk {
 public:
  Walk(const Index& index, const std::vector<int>& group, std::int32_t step, CriticalPath& path)
      : index_(index), group_(group), step_(step), path_(path) {}

  void run() {
    if (!find_end()) return;
    const std::int64_t end = t_;
    for (std::size_t guard = 0; guard < 1'000'000 && step_once(); ++guard) {
    }
    path_.length_ns += end - t_;
    path_.steps += 1;
  }

  std::vector<PathSegment> segments;  // newest first

 private:
  bool find_end() {
    for (std::size_t r = 0; r < index_.ranks.size(); ++r) {
      auto s = index_.ranks[r].step_spans.find(step_);
      if (s == index_.ranks[r].step_spans.end()) continue;
      if (rank_ < 0 || s->second.second > t_) rank_ = int(r), t_ = s->second.second;
    }
    return rank_ >= 0;
  }

  void add(PathPart part, EventKind kind, int layer, std::int64_t start) {
    if (start >= t_) return;
    path_.part_ns[int(part)] += t_ - start;
    segments.push_back({rank_, kind, layer, start, t_, part});
    t_ = start;
  }

  // [start, t) of a leaf: its descheduled share first, the rest as `part`.
  void add_leaf(PathPart part, const Leaf& leaf, std::int64_t start) {
    const std::int64_t length = t_ - start, whole = leaf.end - leaf.start;
    const std::int64_t descheduled =
        whole > 0 ? std::min(length, std::int64_t(double(leaf.descheduled_ns) * double(length) / double(whole))) : 0;
    add(part, leaf.kind, leaf.layer, start + descheduled);
    add(PathPart::Descheduled, leaf.kind, leaf.layer, start);
  }

  void jump(int rank, std::int64_t at) {
    path_.jumps += 1;
    rank_ = rank;
    t_ = at;
  }

  // The latest leaf on the current rank that ends by t and starts before it; -1 for none.
  std::ptrdiff_t leaf_before(const std::vector<Leaf>& leaves) const {
    auto it = std::upper_bound(leaves.begin(), leaves.end(), t_, [](std::int64_t t, const Leaf& l) { return t < l.end; });
    std::ptrdiff_t i = std::ptrdiff_t(it - leaves.begin()) - 1;
    while (i >= 0 && leaves[std::size_t(i)].start >= t_) --i;
    return i;
  }

  bool step_once() {
    const RankSteps& rs = index_.ranks[std::size_t(rank_)];
    auto span = rs.step_spans.find(step_);
    auto leaves = rs.leaves.find(step_);
    const std::int64_t floor = span != rs.step_spans.end() ? span->second.first : t_;
    const std::ptrdiff_t i = leaves == rs.leaves.end() ? -1 : leaf_before(leaves->second);
    if (i < 0 || leaves->second[std::size_t(i)].end <= floor) {
      fill_gap(rs, floor);
      return false;
    }
    const Leaf& leaf = leaves->second[std::size_t(i)];
    fill_gap(rs, leaf.end);  // a gap before t, if any
    follow(leaf, std::size_t(i), std::max(leaf.start, floor));
    return true;  // the next round checks the floor of whichever rank the path is on
  }

  // [from, t) where the rank's thread traced nothing. Where its own background
  // communication ended inside the gap, the thread was waiting for it (a PyTorch DDP step
  // blocks on gloo's all-reduce thread without a span of its own): from that span's start
  // (or the gap's) to its end is communication; the rest stays untraced.
  void fill_gap(const RankSteps& rs, std::int64_t from) {
    auto comm = rs.background_comm.find(step_);
    while (t_ > from) {
      const Leaf* ended = nullptr;
      if (comm != rs.background_comm.end()) {
        auto it = std::upper_bound(comm->second.begin(), comm->second.end(), t_,
                                   [](std::int64_t t, const Leaf& l) { return t < l.end; });
        if (it != comm->second.begin() && std::prev(it)->end > from) ended = &*std::prev(it);
      }
      if (!ended) return add(PathPart::Untraced, EventKind::Step, -1, from);
      add(PathPart::Untraced, EventKind::Step, -1, ended->end);
      add(PathPart::Communication, ended->kind, ended->layer, std::max(from, ended->start));
    }
  }

  void follow(const Leaf& leaf, std::size_t leaf_index, std::int64_t start) {
    if (leaf.kind == EventKind::Recv && leaf.message >= 0) {
      auto send = index_.send_start.find({leaf.peer, leaf.message});
      if (send != index_.send_start.end() && send->second > start && send->second < t_) {
        add_leaf(PathPart::Communication, leaf, send->second);
        return jump(leaf.peer, send->second);
      }
    }
    if (leaf.kind == EventKind::Wait && std::size_t(rank_) < group_.size() && group_[std::size_t(rank_)] >= 0) {
      const RankSteps& rs = index_.ranks[std::size_t(rank_)];
      const Arrival last = last_arrival(index_, group_, rank_, step_, ordinal_of(rs, step_, leaf_index));
      if (last.rank >= 0 && last.rank != rank_ && last.start > start && last.start < t_) {
        add_leaf(PathPart::Communication, leaf, last.start);
        return jump(last.rank, last.start);
      }
      return add_leaf(PathPart::Communication, leaf, start);  // the last to arrive: the collective itself
    }
    add_leaf(part_of(leaf.kind), leaf, start);
  }

  const Index& index_;
  const std::vector<int>& group_;
  std::int32_t step_;
  CriticalPath& path_;
  int rank_ = -1;
  std::int64_t t_ = 0;
};

using ProfileKey = std::tuple<int, int, int, int>;  // rank, kind, layer, part

void add_to_profile(std::map<ProfileKey, std::pair<std::int64_t, std::int64_t>>& profile,
                    const std::vector<PathSegment>& segments) {
  for (const PathSegment& s : segments) {
    auto& [ns, count] = profile[{s.rank, int(s.kind), s.layer, int(s.part)}];
    ns += s.end_ns - s.start_ns;
    count += 1;
  }
}

std::vector<PathEntry> sorted_profile(const std::map<ProfileKey, std::pair<std::int64_t, std::int64_t>>& profile) {
  std::vector<PathEntry> out;
  for (const auto& [key, value] : profile) {
    const auto [rank, kind, layer, part] = key;
    out.push_back({rank, EventKind(kind), layer, PathPart(part), value.first, value.second});
  }
  std::stable_sort(out.begin(), out.end(), [](const PathEntry& a, const PathEntry& b) { return a.ns > b.ns; });
  return out;
}

CriticalPath walk_step(const Index& index, const std::vector<int>& group, std::int32_t step,
                       std::map<ProfileKey, std::pair<std::int64_t, std::int64_t>>& profile,
                       bool keep_segments) {
  CriticalPath path;
  Walk walk(index, group, step, path);
  walk.run();
  add_to_profile(profile, walk.segments);
  if (keep_segments) path.segments.assign(walk.segments.rbegin(), walk.segments.rend());
  return path;
}

using WaitKey = std::tuple<int, int, std::string>;

void late_senders(const Index& index, std::int32_t step, std::map<WaitKey, std::pair<std::int64_t, std::int64_t>>& out) {
  for (std::size_t r = 0; r < index.ranks.size(); ++r) {
    auto leaves = index.ranks[r].leaves.find(step);
    if (leaves == index.ranks[r].leaves.end()) continue;
    for (const Leaf& l : leaves->second) {
      if (l.kind != EventKind::Recv || l.message < 0) continue;
      auto send = index.send_start.find({l.peer, l.message});
      if (send == index.send_start.end() || send->second <= l.start) continue;
      auto& [ns, count] = out[{int(r), l.peer, "late sender"}];
      ns += std::min(send->second, l.end) - l.start;
      count += 1;
    }
  }
}

void late_arrivals(const Index& index, const std::vector<int>& group, std::int32_t step,
                   std::map<WaitKey, std::pair<std::int64_t, std::int64_t>>& out) {
  for (std::size_t r = 0; r < index.ranks.size(); ++r) {
    if (r >= group.size() || group[r] < 0) continue;
    auto waits = index.ranks[r].waits.find(step);
    if (waits == index.ranks[r].waits.end()) continue;
    for (std::size_t k = 0; k < waits->second.size(); ++k) {
      const Leaf& mine = index.ranks[r].leaves.at(step)[waits->second[k]];
      const Arrival last = last_arrival(index, group, int(r), step, k);
      if (last.rank < 0 || last.rank == int(r) || last.start <= mine.start) continue;
      auto& [ns, count] = out[{int(r), last.rank, "late arrival at a collective"}];
      ns += std::min(last.start, mine.end) - mine.start;
      count += 1;
    }
  }
}

std::vector<WaitCause> sorted_waits(const std::map<WaitKey, std::pair<std::int64_t, std::int64_t>>& waits) {
  std::vector<WaitCause> out;
  for (const auto& [key, value] : waits)
    out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), value.first, value.second});
  std::stable_sort(out.begin(), out.end(), [](const WaitCause& a, const WaitCause& b) { return a.ns > b.ns; });
  return out;
}

}  // namespace

std::string_view path_part_name(PathPart part) {
  switch (part) {
    case PathPart::Work: return "work";
    case PathPart::Communication: return "communication";
    case PathPart::Waiting: return "waiting";
    case PathPart::Descheduled: return "descheduled";
    case PathPart::Untraced: return "untraced";
  }
  return "";
}

std::vector<int> sync_groups(const Plan& plan, int world_size) {
  std::vector<int> group(std::size_t(std::max(world_size, 0)), -1);
  const SyncMode mode = plan.parallel.sync.mode;
  if (mode == SyncMode::ParameterServer || mode == SyncMode::Ssp) return group;
  for (int r = 0; r < world_size; ++r) {
    const RankRole role = rank_role(plan, r);
    if (role.kind == RankKind::Worker) group[std::size_t(r)] = role.stage;
  }
  return group;
}

CriticalPath critical_path_of_step(const std::vector<std::vector<Event>>& events_by_rank,
                                   const std::vector<int>& sync_group, std::int32_t step) {
  const Index index = build_index(events_by_rank);
  std::map<ProfileKey, std::pair<std::int64_t, std::int64_t>> profile;
  CriticalPath path = walk_step(index, sync_group, step, profile, true);
  path.profile = sorted_profile(profile);
  return path;
}

PathAnalysis analyze_paths(const std::vector<std::vector<Event>>& events_by_rank, const std::vector<int>& sync_group,
                           const std::set<std::int32_t>& steps) {
  const Index index = build_index(events_by_rank);
  std::map<ProfileKey, std::pair<std::int64_t, std::int64_t>> profile;
  std::map<WaitKey, std::pair<std::int64_t, std::int64_t>> waits;
  PathAnalysis a;
  for (std::int32_t step : steps) {
    const CriticalPath one = walk_step(index, sync_group, step, profile, false);
    a.path.steps += one.steps;
    a.path.length_ns += one.length_ns;
    a.path.jumps += one.jumps;
    for (int p = 0; p < kPathParts; ++p) a.path.part_ns[p] += one.part_ns[p];
    late_senders(index, step, waits);
    late_arrivals(index, sync_group, step, waits);
  }
  a.path.profile = sorted_profile(profile);
  a.waits = sorted_waits(waits);
  return a;
}

PathAnalysis analyze_run_paths(const trace::RunRecord& run, const std::vector<trace::RankRecord>& ranks,
                               std::vector<std::vector<Event>> events) {
  events.resize(std::max<std::size_t>(events.size(), std::size_t(std::max(run.world_size, 1))));
  for (const trace::RankRecord& record : ranks) {
    if (record.rank >= 0 && std::size_t(record.rank) < events.size())
      clock::align_events(record, events[std::size_t(record.rank)]);
  }
  PlanResult plan = parse_plan(run.plan_json);
  const std::vector<int> groups =
      plan.ok() ? sync_groups(*plan.plan, int(events.size())) : std::vector<int>(events.size(), -1);
  return analyze_paths(events, groups, steady_step_numbers(events[0]));
}

Expected<PathAnalysis> analyze_run_paths(store::RunStore& store, std::int64_t run_id) {
  auto run = store.load_run(run_id);
  if (!run.ok()) return run.error();
  auto records = store.load_ranks(run_id);
  if (!records.ok()) return records.error();
  auto ranks = store.event_ranks(run_id);
  if (!ranks.ok()) return ranks.error();
  std::vector<std::vector<Event>> events;
  for (int rank : *ranks) {
    if (rank < 0) continue;
    auto loaded = store.load_events(run_id, rank);
    if (!loaded.ok()) return loaded.error();
    if (events.size() <= std::size_t(rank)) events.resize(std::size_t(rank) + 1);
    events[std::size_t(rank)] = std::move(loaded).value();
  }
  return analyze_run_paths(*run, *records, std::move(events));
}

double per_step_s(std::int64_t ns, int steps) { return steps > 0 ? double(ns) / 1e9 / steps : 0.0; }

nlohmann::json path_analysis_to_json(const PathAnalysis& a, const std::vector<std::string>& layers) {
  const CriticalPath& p = a.path;
  nlohmann::json profile = nlohmann::json::array();
  for (const PathEntry& e : p.profile) {
    const bool named = e.layer >= 0 && std::size_t(e.layer) < layers.size();
    const std::string kind = e.part == PathPart::Untraced ? "untraced" : std::string(trace::event_kind_name(e.kind));
    profile.push_back({{"rank", e.rank}, {"kind", kind},
                       {"layer", named ? nlohmann::json(layers[std::size_t(e.layer)]) : nlohmann::json()},
                       {"part", std::string(path_part_name(e.part))}, {"s", per_step_s(e.ns, p.steps)},
                       {"count", e.count}});
  }
  nlohmann::json path = {{"steps", p.steps},
                         {"length_s", per_step_s(p.length_ns, p.steps)},
                         {"work_s", per_step_s(p.part_ns[int(PathPart::Work)], p.steps)},
                         {"communication_s", per_step_s(p.part_ns[int(PathPart::Communication)], p.steps)},
                         {"waiting_s", per_step_s(p.part_ns[int(PathPart::Waiting)], p.steps)},
                         {"descheduled_s", per_step_s(p.part_ns[int(PathPart::Descheduled)], p.steps)},
                         {"untraced_s", per_step_s(p.part_ns[int(PathPart::Untraced)], p.steps)},
                         {"jumps", p.jumps},
                         {"profile", profile}};
  nlohmann::json waits = nlohmann::json::array();
  for (const WaitCause& w : a.waits)
    waits.push_back({{"waiter", w.waiter}, {"cause", w.cause}, {"reason", w.reason}, {"s", double(w.ns) / 1e9}, {"count", w.count}});
  return {{"critical_path", path}, {"waits", waits}};
}

}  // namespace loom::analysis
