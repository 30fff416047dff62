// When a serving plan's requests arrive and when its server starts a batch: pure
// functions of the plan, shared by the engine that serves (launcher/engine serving.h) and
// the predictor that simulates it (profiles/predict serving_prediction.h), so both see the
// same arrivals for a seed and the same batching rule.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/core/plan.h"

namespace loom {

// How many requests client `client` (1-based) of the plan sends: requests / C, the first
// requests % C clients one more.
std::int64_t client_request_count(const ServeSpec& serve, int client);

// When client `client`'s requests are due, in seconds from its start: k / (rate/C) for
// constant arrivals, a Poisson process at rate/C (seeded by seed and client) otherwise.
std::vector<double> arrival_times_s(const ServeSpec& serve, int client, std::uint64_t seed);

// The server's rule: start a batch now when `queued` >= max_batch, or when something is
// queued and the oldest has waited at least timeout_ms.
bool batch_due(const ServeSpec& serve, std::int64_t queued, double oldest_wait_ms);

}  // namespace loom
