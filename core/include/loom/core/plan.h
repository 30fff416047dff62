// The parallel training plan: what a user designs and Loom runs. A plan is a versioned
// JSON document ("format": "loom-plan/1") with sections model, data, training and
// parallel. The schema already covers the fields that later strategies execute (pipeline
// stages, asynchronous modes, stragglers) so that plans written today stay valid.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

// Per-sample shape, without the batch dimension: [C, H, W] for images, [F] for vectors.
using Shape = std::vector<std::int64_t>;

inline std::int64_t shape_elements(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

enum class LayerKind { Linear, Relu, Tanh, Gelu, Conv2d, MaxPool2d, Flatten, Dropout, Parallel };

struct LayerSpec;

// One path through a parallel block; its output is concatenated with the others'.
struct BranchSpec {
  std::vector<LayerSpec> layers;
  int stage = -1;  // pipeline stage of the whole branch; -1 means the block's stage

  bool operator==(const BranchSpec&) const = default;
};

struct LayerSpec {
  LayerKind kind = LayerKind::Relu;
  std::string name;                // unique in the model; filled in ("linear_2") when absent
  std::int64_t out = 0;            // linear: output features
  bool bias = true;                // linear, conv2d
  std::int64_t out_channels = 0;   // conv2d
  std::int64_t kernel = 0;         // conv2d, maxpool2d: square kernel size
  std::int64_t stride = 0;         // conv2d (default 1), maxpool2d (default = kernel)
  std::int64_t padding = 0;        // conv2d
  double p = 0.0;                  // dropout probability
  std::vector<BranchSpec> branches;  // parallel
  int stage = 0;                   // pipeline stage this layer runs on

  bool operator==(const LayerSpec&) const = default;
};

enum class LossKind { SoftmaxCrossEntropy };

struct ModelSpec {
  Shape input;
  std::vector<LayerSpec> layers;
  LossKind loss = LossKind::SoftmaxCrossEntropy;

  bool operator==(const ModelSpec&) const = default;
};

enum class DataSource { FashionMnist, Synthetic };
enum class SyntheticKind { Blobs, Spirals };

struct DataSpec {
  DataSource source = DataSource::FashionMnist;
  std::string path = "/usr/share/datasets/fashion-mnist";  // directory of IDX files
  std::int64_t train_limit = 0;  // use only the first N training samples (0 = all)
  std::int64_t test_limit = 0;   // use only the first N test samples (0 = all)
  bool shuffle = true;           // reshuffle each epoch, deterministically from the seed
  // synthetic only
  SyntheticKind synthetic = SyntheticKind::Blobs;
  int classes = 3;
  int features = 2;  // blobs: dimension of each sample (spirals are always 2-D)
  std::int64_t train_samples = 3000;
  std::int64_t test_samples = 600;
  double noise = 0.5;
  std::uint64_t seed = 7;

  bool operator==(const DataSpec&) const = default;
};

enum class OptimizerKind { Sgd, Momentum, Adam };

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::Sgd;
  double lr = 0.01;
  double momentum = 0.9;  // momentum
  double beta1 = 0.9;     // adam
  double beta2 = 0.999;   // adam
  double eps = 1e-8;      // adam
  double weight_decay = 0.0;

  bool operator==(const OptimizerSpec&) const = default;
};

enum class DivergencePolicy { Stop, Continue };

