// `loom-cli show`'s text (run_text.h).
#include "loom/text/run_text.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "loom/core/model_info.h"

namespace loom::text {

using namespace loom::analysis;  // the structs this file puts into words

namespace {
std::string format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string optional_number(double v, const char* fmt) { return std::isfinite(v) ? format(fmt, v) : "n/a"; }

std::string format_ranks(const std::vector<RankBreakdown>& ranks) {
  std::string out = format("\n  per rank, over its training window (setup and the warm-up step apart):\n"
                           "  %4s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %10s %10s\n",
                           "rank", "setup_s", "window_s", "compute_s", "comm_s", "exposed_s", "optim_s", "data_s",
                           "idle_s", "desched_s", "warmup_s", "recorded", "stored");
  bool unreported = false;
  for (const auto& r : ranks) {
    // A rank that died never said how many events it recorded: "-", not a false 0.
    const std::string recorded = r.events_recorded >= 0 ? std::to_string(r.events_recorded) : "-";
    unreported = unreported || r.events_recorded < 0;
    out += format("  %4d %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f %10s %10lld\n", r.rank,
                  r.setup_s, r.window_s, r.compute_s, r.comm_s, r.exposed_comm_s, r.optimizer_s, r.data_s, r.idle_s,
                  r.descheduled_s, r.warmup_s, recorded.c_str(), static_cast<long long>(r.events_stored));
  }
  if (unreported) out += "  recorded \"-\": the rank ended before reporting its count (it died or was killed)\n";
  return out;
}

// One line per rank: the total and its parts in MiB (parts a run did not report: none).
std::string format_memory(const std::vector<RankMemory>& rows) {
  std::string out = "\n  memory per rank at the end (buffers only grow: the peak), MiB:\n";
  auto mib = [](std::int64_t bytes) { return double(bytes) / double(1 << 20); };
  for (const RankMemory& m : rows) {
    out += format("  rank %d: %.1f", m.rank, mib(m.total));
    if (m.parameters >= 0)
      out += format(" = parameters %.1f + gradients %.1f + optimizer state %.1f + activations and buffers %.1f + "
                    "workspace %.1f",
                    mib(m.parameters), mib(m.gradients), mib(m.optimizer), mib(m.activations), mib(m.workspace));
    out += "\n";
  }
  return out;
}

// One line, or nothing when the run neither all-reduced nor probed the network.
std::string format_allreduce(const AllReduceStats& a) {
  if (a.count == 0) return std::isfinite(a.p2p_gbs) ? format("  p2p probe:     %.2f GB/s\n", a.p2p_gbs) : "";
  std::string out = format("  all-reduce:    %lld ops, %.1f MB over all ranks; algbw ", static_cast<long long>(a.count),
                           static_cast<double>(a.bytes) / 1e6);
  out += optional_number(a.algbw_gbs, "%.2f GB/s") + ", busbw " + optional_number(a.busbw_gbs, "%.2f GB/s");
  out += ", p2p probe " + optional_number(a.p2p_gbs, "%.2f GB/s");
  out += ", hidden " + optional_number(a.hidden_fraction * 100.0, "%.0f %%") + "\n";
  return out;
}

// Offsets range from nanoseconds (one host) to days (steady clocks of different hosts
// start at boot), so the unit follows the magnitude.
std::string format_ns(std::int64_t ns, bool sign) {
  const double v = static_cast<double>(ns), a = std::fabs(v);
  if (a < 1e3) return format(sign ? "%+lld ns" : "%lld ns", static_cast<long long>(ns));
  if (a < 1e6) return format(sign ? "%+.1f us" : "%.1f us", v / 1e3);
  if (a < 1e9) return format(sign ? "%+.3f ms" : "%.3f ms", v / 1e6);
  return format(sign ? "%+.3f s" : "%.3f s", v / 1e9);
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) {
    if (!out.empty()) out += ',';
    out += std::to_string(r);
  }
  return out.empty() ? "-" : out;
}

std::string percent(double fraction) { return optional_number(fraction * 100.0, "%.1f"); }

// Measured minus a reference, in points: "+3.2"; n/a where either is unknown.
std::string points(double a, double b) { return optional_number((a - b) * 100.0, "%+.1f"); }

std::string format_stages(const PipelineStats& p) {
  std::string out = format("\n  pipeline:      %s, %d stages, %d micro-batch(es); bubble = idle %s, steady steps\n",
                           p.schedule.c_str(), p.stages, p.microbatches, p.bubble_convention.c_str());
  out += "  bubble %: measured; textbook (p-1)/(m+p-1); schedule = replay with equal stages; +imbalance = replay\n"
         "  with these stages minus schedule; +comm/jitter = measured minus that replay\n";
  out += format("  %5s %-9s %9s %9s %8s %8s %9s %9s %9s %11s %12s %9s %11s\n", "stage", "ranks", "busy_s",
                "bubble_s", "fwd_ms", "bwd_ms", "bubble %", "textbook", "schedule", "+imbalance", "+comm/jitter",
                "in flight", "peak act.");
  for (const StageStats& st : p.stages_stats) {
    out += format("  %5d %-9s %9.4f %9.4f %8s %8s %9s %9s %9s %11s %12s %9lld %11s\n", st.stage,
                  join_ranks(st.ranks).c_str(), st.busy_s, st.bubble_s, optional_number(st.forward_ms, "%.3f").c_str(),
                  optional_number(st.backward_ms, "%.3f").c_str(), percent(st.bubble_fraction).c_str(),
                  percent(st.bubble_textbook).c_str(), percent(st.bubble_schedule).c_str(),
                  points(st.bubble_theory, st.bubble_schedule).c_str(),
                  points(st.bubble_fraction, st.bubble_theory).c_str(), static_cast<long long>(st.max_in_flight),
                  format_bytes(st.peak_activation_bytes).c_str());
  }
  if (std::isfinite(p.imbalance)) out += format("  stage imbalance: %.0f %% (busiest stage's busy time over the idlest's, minus 1)\n", p.imbalance * 100.0);
  return out;
}

std::string format_staleness(const StalenessStats& st) {
  std::string out = format("\n  Staleness (%s): mean %.2f, p50 %.0f, p95 %.0f, max %lld", st.mode.c_str(), st.mean,
                           st.p50, st.p95, static_cast<long long>(st.max));
  if (st.mode == sync_mode_name(SyncMode::Ssp)) out += format(" (bound %d)", st.bound);
  out += format("\n  %4s %10s %8s %6s %6s %6s %10s\n", "rank", "updates", "mean", "p50", "p95", "max", "wait_s");
  for (const WorkerStaleness& w : st.workers) {
    out += format("  %4d %10lld %8.2f %6.0f %6.0f %6lld %10.4f\n", w.rank, static_cast<long long>(w.updates), w.mean,
                  w.p50, w.p95, static_cast<long long>(w.max), w.wait_s);
  }
  return out;
}

std::string format_divergence(const DivergenceStats& d) {
  return format("  divergence:    %lld samples, last ", static_cast<long long>(d.count)) +
         optional_number(d.last, "%.4g") + ", mean " + optional_number(d.mean, "%.4g") + "\n";
}

// The serving section (analysis/serving.h defines every figure).
std::string format_serving(const ServingStats& v) {
  std::string out = format("  serving:       %lld requests from %d client(s) at %.0f/s (%s); batches of at most %lld, "
                           "timeout %.3g ms\n",
                           static_cast<long long>(v.requests), v.serve.clients, v.serve.rate,
                           std::string(arrivals_name(v.serve.arrivals)).c_str(),
                           static_cast<long long>(v.serve.max_batch), v.serve.timeout_ms);
  out += format("  latency:       p50 %.2f ms, p95 %.2f ms, p99 %.2f ms, max %.2f ms (sent to reply, client clock)\n",
                v.latency_ms.p50, v.latency_ms.p95, v.latency_ms.p99, v.latency_ms.max);
  out += format("  queue wait:    p50 %.2f ms, p95 %.2f ms, max %.2f ms (arrival to its batch's start)\n",
                v.queue_wait_ms.p50, v.queue_wait_ms.p95, v.queue_wait_ms.max);
  out += format("  batches:       %lld, mean size %.2f, compute %.3f ms each; server busy %.0f %%, idle %.0f %%\n",
                static_cast<long long>(v.batches), v.mean_batch, v.batch_compute_ms, v.busy_fraction * 100.0,
                (1.0 - v.busy_fraction) * 100.0);
  out += "  batch sizes:  ";
  for (std::size_t b = 1; b < v.batch_histogram.size(); ++b) {
    if (v.batch_histogram[b] > 0) out += format(" %zux%lld", b, static_cast<long long>(v.batch_histogram[b]));
  }
  out += "  (size x batches)\n";
  out += "  served accuracy: " + optional_number(v.accuracy * 100.0, "%.2f %%") + "\n";
  return out;
}

// "device: rank 0: cpu, ..." or, for several kinds, one line each under "devices:";
// "not recorded" for runs stored before ranks said what they ran on.
std::string format_devices(const std::vector<DeviceGroup>& groups) {
  if (!any_device_recorded(groups)) return "  device:        not recorded\n";
  const std::vector<std::string> lines = device_lines(groups);
  if (lines.size() == 1) return "  device:        " + lines.front() + "\n";
  std::string out = "  devices:       " + lines.front() + "\n";
  for (std::size_t i = 1; i < lines.size(); ++i) out += "                 " + lines[i] + "\n";
  return out;
}

std::string format_clock(const std::vector<ClockRow>& rows) {
  std::string out;
  for (const ClockRow& c : rows) {
    out += format("  clock rank %-3d offset %s +/- %s, drift %+.2f ppm\n", c.rank, format_ns(c.offset_ns, true).c_str(),
                  format_ns(c.uncertainty_ns, false).c_str(), c.drift_ppm);
  }
  return out;
}
}  // namespace

