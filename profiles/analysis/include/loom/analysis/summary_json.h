// A run summary as JSON (`loom-cli show --json`, the report): figures only, never text.
#pragma once

#include <nlohmann/json.hpp>

#include "loom/analysis/summary.h"

namespace loom::analysis {

// Keys: id, name, status, started_unix_ms, ended_unix_ms, error, plan (parsed plan JSON,
// null if absent or unparsable), world_size, steps, wall_s, samples, samples_per_s,
// final_loss, test_accuracy (null when unknown), ranks: [{rank, device, device_info
// (device_info.h keys, null when not recorded), compute_s, comm_s, optimizer_s, data_s,
// idle_s, events_recorded, events_stored, exposed_comm_s}], devices: [{ranks, text,
// device_info}] (identical ranks grouped, device_identity.h),
// allreduce: {bytes, count, seconds, algbw_gbs, busbw_gbs, p2p_gbs, hidden_fraction}
// (unknown figures null), clock: [{rank, offset_ns, offset_end_ns, uncertainty_ns,
// drift_ppm}], scaling: {reference_run_id, reference_samples_per_s, efficiency} or null,
// schedule, microbatches, bubble_convention (null without a parsable plan), stages:
// [{stage, ranks, busy_s, bubble_s, bubble_fraction, bubble_theory, max_in_flight,
// peak_activation_bytes}] (empty without a parsable plan).
// Only when staleness.present: staleness: {mode, bound (ssp only), overall: {mean, p50,
// p95, max}, workers: [{rank, updates, mean, p50, p95, max, wait_s}]}.
// Only with param_divergence metrics: divergence: {count, mean, last}.
nlohmann::json summary_to_json(const RunSummary& s);

}  // namespace loom::analysis