struct TrainingSpec {
  std::int64_t batch = 64;  // global batch: samples per optimizer step over all replicas
  int epochs = 1;           // used when steps == 0
  std::int64_t steps = 0;   // optimizer steps; overrides epochs when > 0
  OptimizerSpec optimizer;
  std::uint64_t seed = 42;  // weight init, shuffling and dropout
  std::int64_t eval_every = 0;  // evaluate on the test set every N steps (0 = end of each epoch)
  int threads = 0;              // BLAS threads per rank (0 = cores / ranks on the host)
  // Seconds a rank may record no progress before the host ends the run as hung; 0 = the
  // automatic limit (docs/plan-format.md: 120 s in setup, then 20 median steps, >= 30 s).
  double hang_timeout_s = 0;
  // Every rank saves a checkpoint (parameters, optimizer state, data position) every N
  // steps; 0 = only when the run is stopped. Resumed with `loom-cli resume RUN_ID`.
  std::int64_t checkpoint_every = 0;
  // gpu devices: cuBLAS may run the fp32 matrix products on TF32 tensor cores (10-bit
  // mantissa products, fp32 sums): faster, within 1e-3 of fp32. Refused without a gpu.
  bool tf32 = false;
  // gpu devices: capture the steady step of a one-process run as one device graph and
  // replay it (one launch instead of one per kernel) where the plan allows it: static
  // shapes, no gradient accumulation, no dropout, no straggler (docs/plan-format.md).
  bool graph = true;
  // What a run does when its loss becomes NaN or infinite: stop there, failed, saying
  // "the loss diverged at step N" (the default), or go on (a lesson about divergence).
  // Either way every value up to then is kept and show says where it diverged.
  DivergencePolicy on_divergence = DivergencePolicy::Stop;

  bool operator==(const TrainingSpec&) const = default;
};

enum class DeviceKind { Cpu, Gpu };

struct DeviceSpec {
  DeviceKind kind = DeviceKind::Cpu;
  std::string host = "localhost";
  int gpu = -1;  // GPU index on the host (gpu devices only)

  bool operator==(const DeviceSpec&) const = default;
};

enum class SyncMode { AllReduce, ParameterServer, Ssp, LocalSgd };
enum class Schedule { GPipe, OneFOneB };
enum class CommBackend { Mpi, Nccl };
enum class DelayDistribution { None, Constant, Uniform, Exponential };

struct SyncSpec {
  SyncMode mode = SyncMode::AllReduce;
  int bound = 0;      // ssp: how many clocks a worker may run ahead of the slowest
  int period = 1;     // local_sgd: steps between parameter averaging
  int servers = 1;    // parameter_server / ssp: server ranks (tensors sharded across them)
  bool staleness_aware_lr = false;  // divide the learning rate by the staleness

  bool operator==(const SyncSpec&) const = default;
};

// Slows a rank down for teaching: compute takes `slowdown` times longer, plus a random
// delay per step drawn from `delay` with mean `delay_ms`.
struct StragglerSpec {
  int rank = 0;
  double slowdown = 1.0;
  DelayDistribution delay = DelayDistribution::None;
  double delay_ms = 0.0;

  bool operator==(const StragglerSpec&) const = default;
};

struct ParallelSpec {
  std::vector<DeviceSpec> devices;  // one per rank, in rank order
  int data_parallel = 1;            // replicas of each pipeline stage
  int stages = 1;                   // pipeline stages
  int microbatches = 1;
  Schedule schedule = Schedule::GPipe;
  SyncSpec sync;
  double bucket_mb = 25.0;          // all-reduce bucket size
  int grad_accumulation = 1;        // micro-steps per optimizer step
  CommBackend backend = CommBackend::Mpi;
  std::vector<StragglerSpec> stragglers;

  bool operator==(const ParallelSpec&) const = default;
};

enum class Arrivals { Constant, Poisson };

// Serving instead of training (docs/plan-format.md, "serve"): rank 0 is an inference
// server that runs the model's forward pass on batches of queued requests, ranks
// 1..clients send requests, each one test sample, and time the replies. A batch starts
// when `max_batch` requests are queued or the oldest has waited `timeout_ms`, whichever
// comes first.
struct ServeSpec {
  int clients = 1;
  std::int64_t max_batch = 8;   // B
  double timeout_ms = 5.0;      // T
  double rate = 200.0;          // requests per second, all clients together
  Arrivals arrivals = Arrivals::Poisson;
  std::int64_t requests = 400;  // in all, split evenly over the clients
  // Parameters saved by `loom-cli run --dump-params` (a trained model); empty = the
  // initial weights from training.seed.
  std::string weights;

  bool operator==(const ServeSpec&) const = default;
};