namespace {
std::string format_throughput(const RunSummary& s) {
  std::string out = format("  steps:         %lld", static_cast<long long>(s.steps));
  if (s.throughput_basis == "serving") {
    out = format("  throughput:    %.1f requests/s served (first arrival to last batch, server clock)\n",
                 s.samples_per_s);
    out += format("  whole job:     %.3f s (launch and setup included)\n", s.wall_s);
    return out;
  }
  if (s.throughput_basis == "steady steps") {
    out += format(" (%d warm-up, %lld steady)\n", kWarmupSteps, static_cast<long long>(s.steady_steps));
    out += format("  setup:         %.3f s (slowest rank: loading data, clock alignment, bandwidth probe, model)\n",
                  s.setup_s);
    out += format("  training:      %.3f s over the steady steps\n", s.train_s);
    out += format("  throughput:    %.1f samples/s over steady steps (%lld samples)\n", s.samples_per_s,
                  static_cast<long long>(s.train_samples));
  } else if (s.throughput_basis == "imported trace") {
    out += format(" (%d warm-up, %lld steady)\n", kWarmupSteps, static_cast<long long>(s.steady_steps));
    out += "  imported:      a PyTorch profiler trace, profiled outside Loom on the machine that recorded it;\n"
           "                 no Loom plan, so samples per step are unknown\n";
    out += format("  training:      %.3f s over the steady steps\n", s.train_s);
    out += "  throughput:    n/a (compare step times instead: `loom-cli compare`)\n";
    out += format("  whole trace:   %.3f s (samples not recorded)\n", s.wall_s);
    return out;
  } else {
    out += "\n  throughput:    " + format("%.1f samples/s over the whole run (no step spans recorded)\n",
                                        s.samples_per_s);
  }
  out += format("  whole job:     %.3f s, %.1f samples/s (%lld samples; launch, setup and evaluation included)\n",
                s.wall_s, s.wall_samples_per_s, static_cast<long long>(s.run.samples));
  return out;
}
}  // namespace

