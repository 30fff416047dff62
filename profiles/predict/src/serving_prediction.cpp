// Serving: its calibration from serving runs' metrics, and the event simulation that
// predicts a serving plan (see serving_prediction.h).
#include "loom/predict/serving_prediction.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>

#include "loom/analysis/stats.h"
#include "loom/core/serve_schedule.h"
#include "step_costs.h"

namespace loom::predict {

namespace {

constexpr double kOverheadPercentiles[] = {1, 5, 10, 25, 50, 75, 90, 95, 99};

// The server's device tag as a serving run records it, and as the predictor will derive it.
std::string server_device(const Plan& plan, int cores, int* threads) {
  const int ranks = int(plan.parallel.devices.size());
  *threads = plan.training.threads > 0 ? plan.training.threads : std::max(1, cores / std::max(1, ranks));
  const double stretch = std::max(1.0, double(ranks * *threads) / double(std::max(1, cores)));
  return device_tag(DeviceSpec{}, *threads, {}, stretch);
}

}  // namespace

// Per batch size, the median batch_compute_ms; per request, latency less its queue wait
// and its batch's compute (both on the server's clock, the latency on the client's: only
// differences of each enter).
Expected<std::optional<std::vector<Observation>>> observe_serving_run(store::RunStore& store, std::int64_t run_id) {
  using None = std::optional<std::vector<Observation>>;
  auto run = store.load_run(run_id);
  if (!run.ok()) return run.error();
  if (run->status != trace::RunStatus::Completed || run->predicted()) return None();
  PlanResult parsed = parse_plan(run->plan_json);
  if (!parsed.ok() || !parsed.plan->serve) return None();
  auto ranks = store.load_ranks(run_id);
  if (!ranks.ok()) return ranks.error();
  const auto server = std::find_if(ranks->begin(), ranks->end(), [](const trace::RankRecord& r) { return r.rank == 0; });
  if (server == ranks->end() || !server->device_info.recorded()) return None();
  const std::string device =
      device_tag(parsed.plan->parallel.devices.front(), server->device_info.blas_threads, server->device_info.name,
                 stretch_by_host(*ranks).at(server->host));
  auto metrics = store.load_metrics(run_id);
  if (!metrics.ok()) return metrics.error();
  std::map<std::int64_t, double> size_of, compute_of, wait_of, batch_of, latency_of;
  for (const trace::MetricRecord& m : *metrics) {
    if (m.name == "batch_size") size_of[m.step] = m.value;
    else if (m.name == "batch_compute_ms") compute_of[m.step] = m.value;
    else if (m.name == "queue_wait_ms") wait_of[m.step] = m.value;
    else if (m.name == "request_batch") batch_of[m.step] = m.value;
    else if (m.name == "latency_ms") latency_of[m.step] = m.value;
  }
  std::map<double, std::vector<double>> by_size;
  for (const auto& [batch, ms] : compute_of)
    if (size_of.count(batch)) by_size[size_of[batch]].push_back(ms);
  std::vector<double> overhead;
  for (const auto& [request, latency] : latency_of) {
    if (!wait_of.count(request) || !batch_of.count(request)) continue;
    const auto batch = std::int64_t(batch_of[request]);
    if (compute_of.count(batch)) overhead.push_back(latency - wait_of[request] - compute_of[batch]);
  }
  std::vector<Observation> out;
  const std::string key = serve_batch_key(*parsed.plan, device);
  for (auto& [size, times] : by_size) out.push_back({key, 0.0, size, analysis::median(times, 0.0), std::int64_t(times.size())});
  // The overhead's spread, not only its middle: its percentiles (units = the percentile),
  // so the simulation can draw each request's overhead from the measured distribution.
  std::sort(overhead.begin(), overhead.end());
  for (double q : kOverheadPercentiles)
    if (!overhead.empty())
      out.push_back({serve_overhead_key(device), 0.0, q, overhead[std::size_t(std::min<double>(double(overhead.size() - 1),
                                                                                                 q / 100 * double(overhead.size())))],
                     std::int64_t(overhead.size())});
  return None(std::move(out));
}

namespace {

struct Request {
  double arrival_ms = 0;
};

// The batch's forward pass: measured by serving runs at this size (interpolated), or the
// sum of the model's calibrated forward costs at that many samples.
class BatchCost {
 public:
  BatchCost(const Plan& plan, const Calibration& cal, const std::string& device, StepCosts& layers, std::vector<std::string>& notes)
      : model_(infer_model(plan, nullptr)), layers_(layers) {
    if (auto it = cal.costs.find(serve_batch_key(plan, device)); it != cal.costs.end()) measured_ = &it->second;
    else notes.push_back("no serving run of this model on " + device + ": batches costed from training's forward passes");
  }
  double ms(int size) {
    if (measured_) return std::max(0.0, measured_->at(size));
    double total = 0;
    for (const LayerInfo& l : model_.layers)
      if (l.kind != LayerKind::Parallel) total += layers_.forward(l, size);
    return total;
  }

