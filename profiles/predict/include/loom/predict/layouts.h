// Other layouts of one plan, predicted rather than run: the same model and global batch
// over other numbers of replicas and pipeline stages, micro-batches, schedules and bucket
// sizes (docs/prediction.md, "Layout search" and "Scaling").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/plan.h"
#include "loom/predict/predictor.h"

namespace loom::predict {

struct LayoutChoice {
  int replicas = 1, stages = 1, microbatches = 1;  // replicas: workers in the parameter-server modes
  Schedule schedule = Schedule::OneFOneB;
  double bucket_mb = 25;
  std::optional<SyncSpec> sync = std::nullopt;  // another synchronisation than the plan's (search --async)
  int accumulation = 0;  // gradient-accumulation micro-steps; 0: the plan's
  std::string describe() const;  // "4 x 2 stages, 1F1B, 4 micro-batches, 25 MB buckets"
};

// The plan laid out as `choice` says: one device per rank like its first device (on the
// plan's hosts where they are laid out like a cluster's, as many ranks to a host as the
// plan had or more, host_links.h), the top-level layers cut into `stages` consecutive
// stages of nearly equal forward work (a parallel block stays whole, its branches with
// it). InvalidArgument when the model has fewer top-level layers than stages or the
// batch does not split.
Expected<Plan> with_layout(const Plan& plan, const LayoutChoice& choice);

// One layout's prediction, or why it was left out.
struct Candidate {
  LayoutChoice choice;
  Prediction prediction;
  std::int64_t peak_memory = 0;  // the largest rank's RankMemory total
  std::string left_out;          // non-empty: over the memory, or not predictable (the reason)
};

struct SearchSpace {
  int devices = 1;                     // at most this many ranks
  std::int64_t memory_per_device = 0;  // bytes; 0: no limit
  std::vector<int> microbatches = {1, 2, 4, 8};
  std::vector<double> bucket_mb = {1, 5, 25};
  // Gradient-accumulation micro-steps tried beside the plan's, with one stage (a pipeline's
  // micro-batches split its batch already), and only when memory_per_device is set:
  // accumulating saves activation memory, never time.
  std::vector<int> accumulation = {2, 4, 8};
  // Also the asynchronous modes, one stage each: a parameter server and SSP with each of
  // `servers` servers and the other devices as workers (SSP at each of `bounds`), and
  // local SGD every each of `periods` steps.
  bool asynchronous = false;
  std::vector<int> servers = {1, 2};
  std::vector<int> bounds = {1, 2, 4};
  std::vector<int> periods = {2, 4, 8};
};

// Every layout in the space the batch allows (a plan in an asynchronous mode keeps one
// stage), predicted; those that fit first, fastest
// first, then those left out. NotFound when the calibration lacks a cost the fastest
// layouts need (as predict_step names it) and none could be predicted.
// Without machine.cluster, a plan whose ranks sit on several hosts with a learnt link
// between them is searched on those hosts (cluster_of_plan_hosts, host_links.h).
Expected<std::vector<Candidate>> search_layouts(const Plan& plan, const Calibration& calibration, const MachineShape& machine,
                                                const SearchSpace& space);

// Why `other` is slower than `best`: per share of the step (compute, pipeline idle,
// waiting for gradients (local SGD: its meeting), injected delay, messages (between
// stages, a worker's pulls and pushes), the time no span covers
// that measured runs had), the difference on the
// rank that ends each step last: what it adds, largest first, then what it saves, e.g.
// "+3.1 ms waiting for gradients, +0.8 ms pipeline idle, -0.5 ms compute on the slowest rank".
std::string why_slower(const Prediction& best, const Prediction& other);
// The same shares for one layout, on its rank that ends each step last, the non-zero ones
// in that order: "4.1 ms compute, 1.2 ms pipeline idle, 0.3 ms messages, 0.1 ms residual"
// (residual: the time no span covers).
std::string step_breakdown(const Prediction& p);

// A data-parallel scaling curve: the plan with 1, 2, 4, ... replicas up to `devices`
// (and `devices` itself), each replica keeping the plan's per-replica batch (weak
// scaling), predicted. Without machine.cluster, a plan on several hosts with a learnt
// link between them scales over as many hosts like them as it needs, joined by it.
struct ScalePoint {
  int devices = 0;
  double step_ms = 0, samples_per_s = 0;
  double efficiency = 0;  // samples/s / (devices / first point's devices x the first's)
};
Expected<std::vector<ScalePoint>> scaling_curve(const Plan& plan, const Calibration& calibration, const MachineShape& machine,
                                                int devices);

}  // namespace loom::predict
