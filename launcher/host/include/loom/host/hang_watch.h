// The host's watchdog over a running job: when no rank has recorded anything new for too
// long, the job is hung (a rank stopped by a signal, deadlocked, or waiting on one that is).
// One rank still progressing means it is not: the others may wait for it legitimately;
// except for a rank whose process is stopped, which is hung once past its limit whatever
// the others do. The rules are a pure function of what each rank last sent and when, so
// they are tested without a job; the mpirun transport (job.h) applies them every
// supervision tick and, on a stall, ends the run as "hung" and tears the job down.
//
// Progress is a new event from the rank: spans are recorded when they end, so a rank
// blocked in one call (a receive whose sender is stopped) records nothing, exactly like
// the stopped rank. Which of the silent ranks caused it: the caller may know that a rank's
// process is stopped (its /proc state); otherwise the rank silent longest is named, since
// its peers went quiet only when they needed it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/trace/event.h"

namespace loom::host {

struct RankActivity {
  int rank = 0;
  bool connected = false, finished = false;
  bool training = false;           // setup is over for it: it built its model or recorded work
  std::int64_t last_progress_ns = 0;  // host steady clock: its hello or its latest new event
  bool has_last_span = false;
  trace::Event last_span;          // the latest-ending event it sent
  bool process_stopped = false;    // its process is stopped (SIGSTOP, a debugger), where known
};

struct HangLimits {
  double fixed_s = 0;          // the plan's training.hang_timeout_s; 0 = automatic:
  double setup_s = 120;        // until a rank's first step
  double floor_s = 30;         // then max(floor, step_multiple x the median step time)
  double step_multiple = 20;
};

// Seconds a rank in this phase may stay silent.
double hang_limit_s(const HangLimits& limits, bool training, double median_step_s);

struct Stall {
  int rank = 0;
  double silent_s = 0, limit_s = 0;
  bool process_stopped = false;
  bool has_last_span = false;
  trace::Event last_span;
  std::vector<int> also_silent;  // other ranks past their limit (waiting on it, typically)
};

// The rank to blame when every connected, unfinished rank is past its limit, or when one
// whose process is stopped is (its peers may go on without it: an asynchronous worker's);
// otherwise nullopt while any of them progresses. A stopped process is blamed first,
// else the longest silent.
std::optional<Stall> find_stall(const std::vector<RankActivity>& ranks, std::int64_t now_ns, const HangLimits& limits,
                                double median_step_s);

// "rank 1 recorded nothing for 31 s (limit 30 s; its process is stopped); its last span:
// backward, layer 2, step 41. Ranks 0 were waiting too." `layer_names` name layers where known.
std::string describe_stall(const Stall& stall, const std::vector<std::string>& layer_names = {});

}  // namespace loom::host