 private:
  ModelInfo model_;
  StepCosts& layers_;
  const LinearCost* measured_ = nullptr;
};

std::vector<Request> arrivals(const Plan& plan) {
  std::vector<Request> out;
  for (int client = 1; client <= std::max(1, plan.serve->clients); ++client)
    for (double t : arrival_times_s(*plan.serve, client, plan.training.seed)) out.push_back({t * 1e3});
  std::sort(out.begin(), out.end(), [](const Request& a, const Request& b) { return a.arrival_ms < b.arrival_ms; });
  return out;
}

// The server's loop: when free, it takes up to max_batch queued requests as soon as
// batch_due says so (max_batch queued, or the oldest has waited timeout_ms).
// Request i's overhead: the measured distribution at the i-th point of a golden-ratio
// sequence, which covers it evenly and is the same every time (a deterministic draw).
double overhead_of(const LinearCost* measured, double fallback_ms, std::size_t i) {
  if (!measured) return fallback_ms;
  if (measured->sizes() == 1) return std::max(0.0, measured->at(50));  // stored before the spread was
  const double q = std::fmod(0.5 + double(i) * 0.6180339887498949, 1.0);
  return std::max(0.0, measured->at(1 + 98 * q));
}

void simulate(const ServeSpec& serve, const std::vector<Request>& requests, BatchCost& cost, const LinearCost* overhead,
              double fallback_overhead_ms, ServingPrediction& out) {
  std::vector<double> latency, wait;
  std::size_t next = 0;
  double free_at = 0, busy = 0, last_end = 0;
  std::deque<double> queue;  // arrival times
  while (next < requests.size() || !queue.empty()) {
    if (queue.empty()) queue.push_back(requests[next++].arrival_ms), free_at = std::max(free_at, queue.front());
    // Take in what arrives before the batch is due: the timeout from the oldest, or full.
    double start = std::max(free_at, queue.front() + serve.timeout_ms);
    while (next < requests.size() && requests[next].arrival_ms <= start && std::int64_t(queue.size()) < serve.max_batch)
      queue.push_back(requests[next++].arrival_ms);
    if (std::int64_t(queue.size()) >= serve.max_batch) start = std::max(free_at, queue[std::size_t(serve.max_batch - 1)]);
    const int size = int(std::min<std::int64_t>(std::int64_t(queue.size()), serve.max_batch));
    const double compute = cost.ms(size);
    for (int i = 0; i < size; ++i) {
      wait.push_back(start - queue.front());
      latency.push_back(start + compute - queue.front() + overhead_of(overhead, fallback_overhead_ms, latency.size()));
      queue.pop_front();
    }
    free_at = last_end = start + compute;
    busy += compute;
    ++out.batches;
  }
  out.requests = std::int64_t(latency.size());
  out.latency_ms = analysis::percentiles_of(latency);
  out.queue_wait_ms = analysis::percentiles_of(wait);
  out.mean_batch = out.batches ? double(out.requests) / double(out.batches) : 0;
  out.batch_compute_ms = out.batches ? busy / double(out.batches) : 0;
  const double span = requests.empty() ? 0 : last_end - requests.front().arrival_ms;
  out.busy_fraction = span > 0 ? busy / span : 0;
  out.throughput_per_s = span > 0 ? double(out.requests) / span * 1e3 : 0;
}

}  // namespace

Expected<ServingPrediction> predict_serving(const Plan& plan, const Calibration& calibration, const MachineShape& machine) {
  if (!plan.serve) return make_error(ErrorCode::InvalidArgument, "the plan has no \"serve\" section");
  ServingPrediction out;
  const std::string device = server_device(plan, machine.cores, &out.threads);
  StepCosts layers(plan, calibration, nullptr, device, 1.0, out.notes, machine.device_speed);
  BatchCost batch(plan, calibration, device, layers, out.notes);
  double overhead = 0;
  const LinearCost* measured_overhead = nullptr;
  if (auto it = calibration.costs.find(serve_overhead_key(device)); it != calibration.costs.end()) {
    measured_overhead = &it->second;
  } else {
    double bytes = 4;  // one test sample's floats
    for (std::int64_t d : plan.model.input) bytes *= double(d);
    overhead = 2 * layers.send(1, 0, bytes);
    out.notes.push_back("no serving run on " + device + ": a request's overhead taken as two messages");
  }
  // Probe one batch so that a missing cost is an error, not a zero.
  batch.ms(1);
  if (!layers.missing().empty()) {
    std::string list;
    for (const std::string& k : layers.missing()) list += (list.empty() ? "" : "; ") + k;
    return make_error(ErrorCode::NotFound, "no calibration for: " + list,
                      "run the serving plan once on this machine (a short run), then predict it again");
  }
  simulate(*plan.serve, arrivals(plan), batch, measured_overhead, overhead, out);
  return out;
}

}  // namespace loom::predict
