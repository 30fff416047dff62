// Calibration: what the stored runs of one machine say each piece of a training step
// costs, as a straight line in the work it does: a layer's forward or backward, the loss
// and the data loading in samples, the optimizer in parameters, an all-reduce or a
// point-to-point message in bytes. docs/prediction.md defines every key and fit.
//
// Observations are medians over a run's steady steps (warm-up left out) of one kind of
// span at one size; a cost goes through the median of its key's observations at each size
// (LinearCost). Interpolating rather than fitting one line keeps every measured size
// exact: per-sample GEMM time is not constant in the batch. Runs whose ranks outnumbered the cores keep their costs
// apart (the device tag says how crowded): their spans include time waiting for a core.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/predict/host_links.h"
#include "loom/store/run_store.h"

namespace loom::predict {

// A cost as a function of size, through the measured points: linear between neighbouring
// sizes; beyond them the line through the nearest size and the next at least kSlopeSpan
// times larger or smaller (a message's latency shows as that line's value at 0), never
// falling as size grows and below the smallest size at least proportional to it; in
// proportion to the nearest size where no such slope exists (one size measured, or only
// close ones), unless the cost has a slope of its own from elsewhere (`probe_slope`): then
// the line of that slope through the nearest size. Never below 0.
inline constexpr double kSlopeSpan = 1.5;
struct LinearCost {
  std::vector<std::pair<double, double>> points;  // (units, median ms), by units, one per size
  // ms per unit where the points give no slope: a message's 1 / the bandwidth the runs'
  // point-to-point probe measured (a send of 16 KB alone says nothing of one of 64 KB's
  // bytes; in proportion, it took 3.5 times what the 64 KB took). 0: none.
  double probe_slope = 0;
  double work = 0;                // a layer's work per sample (layer_work), 0 for the rest
  std::int64_t observations = 0;  // measured spans behind it
  double at(double units) const;
  int sizes() const { return int(points.size()); }
};

// One (key, size, median time) point from one run.
struct Observation {
  std::string key;
  double work = 0;  // layer_work for a layer's key
  double units = 0;
  double ms = 0;
  std::int64_t spans = 0;
};

// A run tagged so calibrates nothing, whatever it measured (`loom-cli calibration
// --reset` tags every calibrating run): it stays in the store to open and compare.
inline constexpr const char* kNotCalibratingTag = "not calibrating";

struct Calibration {
  std::string host;
  std::map<std::string, LinearCost> costs;  // from every calibrating run
  // Per configuration (configuration_of), the costs and residual its own runs give alone:
  // the predictor takes them first, so a configuration that was measured is predicted as
  // it measured, whatever other configurations' runs measured for the same keys (a layer's
  // forward in a 2-stage GPipe took 21% longer than the median over every plan with it).
  std::map<std::string, std::map<std::string, LinearCost>> by_configuration;
  std::vector<std::int64_t> runs;  // the stored runs it was taken from, oldest first
  // Per configuration, each of its calibrating runs' measured step (ms; the median over
  // its steady steps), oldest first: the machine's own spread, beside which a prediction
  // of a plan that was run is read (this project's VM ran one plan at 0.60 and 1.02 ms).
  std::map<std::string, std::vector<double>> steps_by_configuration;
  // The GPU its gpu runs ran on (the latest such run's), for the device tag of a plan's
  // gpu ranks; empty where no gpu run calibrated.
  std::string gpu;
  // Links between hosts its runs across them measured (host_links.h), by host names.
  std::vector<HostLink> links;
  // The share of the free cores a crowded parameter server's task gets (AsyncSetup::
  // contended_share), fitted to the mean staleness of this machine's crowded
  // parameter-server runs (share_runs, oldest first); unset where none was run: the
  // predictor's default (kDefaultContendedShare).
  std::optional<double> contended_share;
  std::vector<std::int64_t> share_runs;
};

// A crowded parameter server's share where no run fitted one: the value that gave every
// measured staleness of session 35's and 38's accuracy runs on this project's first
// 2-core VM (docs/prediction.md).
inline constexpr double kDefaultContendedShare = 0.2;

// "64: 0.0201, 128: 0.0371": each measured size and its median ms, as `loom-cli
// calibration` and the workbench's Calibration tab show a cost.
std::string points_text(const LinearCost& cost);

// Tags each of these runs kNotCalibratingTag beside its tags (`loom-cli calibration
// --reset`, the workbench's Reset calibration): they stay stored, and calibrate nothing.
Status stop_calibrating(store::RunStore& store, const std::vector<std::int64_t>& runs);

// Stored runs' ids in words, three or more consecutive ones as a range: "run 4",
// "runs 1-78, 80, 81", "no runs".
std::string runs_text(const std::vector<std::int64_t>& ids);

// What sets a plan's step, folded into 8 hex digits: its layers (kind, shapes, stage), the
// parallel layout and devices, batch, threads, optimizer and data; not its name, length,
// seed or learning rate, a bucket larger than the whole gradient, or the schedule of one
// stage. threads_per_rank: the BLAS threads a cpu rank got where the plan leaves them to
// the launcher (0), folded in as if the plan had named them, so that such a plan matches
// one that names the same number.
std::string configuration_of(const Plan& plan, int threads_per_rank = 0);

// What a rank computes on: "cpu 2t" (BLAS threads), "cpu 1t shared x2.00" (its host's
// threads twice its cores), or "gpu " and the GPU's name.
std::string device_tag(const DeviceSpec& device, int threads, const std::string& gpu_name = {}, double stretch = 1.0);
// How crowded each rank's host was: its ranks' BLAS threads over its cores (at least 1).
std::map<std::string, double> stretch_by_host(const std::vector<trace::RankRecord>& ranks);
// The tag without its sharing, the suffix alone ("" when not shared), and the sharing a
// key carries (1 when none).
std::string unshared(const std::string& key);
std::string sharing_suffix(double stretch);
double sharing_of(const std::string& key);

// A layer's work per sample, for scaling a calibrated layer of the same kind to another
// size: its forward FLOPs, or its output's elements where it has none (relu, flatten).
double layer_work(const LayerInfo& layer);

// Keys, one per thing that has a cost of its own (layer signature: kind, input and output
// shape per sample). Costs measured while a host's BLAS threads outnumbered its cores carry
// the device tag's " shared xS" (S = threads / cores): the predictor uses them for the same
// crowding, and the unshared cost stretched by S otherwise.
std::string forward_key(const LayerInfo& layer, const std::string& device);
std::string backward_key(const LayerInfo& layer, const std::string& device);
std::string loss_key(const Plan& plan, const std::string& device);
std::string optimizer_key(const Plan& plan, const std::string& device);
// Local SGD's outer step (trace::kOuterOptimizerStep): the replicas' mean and distance.
std::string outer_step_key(const std::string& device);
std::string data_key(const Plan& plan);
std::string allreduce_key(int replicas, CommBackend backend, double stretch = 1.0);
std::string p2p_key(CommBackend backend, double stretch = 1.0);
// A parameter server's blocking receive of a pushed gradient (its Recv spans): on this
// project's VM a tenth of a reply's send of the same bytes, so apart from `send`.
std::string push_receive_key(CommBackend backend, double stretch = 1.0);
// What measured steps took beyond what the predictor makes of the same runs' costs (time
// no span covers: the code between spans, messages' handshakes, a rank waiting for a
// core), per step, by ops per rank and step (forwards and backwards of micro-batches):
// pipelines and one-stage plans apart.
// Asynchronous plans have their own ("parameter server", "local SGD"): their steps leave
// other gaps (a server's polling, ranks taking turns on the cores).
std::string residual_key(bool pipeline, const std::string& device);
std::string residual_key(const Plan& plan, const std::string& device);
// parameter_server or ssp: workers and servers (the simulated modes, async_simulation.h).
bool parameter_server_mode(const Plan& plan);

// What one stored run gives: its costs' observations and its measured step.
struct ObservedRun {
  std::int64_t id = 0;
  Plan plan;
  int cores = 1;           // rank 0's host's
  std::string device;      // rank 0's device tag
  double step_ms = 0;      // median over steady steps of the slowest rank's Step span
  std::int64_t steps = 0;  // steady steps
  std::string configuration;  // configuration_of(plan)
  std::vector<Observation> observations;
  std::optional<double> staleness;  // mean, where a parameter server's workers recorded updates
  std::optional<double> probe_gbs;  // the point-to-point probe between ranks 0 and 1 (p2p_gbs)
};

// nullopt (not an error) for a run that cannot calibrate: not completed, imported,
// serving, or from before ranks recorded their device. Asynchronous runs calibrate:
// their workers' layers, loss and data; their servers' optimizer (in the shard's
// parameters) and replies (point-to-point messages).
Expected<std::optional<ObservedRun>> observe_run(store::RunStore& store, std::int64_t run_id);

// Costs through the observations, by key.
std::map<std::string, LinearCost> fit_costs(const std::vector<Observation>& observations);

// Serving (serving_prediction.h): a batch's forward pass on the server by batch size,
// measured by serving runs' batch_compute_ms; what a request spends beyond its queue wait
// and its batch (messages both ways, the client's and server's handling), per request.
std::string serve_batch_key(const Plan& plan, const std::string& device);
std::string serve_overhead_key(const std::string& device);
// A completed serving run's observations of those two; nullopt for any other run.
Expected<std::optional<std::vector<Observation>>> observe_serving_run(store::RunStore& store, std::int64_t run_id);

// The crowded server's share (Calibration::contended_share) of those tried (0.05 to 0.5)
// whose simulations come nearest the mean staleness measured by these runs' crowded
// parameter-server runs (ranks outnumbering a host's cores), each predicted with `cal`'s
// residuals: the absolute differences summed; of equals, the nearest the default by
// ratio. nullopt where none of them is such a run; `runs` gets the runs fitted to.
std::optional<double> fit_contended_share(const std::vector<ObservedRun>& observed, Calibration cal,
                                          std::vector<std::int64_t>* runs = nullptr);
// The residual per step at which `step_with(residual)`, a step growing with it, takes
// `measured` ms: found by bisection between 0 and `measured` to a millionth of it; 0
// where even none gives more; where the step jumps past `measured` (a simulation whose
// ranks settle into another order), the side of the jump nearer it. nullopt where
// step_with fails. calibrate() solves a parameter server's residual with it.
std::optional<double> residual_for_step(const std::function<std::optional<double>(double)>& step_with, double measured);

// Every completed run of `host` in the store (every host when empty): the costs, then each
// run's residual (its measured step less the step the predictor makes of its plan from
// those costs). calibrate.cpp.
Expected<Calibration> calibrate(store::RunStore& store, const std::string& host);

}  // namespace loom::predict
