// Run analysis: turns a stored run into the figures a user compares runs by. One header
// per figure family, included here for callers that use several:
//   training_window.h  the steady window every training figure is measured over
//   intervals.h        union and overlap of spans
//   breakdown.h        per-rank compute, communication, optimizer, data, idle; all-reduce
//   throughput.h       steady samples per second
//   stage_stats.h      pipeline bubbles per stage against their theory
//   staleness.h        gradient staleness and divergence in the asynchronous modes
//   scaling.h          efficiency against a single-rank run of the same plan
//   summary.h          all of them for a stored run (summarize_run)
//   stored_figures.h   the throughput written back with a finished run
//   summary_json.h     the summary as JSON
//   stats.h            percentiles, medians and means they share
// Pure functions over the RunStore; no GUI. The family headers only name the store; this
// one includes it, as most callers of summarize_run open one.
#pragma once

#include "loom/analysis/breakdown.h"
#include "loom/analysis/intervals.h"
#include "loom/analysis/scaling.h"
#include "loom/analysis/stage_stats.h"
#include "loom/analysis/staleness.h"
#include "loom/analysis/stats.h"
#include "loom/analysis/stored_figures.h"
#include "loom/analysis/summary.h"
#include "loom/analysis/summary_json.h"
#include "loom/analysis/throughput.h"
#include "loom/analysis/training_window.h"
#include "loom/store/run_store.h"
