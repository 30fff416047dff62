// `loom-cli compare`'s text and the efficiency line (run_text.h).
#include "loom/text/run_text.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace loom::text {

using namespace loom::analysis;  // the structs this file puts into words

std::string format_efficiency(const Efficiency& e) {
  if (!std::isfinite(e.parallel_efficiency)) return "";
  char line[256];
  std::snprintf(line, sizeof line,
                "efficiency (POP, worker ranks): load balance %.1f%% x communication efficiency %.1f%% = parallel "
                "efficiency %.1f%%\n",
                e.load_balance * 100, e.communication_efficiency * 100, e.parallel_efficiency * 100);
  return line;
}

namespace {

std::string printf_string(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

char letter(std::size_t i) { return char('A' + i); }

}  // namespace

std::string format_compare_value(double v) {
  if (!std::isfinite(v)) return "-";
  const double a = std::fabs(v);
  if (a >= 1 && v == std::floor(v)) return printf_string("%.0f", v);
  return printf_string(a >= 1000 ? "%.0f" : a >= 100 ? "%.1f" : a >= 1 ? "%.2f" : "%.3f", v);
}

std::string format_compare_ratio(double value, double baseline, std::string_view times) {
  const double ratio = value / baseline;
  if (!std::isfinite(ratio)) return "";
  std::string number;
  if (std::fabs(ratio) > 100) number = ratio > 0 ? ">100" : "<-100";
  else if (ratio != 0 && std::fabs(ratio) < 0.01) number = ratio > 0 ? "<0.01" : ">-0.01";
  else number = printf_string("%.2f", ratio);
  return number + std::string(times);
}

namespace {

std::string value_text(double v) { return format_compare_value(v); }

std::string format_runs(const Comparison& c) {
  std::string out = printf_string("Comparing %zu runs; A is the baseline", c.runs.size());
  if (!c.options.steps.whole()) {
    const StepRange& r = c.options.steps;
    out += printf_string("; steps %lld to ", static_cast<long long>(r.from)) +
           (r.to == std::numeric_limits<std::int64_t>::max() ? std::string("the end")
                                                              : std::to_string(r.to - 1));
  }
  out += ".\n";
  for (std::size_t i = 0; i < c.runs.size(); ++i) {
    const ComparedRun& run = c.runs[i];
    const std::string device = devices_short(run.devices);
    const std::string mode = device.empty() ? run.mode : run.mode + " on " + device;
    out += printf_string("  %c  run %-5lld %-28s %s; %d rank%s, %lld steps, %s\n", letter(i),
                         static_cast<long long>(run.id), run.name.c_str(), mode.c_str(), run.world_size,
                         run.world_size == 1 ? "" : "s", static_cast<long long>(run.steps), std::string(trace::to_text(run.status)).c_str());
    // The whole identity under its row, one line per kind of device, where one was stored.
    if (any_device_recorded(run.devices))
      for (const std::string& line : device_lines(run.devices)) out += "             " + line + "\n";
  }
  return out;
}

std::string format_metrics(const Comparison& c) {
  std::string out = printf_string("\n%-44s", "figure (* = better)");
  for (std::size_t i = 0; i < c.runs.size(); ++i) out += printf_string(" %11c", letter(i));
  for (std::size_t i = 1; i < c.runs.size(); ++i) out += printf_string("  %5c/A", letter(i));
  out += "\n";
  for (const CompareRow& row : c.metrics) {
    const std::string label = row.label + (row.unit.empty() ? "" : " (" + row.unit + ")");
    out += printf_string("%-44s", label.c_str());
    for (std::size_t i = 0; i < row.values.size(); ++i) {
      out += printf_string(" %10s%c", value_text(row.values[i]).c_str(), int(i) == row.best ? '*' : ' ');
    }
    for (std::size_t i = 1; i < row.values.size(); ++i) {
      const std::string ratio = format_compare_ratio(row.values[i], row.values[0]);
      out += printf_string("  %7s", ratio.empty() ? "-" : ratio.c_str());
    }
    out += "\n";
  }
  return out;
}

std::string format_phases(const Comparison& c) {
  if (c.phases.empty()) return "";
  std::string out = printf_string("\nphase diff: median ms per step and rank of each role\n%-10s %-30s", "role", "phase");
  for (std::size_t i = 0; i < c.runs.size(); ++i) out += printf_string(" %9c", letter(i));
  for (std::size_t i = 1; i < c.runs.size(); ++i) out += printf_string("  %5c-A", letter(i));
  out += "\n";
  for (const PhaseRow& row : c.phases) {
    out += printf_string("%-10s %-30s", row.role.c_str(), row.phase.c_str());
    for (double v : row.median_ms) out += printf_string(" %9s", value_text(v).c_str());
    for (std::size_t i = 1; i < row.median_ms.size(); ++i) {
      const double d = row.median_ms[i] - row.median_ms[0];
      out += std::isfinite(d) ? printf_string("  %+7.3f", d) : std::string("        -");
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string format_step_time_split(const Comparison& c) {
  // Two decimals: a difference below 0.005 ms prints as +0.00, never -0.00.
  auto shown = [](double ms) { return std::fabs(ms) < 0.005 ? 0.0 : ms; };
  std::string out;
  for (const StepTimeDelta& d : step_time_split(c)) {
    out += printf_string("%c: %+.2f ms =", letter(std::size_t(d.run)), shown(d.total_ms));
    for (std::size_t k = 0; k < d.parts.size(); ++k)
      out += printf_string("%s %s %+.2f", k == 0 ? "" : ",", d.parts[k].first.c_str(), shown(d.parts[k].second));
    out += "\n";
  }
  return out;
}

std::string format_comparison(const Comparison& c) {
  std::string split = format_step_time_split(c);
  if (!split.empty()) split = "\nwhere the step time went: critical path per step against A's, by part (ms)\n" + split;
  return format_runs(c) + format_metrics(c) + split + format_phases(c);
}

}  // namespace loom::text