std::string format_summary(const RunSummary& s) {
  std::string out;
  out += format("Run %lld", static_cast<long long>(s.run.id));
  if (!s.run.name.empty()) out += " \"" + s.run.name + "\"";
  out += " [" + std::string(trace::to_text(s.run.status)) + "]\n";
  if (!s.run.error.empty()) out += "  error:         " + s.run.error + "\n";
  if (s.run.resumed_from != 0)
    out += format("  resumed from:  run %lld, at step %s\n", static_cast<long long>(s.run.resumed_from),
                  s.resumed_at_step >= 0 ? std::to_string(s.resumed_at_step).c_str() : "-");
  for (const std::string& w : s.warnings) out += "  warning:       " + w + "\n";
  out += format("  world size:    %d\n", s.world_size);
  out += format_devices(s.devices);
  out += format_throughput(s);
  if (s.scaling)
    out += format("  scaling:       %.1f %% efficiency vs run %lld (%.1f samples/s on 1 rank)\n",
                  s.scaling->efficiency * 100.0, static_cast<long long>(s.scaling->reference_run_id),
                  s.scaling->reference_samples_per_s);
  if (s.serving) {
    out += format_serving(*s.serving);
  } else {
    out += "  final loss:    " + optional_number(s.final_loss, "%.4f") + "\n";
    out += "  test accuracy: " + optional_number(s.test_accuracy * 100.0, "%.2f %%") + "\n";
    if (std::isfinite(s.param_norm)) out += format("  parameters:    L2 norm %.9g after the last step\n", s.param_norm);
  }
  out += format_allreduce(s.allreduce);
  if (s.divergence) out += format_divergence(*s.divergence);
  if (s.world_size > 1) out += format_clock(s.clock);
  if (!s.ranks.empty()) out += format_ranks(s.ranks);
  if (!s.memory.empty()) out += format_memory(s.memory);
  if (s.pipeline && s.pipeline->stages > 1) out += format_stages(*s.pipeline);
  if (s.staleness.present) out += format_staleness(s.staleness);
  return out;
}

}  // namespace loom::text
