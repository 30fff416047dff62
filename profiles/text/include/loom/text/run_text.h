// The words Loom prints about runs: `loom-cli show` and `loom-cli compare` print them, and
// a report (ui/report) carries the same text, so a figure reads alike wherever it is shown.
// Presentation only: every number comes from analysis/ (analysis.h, compare.h,
// critical_path.h), which computes and never formats.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "loom/analysis/analysis.h"
#include "loom/analysis/compare.h"
#include "loom/analysis/critical_path.h"

namespace loom::text {

// `loom-cli show`: the run, its throughput, per-rank breakdown, pipeline, all-reduce,
// staleness and clocks, as lines of text.
std::string format_summary(const analysis::RunSummary& s);
// One line, "" when there is no worker rank to judge.
std::string format_efficiency(const analysis::Efficiency& e);
// The critical path's share per part and its longest pieces (with layer names where
// known), then who waited for whom.
std::string format_path_analysis(const analysis::PathAnalysis& a, const std::vector<std::string>& layer_names);

// `loom-cli compare`: the runs, the metrics table (ratios to run A, * on the better run),
// where the step time went, and the phase diff.
std::string format_comparison(const analysis::Comparison& c);
// Where the step time went (analysis::step_time_split), per run against A's path:
// "B: +4.07 ms = work +4.53, communication -0.11, ...".
std::string format_step_time_split(const analysis::Comparison& c);
// A figure as the comparison prints it everywhere: "-" when unknown, whole numbers bare,
// otherwise 3 significant digits or so ("12.3", "0.457", "1234").
std::string format_compare_value(double v);
// A value's ratio to the baseline's as every comparison view prints it: "2.50x"; beyond a
// hundredfold either way ">100x" / "<0.01x", since beside a baseline near zero (a bubble
// of 0.002 ms) the exact factor means nothing; "" where there is no ratio (a value or the
// baseline unknown, or the baseline 0). The JSON keeps the exact ratio and delta. `times`
// is the sign after the number ("×" in windows).
std::string format_compare_ratio(double value, double baseline, std::string_view times = "x");

}  // namespace loom::text
