// Pure data behind the training charts: metric records streaming in from a live run (any
// batch size, any rank order) turned into mean-over-ranks curves against step or time,
// gradient-staleness histograms and curves, and the non-overlapping segments of a rank's
// time breakdown. No widgets; everything here is tested without a display.
#pragma once

#include <QPointF>
#include <QVector>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "loom/analysis/breakdown.h"
#include "loom/analysis/stats.h"
#include "loom/trace/records.h"

namespace loom::ui::charts {

// Samples: samples processed over every replica by the end of the step, (step + 1) x the
// samples one step takes (MetricAccumulator::setSamplesPerStep), so runs of different
// batch sizes or replica counts compare on the data they saw.
enum class XAxis { Step, Time, Samples };

// Accumulates metric records and answers one curve per metric: y = mean over the ranks
// that reported the step (every data-parallel replica reports its own loss), x = step or
// seconds.
//
// Time axis: ranks stamp t_ns with their own steady clock, whose origin differs between
// hosts (and is arbitrary even on one), so a global minimum would be meaningless. Each
// rank's time is measured from its own origin: by default the earliest t_ns of that rank's
// records seen so far (so zero is when the rank reported its first step), or the origin
// given by setOrigin (e.g. the rank's start from its first event). x for a step is the mean
// over the reporting ranks of (t_ns - origin(rank)) in seconds.
//
// Records with step < 0 are run-level figures (p2p_gbs, total_steps), not curves, and are
// ignored. When a rank reports the same metric for the same step twice, the record with
// the later t_ns wins, so arrival order never changes the result.
class MetricAccumulator {
 public:
  void append(const std::vector<loom::trace::MetricRecord>& records);
  void clear();
  // Overrides rank's time origin (steady-clock nanoseconds of that rank).
  void setOrigin(int rank, std::int64_t t_ns);
  // Global batch: samples every replica together consumes per step (XAxis::Samples).
  void setSamplesPerStep(double samples);

  QVector<QPointF> series(const std::string& name, XAxis x) const;  // ascending x
  // Only the steps up to max_step (a replay's completed steps).
  QVector<QPointF> series(const std::string& name, XAxis x, std::int64_t max_step) const;
  std::vector<std::string> names() const;                           // sorted
  // Grows whenever the curves may have changed (append with records, clear, setOrigin):
  // a view redraws only when it differs from the revision it last drew.
  std::uint64_t revision() const { return revision_; }

 private:
  struct Entry {
    int rank = 0;
    double value = 0;
    std::int64_t t_ns = 0;
  };
  using Steps = std::map<std::int64_t, std::vector<Entry>>;  // step -> one entry per rank

  static void insert(Steps& steps, const loom::trace::MetricRecord& r);
  double seconds(const Entry& e) const;

  std::map<std::string, Steps> metrics_;
  double samples_per_step_ = 1;
  std::map<int, std::int64_t> first_t_ns_;  // per rank, earliest t_ns seen
  std::map<int, std::int64_t> origin_;      // per rank, set by setOrigin
  std::uint64_t revision_ = 0;
};

// One gradient applied by a parameter server: worker rank, the worker's step, how many
// parameter versions old the weights were that it was computed from, and when (t_ns on
// the clock of the server that applied it).
struct StalenessSample {
  int worker = 0;
  std::int64_t step = 0;
  int staleness = 0;
  std::int64_t t_ns = 0;
  int server = 0;  // whose clock t_ns is on
};

// The samples of the updates a run store recorded, in the same order.
std::vector<StalenessSample> staleness_samples(const std::vector<loom::trace::UpdateRecord>& updates);

struct Histogram {
  std::vector<int> bins;  // bins[s] = count of staleness s; size = max staleness + 1
  int total() const;
};

// Histogram of one worker's staleness (worker -1: all workers). Negative staleness is
// not a valid sample and is skipped. Empty bins when nothing matches.
Histogram staleness_histogram(const std::vector<StalenessSample>& samples, int worker);

// Mean staleness of one worker (-1: all workers), ascending x.
//   XAxis::Step: one point per step, x = step.
//   XAxis::Time: x = seconds since the first update its server applied (each server
//   stamps t_ns with its own steady clock, whose origin differs between hosts, so times
//   are comparable only within one server; with one server, or servers that start
//   together, this is the run's first update); samples are grouped into at most
//   kStalenessTimeBuckets equal buckets over the span, one point per non-empty bucket at
//   the mean time of its samples (all workers' steps interleave in time, so per-step
//   grouping would mix times).
inline constexpr int kStalenessTimeBuckets = 200;
QVector<QPointF> staleness_over_time(const std::vector<StalenessSample>& samples, int worker, XAxis x);

// Distinct workers in the samples, ascending.
std::vector<int> staleness_workers(const std::vector<StalenessSample>& samples);

// A rank's breakdown split into parts that do not overlap, for a stacked bar. The
// categories of RankBreakdown overlap (comm_s includes communication hidden behind
// compute), so the stack is compute + optimizer + data + exposed_comm + idle + descheduled,
// which adds up to about the rank's training window (compute, optimizer and data may overlap one another
// slightly when they run on different streams). hidden_comm = comm - exposed_comm ran at
// the same time as work; it is not part of the stack and is drawn on its own.
struct BreakdownSegments {
  double compute = 0, optimizer = 0, data = 0, exposed_comm = 0, idle = 0, descheduled = 0;
  double hidden_comm = 0;
  double stacked() const { return compute + optimizer + data + exposed_comm + idle + descheduled; }
};
BreakdownSegments breakdown_segments(const loom::analysis::RankBreakdown& rank);

// A serving run's metrics as its chart draws them (figures defined in analysis/serving.h):
// each request's latency at the time its reply came (seconds since the first reply), the
// batch sizes, and the latency percentiles over every request so far.
class ServingSeries {
 public:
  void append(const std::vector<loom::trace::MetricRecord>& records);
  void clear();
  bool empty() const { return latencies_ms_.empty() && batch_sizes_.empty(); }
  QVector<QPointF> latency_over_time() const;      // x: seconds since the first reply, y: ms
  std::vector<int> batch_histogram() const;         // [b] = batches of b requests
  loom::analysis::Percentiles latency_ms() const;
  std::int64_t requests() const { return static_cast<std::int64_t>(latencies_ms_.size()); }

 private:
  std::vector<std::pair<std::int64_t, double>> latencies_ms_;  // (reply time, ms)
  std::vector<int> batch_sizes_;
};

}  // namespace loom::ui::charts
