// Serving arrivals and the batching rule (see serve_schedule.h).
#include "loom/core/serve_schedule.h"

#include <algorithm>
#include <cmath>

namespace loom {

namespace {

// splitmix64: the arrival times must be the same on every platform and every run of a seed.
double uniform_open01(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double(z >> 11) + 0.5) * 0x1.0p-53;  // in (0, 1): the logarithm below stays finite
}

}  // namespace

std::int64_t client_request_count(const ServeSpec& serve, int client) {
  const std::int64_t clients = std::max(1, serve.clients);
  return serve.requests / clients + (client - 1 < serve.requests % clients ? 1 : 0);
}

std::vector<double> arrival_times_s(const ServeSpec& serve, int client, std::uint64_t seed) {
  const std::int64_t n = client_request_count(serve, client);
  const double rate = serve.rate / double(std::max(1, serve.clients));  // this client's share
  std::vector<double> times(static_cast<std::size_t>(std::max<std::int64_t>(0, n)));
  std::uint64_t state = seed ^ (0xA5A5'0000'0000'0000ull + std::uint64_t(client));
  double t = 0;
  for (std::size_t k = 0; k < times.size(); ++k) {
    if (serve.arrivals == Arrivals::Constant) {
      t = double(k) / rate;
    } else if (k > 0) {
      t += -std::log(uniform_open01(state)) / rate;
    }
    times[k] = t;
  }
  return times;
}

bool batch_due(const ServeSpec& serve, std::int64_t queued, double oldest_wait_ms) {
  if (queued <= 0) return false;
  return queued >= serve.max_batch || oldest_wait_ms >= serve.timeout_ms;
}

}  // namespace loom