struct Plan {
  std::string name;
  ModelSpec model;
  DataSpec data;
  TrainingSpec training;
  ParallelSpec parallel;
  std::optional<ServeSpec> serve;  // present: the plan serves requests instead of training

  bool operator==(const Plan&) const = default;
};

inline constexpr std::string_view kPlanFormat = "loom-plan/1";

// Ranks the plan needs: replicas x stages, plus parameter servers in the asynchronous
// modes; a serving plan needs its inference server and its clients.
int world_size(const Plan& plan);

// What one rank does. Ranks are laid out stage-major: rank = stage * data_parallel +
// replica for the workers, then the parameter servers (asynchronous modes) after them.
// Ranks at or beyond world_size(plan) get kind Unused. A serving plan has one
// InferenceServer (rank 0) and Clients (ranks 1..clients).
enum class RankKind { Worker, Server, Unused, InferenceServer, Client };
struct RankRole {
  RankKind kind = RankKind::Unused;
  int stage = -1;    // workers: pipeline stage
  int replica = -1;  // workers: data-parallel replica of that stage
  int server = -1;   // servers: server index

  bool operator==(const RankRole&) const = default;
};
RankRole rank_role(const Plan& plan, int rank);

// One problem with a plan: `path` is a JSON pointer ("/model/layers/3/out").
struct PlanError {
  std::string path;
  std::string reason;
};

struct PlanResult {
  std::optional<Plan> plan;        // set only when there are no errors
  std::vector<PlanError> errors;   // every problem found, not only the first
  bool ok() const { return plan.has_value() && errors.empty(); }
};

// Parses and validates in one go: syntax, unknown keys, wrong types, impossible shapes,
// placement and strategy consistency. All errors are collected.
PlanResult parse_plan(std::string_view json_text);
PlanResult load_plan_file(const std::string& path);

// What the running build can execute: CPU devices over MPI always; gpu devices where the
// CUDA kernel backend was compiled (their ranks exchange tensors through host memory over
// MPI); the nccl backend where the NCCL communicator was. A plan asking for more than the
// build has is refused, never quietly run on the CPU.
struct BuildCapabilities {
  bool cuda = false;  // gpu devices (CUDA kernels, cuBLAS)
  bool nccl = false;  // "backend": "nccl"
};
BuildCapabilities this_build();

// The semantic checks parse_plan runs after reading (ranges, shapes, stages, devices,
// strategy consistency, what this build can run), for a Plan built or edited in memory,
// e.g. by the designer.
std::vector<PlanError> validate_plan(const Plan& plan);
// The same against a stated build (tests, and the day a GPU build exists).
std::vector<PlanError> validate_plan(const Plan& plan, const BuildCapabilities& build);

// Gives every unnamed layer the name "<type>_<pre-order index>" (made unique if a user
// already took it). parse_plan does this; editors call it after inserting layers.
void assign_default_layer_names(ModelSpec& model);

// Canonical JSON for a plan (all fields, defaults written out); parse_plan(plan_to_json(p))
// gives p back. The run store keeps this text with each run.
std::string plan_to_json(const Plan& plan, int indent = 2);

// The embedded default plan: an MLP on Fashion-MNIST in one process.
Plan default_plan();

// "linear", "conv2d", ... as written in plan files.
std::string_view layer_kind_name(LayerKind kind);
std::string_view sync_mode_name(SyncMode mode);
std::string_view optimizer_name(OptimizerKind kind);
std::string_view schedule_name(Schedule schedule);
std::string_view backend_name(CommBackend backend);
std::string_view device_kind_name(DeviceKind kind);
std::string_view delay_name(DelayDistribution delay);
std::string_view data_source_name(DataSource source);  // "fashion-mnist", "synthetic"
std::string_view synthetic_kind_name(SyntheticKind kind);
std::string_view arrivals_name(Arrivals arrivals);  // "constant", "poisson"

// Number of classes the plan's dataset has (10 for Fashion-MNIST, data.classes otherwise).
int dataset_classes(const Plan& plan);

}  // namespace loom
