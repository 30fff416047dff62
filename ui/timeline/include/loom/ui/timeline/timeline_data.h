// The timeline's data, free of widgets: trace events of every rank aligned onto rank 0's
// clock and laid out in lanes, one per (rank, stream, nesting depth), each sorted by
// start and non-overlapping so geometry.h can binary-search and fold it. Fed in live
// batches that arrive mostly, not strictly, in time order: an enclosing span (a Step) is
// recorded when it ends, so it arrives after its children and pushes them one level down.
//
// Origin: the earliest aligned start in the first non-empty append. It never moves
// afterwards (views keep their window while data flows); events appended later that
// start earlier get negative relative times, and begin_ns() reports the earliest one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <QString>

#include "loom/trace/event.h"
#include "loom/trace/records.h"
#include "loom/ui/timeline/geometry.h"

namespace loom::ui::timeline {

struct LaneKey {
  int rank = 0;
  loom::trace::Stream stream{};
  int depth = 0;
  friend bool operator==(const LaneKey&, const LaneKey&) = default;
};

struct Lane {
  LaneKey key;
  std::vector<Span> spans;  // sorted by start, non-overlapping
};

// A message from the end that sent it (Send, or a parameter-server worker's Push) to the
// end that received it (Recv, or a worker's Pull).
struct Arrow {
  std::uint32_t send_event = 0, recv_event = 0;
  int from_rank = 0, to_rank = 0;
};

// A stretch of time, origin-relative like the lanes' spans.
struct TimeRange {
  std::int64_t begin_ns = 0, end_ns = 0;
  friend bool operator==(const TimeRange&, const TimeRange&) = default;
};

class TimelineData {
 public:
  // Clock records per rank (trace::RankRecord). Applies to events appended afterwards;
  // ranks without a record keep their own clock. clear() keeps the clocks.
  void set_clocks(std::vector<loom::trace::RankRecord> ranks);
  // The rank's device from its record ("gpu 0"), empty for a cpu rank or without a record.
  QString gpu_device(int rank) const;
  // One live batch of one rank's events (any order within the batch, and batches may
  // reach back in time). Cost is linear in the batch plus, when the batch reaches back,
  // the stretch of its (rank, stream) since the last top-level span before that point.
  void append(int rank, std::span<const loom::trace::Event> events);

  const std::vector<Lane>& lanes() const { return lanes_; }     // ordered by (rank, stream, depth)
  const std::vector<Arrow>& arrows() const { return arrows_; }  // send -> recv, once both are known
  // Times aligned to rank 0's clock, not origin-relative.
  const loom::trace::Event& event(std::uint32_t index) const { return events_[index]; }
  int event_rank(std::uint32_t index) const { return event_rank_[index]; }
  // Index into lanes() of the lane that currently holds the event (-1 if out of range).
  int event_lane(std::uint32_t index) const;
  std::int64_t origin_ns() const { return origin_ns_; }  // aligned; fixed once set
  std::int64_t begin_ns() const { return begin_ns_; }    // earliest start, origin-relative (<= 0)
  std::int64_t end_ns() const { return end_ns_; }        // latest end, origin-relative
  std::size_t event_count() const { return events_.size(); }
  std::uint64_t revision() const { return revision_; }   // bumps on every change
  void clear();

  // Which kinds the data holds (bit k for EventKind k), for a legend of what is on screen.
  std::uint32_t kinds_present() const { return kinds_present_; }

  // Steps, for the step navigator. step_count() is the highest step number seen plus one.
  // A step's range runs from the earliest start to the latest end of its Step spans over
  // every rank; a step with no Step span yet (still running) uses its other events.
  int step_count() const { return static_cast<int>(steps_.size()); }
  std::optional<TimeRange> step_range(int step) const;
  // The step under t: one whose range holds t (the one whose middle is nearest, where
  // ranks' steps overlap), else the nearest one; -1 without steps.
  int step_at(double t_ns) const;
  // Per micro-batch of a step (index = micro-batch), the range of its events over every
  // rank; empty where a micro-batch has no events. Scans every event: for a click, not
  // for a paint.
  std::vector<std::optional<TimeRange>> microbatch_ranges(int step) const;
  // Highest micro-batch number of the step's events plus one (0: none recorded).
  int microbatch_count(int step) const;

  // The staleness of the gradient a worker pushed at a step, from the updates the
  // parameter servers applied (the largest over servers); -1 when not known.
  void append_updates(const std::vector<loom::trace::UpdateRecord>& updates);
  std::int64_t staleness(int worker, int step) const;

 private:
  // One (rank, stream): its spans in nesting order (start ascending, end descending) with
  // their depth, and the open-span stack after the last one so in-order batches continue
  // the sweep instead of redoing it.
  struct Item {
    std::int64_t start = 0, end = 0;
    std::uint32_t event = 0;
    std::uint32_t depth = 0;
  };
  struct Group {
    int rank = 0;
    loom::trace::Stream stream{};
    std::vector<Item> items;
    std::vector<std::int64_t> open_ends;  // ends of the spans still open after items.back()
    std::vector<int> lane_of_depth;        // depth -> index into lanes_
  };
  struct MessageKey {
    int from = 0, to = 0, message = 0;
    friend bool operator==(const MessageKey&, const MessageKey&) = default;
  };
  struct MessageKeyHash {
    std::size_t operator()(const MessageKey& k) const noexcept;
  };

  Group& group(int rank, loom::trace::Stream stream);
  void insert_items(Group& g, std::vector<Item>& batch);
  void relayout_from(Group& g, std::size_t from);
  Lane& lane(Group& g, std::uint32_t depth);
  void match_message(std::uint32_t index);
  std::int64_t align(int rank, std::int64_t t) const;

  std::unordered_map<int, loom::trace::RankRecord> clocks_;
  std::vector<loom::trace::Event> events_;
  std::vector<std::int32_t> event_rank_;
  std::vector<std::uint32_t> event_depth_;
  std::map<std::pair<int, int>, Group> groups_;  // (rank, stream)
  std::map<std::pair<int, std::int64_t>, std::int64_t> staleness_;  // (worker, step) -> staleness
  std::vector<Lane> lanes_;
  std::vector<Arrow> arrows_;
  // Unmatched ends of point-to-point messages, oldest first per key (ids may repeat).
  std::unordered_map<MessageKey, std::vector<std::uint32_t>, MessageKeyHash> pending_sends_, pending_recvs_;
  // Per step: the range of its Step spans, and of all its events (aligned, absolute ns;
  // begin > end while empty).
  struct StepRanges {
    TimeRange steps{INT64_MAX, INT64_MIN}, any{INT64_MAX, INT64_MIN};
    int microbatches = 0;
  };
  void note_step(const loom::trace::Event& e);
  std::vector<StepRanges> steps_;
  std::uint32_t kinds_present_ = 0;
  bool has_origin_ = false;
  std::int64_t origin_ns_ = 0, begin_ns_ = 0, end_ns_ = 0;
  std::uint64_t revision_ = 0;
};

// Tooltip text: kind, rank, layer name, step, micro-batch, duration (µs/ms), bytes
// (KiB/MiB), peer. layer_names is indexed by LayerId; a missing name shows the id.
QString describe_event(const loom::trace::Event& e, int rank, const std::vector<std::string>& layer_names);
// "12.3 µs", "4.56 ms", "1.23 s".
QString format_duration_ns(std::int64_t ns);
// "512 B", "4.0 KiB", "2.5 MiB", "1.2 GiB".
QString format_bytes_short(std::int64_t bytes);

}  // namespace loom::ui::timeline
