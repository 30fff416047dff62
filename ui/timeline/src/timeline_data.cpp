// Lane layout for the timeline (timeline_data.h). Depth is the nesting level within a
// (rank, stream): a sweep over spans in (start asc, end desc) order with a stack of open
// ends. In-order batches continue the sweep where it stopped; a batch that reaches back
// (an enclosing Step recorded after its children) is merged into place and the sweep is
// redone from the last top-level span before it, where the stack is known to be empty.
// The sweep never puts overlapping spans in one lane, even if the input nests badly.
#include "loom/ui/timeline/timeline_data.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <QStringList>

#include "loom/trace/clock_align.h"
#include "loom/ui/span_kinds.h"

namespace loom::ui::timeline {

using loom::trace::Event;
using loom::trace::EventKind;
using loom::trace::Stream;

namespace {

template <class Item>
bool nest_before(const Item& a, const Item& b) {
  if (a.start != b.start) return a.start < b.start;
  if (a.end != b.end) return a.end > b.end;  // the enclosing span first
  return a.event < b.event;
}

// A message's two ends. Parameter-server transfers are spans of their own kinds on the
// worker (Push sends the gradient to the server, Pull receives the parameters) but plain
// Recv/Send on the server, so each worker end pairs with the server's opposite end.
bool sends_message(EventKind k) { return k == EventKind::Send || k == EventKind::Push; }
bool receives_message(EventKind k) { return k == EventKind::Recv || k == EventKind::Pull; }

bool lane_key_less(const LaneKey& a, const LaneKey& b) {
  if (a.rank != b.rank) return a.rank < b.rank;
  if (a.stream != b.stream) return a.stream < b.stream;
  return a.depth < b.depth;
}

}  // namespace

std::size_t TimelineData::MessageKeyHash::operator()(const MessageKey& k) const noexcept {
  std::uint64_t h = static_cast<std::uint32_t>(k.from);
  h = h * 0x9e3779b97f4a7c15ull ^ static_cast<std::uint32_t>(k.to);
  h = h * 0x9e3779b97f4a7c15ull ^ static_cast<std::uint32_t>(k.message);
  return static_cast<std::size_t>(h ^ (h >> 29));
}

void TimelineData::set_clocks(std::vector<loom::trace::RankRecord> ranks) {
  clocks_.clear();
  for (auto& r : ranks) clocks_[r.rank] = std::move(r);
  ++revision_;
}

QString TimelineData::gpu_device(int rank) const {
  const auto it = clocks_.find(rank);
  if (it == clocks_.end() || it->second.device.rfind("gpu", 0) != 0) return {};
  return QString::fromStdString(it->second.device);
}

std::int64_t TimelineData::align(int rank, std::int64_t t) const {
  auto it = clocks_.find(rank);
  return it == clocks_.end() ? t : loom::clock::to_reference_clock(it->second, t);
}

void TimelineData::clear() {
  events_.clear();
  event_rank_.clear();
  event_depth_.clear();
  groups_.clear();
  lanes_.clear();
  arrows_.clear();
  pending_sends_.clear();
  pending_recvs_.clear();
  steps_.clear();
  staleness_.clear();
  kinds_present_ = 0;
  has_origin_ = false;
  origin_ns_ = begin_ns_ = end_ns_ = 0;
  ++revision_;
}

void TimelineData::append(int rank, std::span<const Event> batch) {
  if (batch.empty()) return;
  const std::size_t base = events_.size();
  // Grow geometrically: reserving the exact size per batch would copy everything each time.
  if (events_.capacity() < base + batch.size()) events_.reserve(std::max(base + batch.size(), 2 * events_.capacity()));
  event_rank_.resize(base + batch.size(), rank);
  event_depth_.resize(base + batch.size(), 0);
  const bool aligned = clocks_.contains(rank);
  std::int64_t batch_min = INT64_MAX;
  for (const Event& raw : batch) {
    Event e = raw;
    if (aligned) e.start_ns = align(rank, e.start_ns), e.end_ns = align(rank, e.end_ns);
    e.end_ns = std::max(e.end_ns, e.start_ns);  // a span never runs backwards on screen
    batch_min = std::min(batch_min, e.start_ns);
    kinds_present_ |= 1u << std::min<unsigned>(static_cast<unsigned>(e.kind), 31);
    if (e.step >= 0) note_step(e);
    events_.push_back(e);
  }
  if (!has_origin_) has_origin_ = true, origin_ns_ = batch_min;

  std::array<std::vector<Item>, loom::trace::kStreamCount> per_stream;
  for (std::size_t i = base; i < events_.size(); ++i) {
    const Event& e = events_[i];
    const std::int64_t s = e.start_ns - origin_ns_, t = e.end_ns - origin_ns_;
    begin_ns_ = std::min(begin_ns_, s);
    end_ns_ = std::max(end_ns_, t);
    const auto stream = std::min<std::size_t>(static_cast<std::size_t>(e.stream), per_stream.size() - 1);
    per_stream[stream].push_back(Item{s, t, static_cast<std::uint32_t>(i), 0});
    if (sends_message(e.kind) || receives_message(e.kind)) match_message(static_cast<std::uint32_t>(i));
  }
  for (std::size_t s = 0; s < per_stream.size(); ++s)
    if (!per_stream[s].empty()) insert_items(group(rank, static_cast<Stream>(s)), per_stream[s]);
  ++revision_;
}

TimelineData::Group& TimelineData::group(int rank, Stream stream) {
  auto [it, inserted] = groups_.try_emplace({rank, static_cast<int>(stream)});
  if (inserted) it->second.rank = rank, it->second.stream = stream;
  return it->second;
}

void TimelineData::insert_items(Group& g, std::vector<Item>& batch) {
  std::sort(batch.begin(), batch.end(), nest_before<Item>);
  const std::size_t old = g.items.size();
  if (old == 0 || !nest_before(batch.front(), g.items.back())) {
    g.items.insert(g.items.end(), batch.begin(), batch.end());
    relayout_from(g, old);  // continues the sweep: nothing before `old` moves
    return;
  }
  const auto at = std::upper_bound(g.items.begin(), g.items.end(), batch.front(), nest_before<Item>);
  const std::size_t p = static_cast<std::size_t>(at - g.items.begin());
  g.items.insert(g.items.end(), batch.begin(), batch.end());
  std::inplace_merge(g.items.begin() + static_cast<std::ptrdiff_t>(p),
                     g.items.begin() + static_cast<std::ptrdiff_t>(old), g.items.end(), nest_before<Item>);
  // Restart at a top-level span before p that starts strictly after its predecessor: the
  // stack is empty there, and lanes can be cut by time at its start.
  std::size_t r = p;
  while (r > 0) {
    --r;
    if (g.items[r].depth == 0 && (r == 0 || g.items[r - 1].start < g.items[r].start)) break;
  }
  const std::int64_t cut = g.items[r].start;
  for (int li : g.lane_of_depth) {
    auto& spans = lanes_[static_cast<std::size_t>(li)].spans;
    auto first = std::lower_bound(spans.begin(), spans.end(), cut,
                                  [](const Span& s, std::int64_t t) { return s.start_ns < t; });
    spans.erase(first, spans.end());
  }
  g.open_ends.clear();
  relayout_from(g, r);
}

void TimelineData::relayout_from(Group& g, std::size_t from) {
  for (std::size_t k = from; k < g.items.size(); ++k) {
    Item& it = g.items[k];
    while (!g.open_ends.empty() && g.open_ends.back() <= it.start) g.open_ends.pop_back();
    it.depth = static_cast<std::uint32_t>(g.open_ends.size());
    g.open_ends.push_back(it.end);
    event_depth_[it.event] = it.depth;
    lane(g, it.depth).spans.push_back(Span{it.start, it.end, it.event, events_[it.event].kind});
  }
}

Lane& TimelineData::lane(Group& g, std::uint32_t depth) {
  while (g.lane_of_depth.size() <= depth) {
    const LaneKey key{g.rank, g.stream, static_cast<int>(g.lane_of_depth.size())};
    auto pos = std::lower_bound(lanes_.begin(), lanes_.end(), key,
                                [](const Lane& l, const LaneKey& k) { return lane_key_less(l.key, k); });
    const int index = static_cast<int>(pos - lanes_.begin());
    lanes_.insert(pos, Lane{key, {}});
    // Lanes after the new one moved down by one: fix every group's depth -> lane table.
    for (auto& [k, other] : groups_)
      for (int& li : other.lane_of_depth)
        if (li >= index) ++li;
    g.lane_of_depth.push_back(index);
  }
  return lanes_[static_cast<std::size_t>(g.lane_of_depth[depth])];
}

void TimelineData::note_step(const Event& e) {
  constexpr std::int32_t kMaxStep = 1 << 24;  // a corrupt step number must not allocate gigabytes
  if (e.step >= kMaxStep) return;
  if (steps_.size() <= static_cast<std::size_t>(e.step)) steps_.resize(static_cast<std::size_t>(e.step) + 1);
  auto widen = [&](TimeRange& r) {
    r.begin_ns = std::min(r.begin_ns, e.start_ns);
    r.end_ns = std::max(r.end_ns, e.end_ns);
  };
  StepRanges& s = steps_[static_cast<std::size_t>(e.step)];
  widen(s.any);
  if (e.kind == EventKind::Step) widen(s.steps);
  if (e.microbatch >= 0) s.microbatches = std::max(s.microbatches, e.microbatch + 1);
}

int TimelineData::microbatch_count(int step) const {
  if (step < 0 || static_cast<std::size_t>(step) >= steps_.size()) return 0;
  return steps_[static_cast<std::size_t>(step)].microbatches;
}

std::optional<TimeRange> TimelineData::step_range(int step) const {
  if (step < 0 || static_cast<std::size_t>(step) >= steps_.size()) return std::nullopt;
  const StepRanges& s = steps_[static_cast<std::size_t>(step)];
  const TimeRange& r = s.steps.begin_ns <= s.steps.end_ns ? s.steps : s.any;
  if (r.begin_ns > r.end_ns) return std::nullopt;
  return TimeRange{r.begin_ns - origin_ns_, r.end_ns - origin_ns_};
}

int TimelineData::step_at(double t_ns) const {
  int best = -1;
  double best_distance = 0, best_middle = 0;
  for (int k = 0; k < step_count(); ++k) {
    const auto r = step_range(k);
    if (!r) continue;
    const double b = static_cast<double>(r->begin_ns), e = static_cast<double>(r->end_ns);
    const double distance = t_ns < b ? b - t_ns : t_ns > e ? t_ns - e : 0.0;
    const double middle = std::abs(t_ns - 0.5 * (b + e));
    if (best < 0 || distance < best_distance || (distance == best_distance && middle < best_middle))
      best = k, best_distance = distance, best_middle = middle;
  }
  return best;
}

std::vector<std::optional<TimeRange>> TimelineData::microbatch_ranges(int step) const {
  std::vector<std::optional<TimeRange>> out;
  for (const Event& e : events_) {
    if (e.step != step || e.microbatch < 0 || e.kind == EventKind::Step) continue;
    const auto m = static_cast<std::size_t>(e.microbatch);
    if (out.size() <= m) out.resize(m + 1);
    const TimeRange r{e.start_ns - origin_ns_, e.end_ns - origin_ns_};
    if (!out[m]) {
      out[m] = r;
    } else {
      out[m]->begin_ns = std::min(out[m]->begin_ns, r.begin_ns);
      out[m]->end_ns = std::max(out[m]->end_ns, r.end_ns);
    }
  }
  return out;
}

int TimelineData::event_lane(std::uint32_t index) const {
  if (index >= events_.size()) return -1;
  auto it = groups_.find({event_rank_[index], static_cast<int>(events_[index].stream)});
  if (it == groups_.end()) return -1;
  const std::uint32_t depth = event_depth_[index];
  const auto& table = it->second.lane_of_depth;
  return depth < table.size() ? table[depth] : -1;
}

// Pipeline message ids repeat every 4096 steps, and an end can be lost (a full trace
// buffer drops events): both ends carry the step, so a pending end from another step is
// never taken for this one's partner. Matched ends leave the pending lists at once.
// Called for send-like (Send, Push) and receive-like (Recv, Pull) ends only.
void TimelineData::match_message(std::uint32_t index) {
  const Event& e = events_[index];
  if (e.peer < 0) return;
  const int rank = event_rank_[index];
  const bool send = sends_message(e.kind);
  const MessageKey key = send ? MessageKey{rank, e.peer, e.message} : MessageKey{e.peer, rank, e.message};
  auto& other_side = send ? pending_recvs_ : pending_sends_;
  auto same_step = [&](std::uint32_t other) {
    const std::int32_t step = events_[other].step;
    return e.step < 0 || step < 0 || step == e.step;
  };
  if (auto it = other_side.find(key); it != other_side.end()) {
    if (auto match = std::find_if(it->second.begin(), it->second.end(), same_step); match != it->second.end()) {
      const std::uint32_t other = *match;
      it->second.erase(match);
      if (it->second.empty()) other_side.erase(it);
      arrows_.push_back(send ? Arrow{index, other, key.from, key.to} : Arrow{other, index, key.from, key.to});
      return;
    }
  }
  (send ? pending_sends_ : pending_recvs_)[key].push_back(index);
}

QString format_duration_ns(std::int64_t ns) {
  const double v = static_cast<double>(ns);
  if (ns < 1000) return QStringLiteral("%1 ns").arg(ns);
  if (ns < 1000000) return QStringLiteral("%1 µs").arg(v / 1e3, 0, 'f', 1);
  if (ns < 1000000000) return QStringLiteral("%1 ms").arg(v / 1e6, 0, 'f', 2);
  return QStringLiteral("%1 s").arg(v / 1e9, 0, 'f', 2);
}

QString format_bytes_short(std::int64_t bytes) {
  const double v = static_cast<double>(bytes);
  if (bytes < 1024) return QStringLiteral("%1 B").arg(bytes);
  if (bytes < 1024 * 1024) return QStringLiteral("%1 KiB").arg(v / 1024, 0, 'f', 1);
  if (bytes < 1024LL * 1024 * 1024) return QStringLiteral("%1 MiB").arg(v / (1024.0 * 1024), 0, 'f', 1);
  return QStringLiteral("%1 GiB").arg(v / (1024.0 * 1024 * 1024), 0, 'f', 2);
}

void TimelineData::append_updates(const std::vector<loom::trace::UpdateRecord>& updates) {
  for (const auto& u : updates) {
    auto [it, inserted] = staleness_.emplace(std::make_pair(u.worker, u.step), u.staleness);
    if (!inserted) it->second = std::max(it->second, u.staleness);
  }
  if (!updates.empty()) ++revision_;
}

std::int64_t TimelineData::staleness(int worker, int step) const {
  auto it = staleness_.find({worker, std::int64_t(step)});
  return it == staleness_.end() ? -1 : it->second;
}

QString describe_event(const Event& e, int rank, const std::vector<std::string>& layer_names) {
  QStringList lines;
  // The kind's name is the one table's (span_kinds.h), as in the legend and the breakdown.
  lines << QStringLiteral("%1 · rank %2 · %3")
               .arg(loom::ui::event_kind_display_name(e.kind))
               .arg(rank)
               .arg(loom::ui::stream_label(e.stream));
  if (e.kind == EventKind::Setup && e.message >= 0)
    lines << QString::fromUtf8(loom::trace::setup_phase_name(e.message));
  if (e.layer >= 0) {
    const auto id = static_cast<std::size_t>(e.layer);
    const QString name = id < layer_names.size() ? QString::fromStdString(layer_names[id]) : QString();
    lines << (name.isEmpty() ? QStringLiteral("layer #%1").arg(e.layer)
                             : QStringLiteral("layer %1 (#%2)").arg(name).arg(e.layer));
  }
  QStringList where;
  if (e.step >= 0) where << QStringLiteral("step %1").arg(e.step);
  if (e.microbatch >= 0) where << QStringLiteral("micro-batch %1").arg(e.microbatch);
  if (!where.isEmpty()) lines << where.join(QStringLiteral(" · "));
  lines << QStringLiteral("duration %1").arg(format_duration_ns(e.end_ns - e.start_ns));
  if (e.bytes > 0) lines << QStringLiteral("bytes %1").arg(format_bytes_short(e.bytes));
  if (e.peer >= 0) {
    const bool outgoing = e.kind == EventKind::Send || e.kind == EventKind::Push;
    QString peer = QStringLiteral("%1 rank %2").arg(outgoing ? QStringLiteral("to") : QStringLiteral("peer")).arg(e.peer);
    if (e.kind == EventKind::Recv || e.kind == EventKind::Pull) peer = QStringLiteral("from rank %1").arg(e.peer);
    if (e.message >= 0) peer += QStringLiteral(" (message %1)").arg(e.message);
    lines << peer;
  }
  return lines.join(QLatin1Char('\n'));
}

}  // namespace loom::ui::timeline
