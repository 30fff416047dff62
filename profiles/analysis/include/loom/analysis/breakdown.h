// Per-rank breakdown of the training window into compute, communication, optimizer,
// data and idle, exposed communication and descheduled time; and the gradient all-reduce
// figures over every rank. Pure functions of a rank's events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/analysis/stats.h"
#include "loom/trace/device_info.h"
#include "loom/trace/event.h"

namespace loom::analysis {

// Per-rank time breakdown over the rank's training window, in seconds of its clock:
//   compute   = Forward, Backward, Loss on the compute stream (evaluation is out of the
//               window, and out of every category)
//   comm      = AllReduce, Send, Recv, Push, Pull, Broadcast, Barrier (any stream)
//   optimizer = Optimizer (any stream)
//   data      = DataLoad (any stream)
//   idle      = window minus the union of every compute/comm/optimizer/data interval.
//               Step spans are containers, not work; Wait, Idle and InjectedDelay spans
//               count as idle time (they are what idle looks like from the inside).
//               Communication overlapping an Idle span (a pipeline stage blocked in a
//               receive: the bubble) is idle, and left out of comm and exposed_comm.
//   exposed_comm = the union of comm intervals minus its overlap with the union of
//               compute, optimizer and data intervals: communication during which the
//               rank does no work (what overlapping communication tries to remove).
//   descheduled = time the rank's threads were runnable but waiting for a core (ranks
//               outnumbering cores), measured by the kernel inside communication and
//               waiting spans (Event::descheduled_us), taken out of comm (exposed first)
//               and idle and reported on its own: communication excludes it.
// Every interval is clipped to the window first, so setup, warm-up and what follows the
// last step (final evaluation, clock alignment) count nowhere; setup_s and warmup_s report
// them apart. Each category is the length of the union of its intervals, so nested spans
// (a Forward per layer inside a Forward per micro-batch) are not counted twice. Categories
// may overlap one another (communication hidden behind backward counts in both), which is
// why idle uses the union of all of them.
struct RankBreakdown {
  int rank = 0;
  std::string device;  // what the rank computed on: "cpu", "gpu 0" (its RankRecord)
  double compute_s = 0, comm_s = 0, optimizer_s = 0, data_s = 0, idle_s = 0;
  // recorded: what the rank said it recorded (-1: it ended without saying: it died).
  std::int64_t events_recorded = 0, events_stored = 0;
  double exposed_comm_s = 0;
  double window_s = 0, setup_s = 0, warmup_s = 0, descheduled_s = 0;
  std::int64_t steady_steps = 0;
  // Point-to-point messages (Send spans) the rank started in its steady window, per
  // steady step: the synchronisation points of model parallelism, made countable.
  double sends_per_step = 0;
  trace::DeviceInfo device_info;  // what `device` is (device_info.h); may be not recorded
};

// Gradient all-reduce figures, with the nccl-tests definitions (GB = 1e9 bytes):
//   bytes, count, seconds: over every rank's AllReduce events (seconds = per rank, the
//               time any all-reduce was in flight, issue to completion; summed over ranks)
//   algbw     = per rank, sum of AllReduce bytes / time any all-reduce was in flight; then
//               the mean over ranks that ran any all-reduce
//   busbw     = algbw * 2(n-1)/n with n = world size (NaN for n == 1: nothing moves)
//   p2p_gbs   = the last "p2p_gbs" metric of the run (the launcher's ping-pong probe)
//   hidden_fraction = 1 - sum(exposed_comm_s) / sum(comm_s) over ranks (NaN without comm)
// A bucket's time includes waiting for the rank to drive MPI's progress (between layers),
// so algbw is what training achieved, below what the link could do alone.
struct AllReduceStats {
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  double seconds = 0;
  double algbw_gbs = kNaN, busbw_gbs = kNaN, p2p_gbs = kNaN, hidden_fraction = kNaN;
};

// Breakdown of one rank's events (any order); exposed for tests and live views.
RankBreakdown breakdown_rank(int rank, const std::vector<trace::Event>& events);

}  // namespace loom::analysis
