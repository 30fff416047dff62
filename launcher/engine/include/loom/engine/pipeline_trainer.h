// Model, pipeline and hybrid parallelism: one rank per (pipeline stage, data-parallel
// replica), stage-major (rank = stage * data_parallel + replica, see rank_role). A rank
// builds only its stage's units of the stage graph. Each global batch is cut into
// grad_accumulation x data_parallel x microbatches equal chunks; each flush runs its
// micro-batches under the plan's schedule, forward activations going to later stages and
// their gradients coming back through point-to-point messages. Gradients accumulate over
// the micro-batches, the replicas of a stage sum theirs on a stage communicator (bucketed
// and overlapped with the last backward when MPI allows two busy threads), then every
// rank steps its optimizer once. Loss gradients are scaled by 1/global_batch as in
// Trainer, so the sum is the full batch's gradient: the basis of the equivalence tests.
//
// Deadlock freedom: sends are non-blocking and receives block; every stage's order of
// operations is a sub-sequence of one global order in which each operation comes after
// those it depends on, so the earliest unfinished operation can always proceed.
//
// Trace: Forward/Backward/Loss carry the micro-batch; a blocked receive is an Idle span on
// the compute stream (the bubble) and a Recv span on the host stream; a send is a Send
// span. Send and Recv carry peer, bytes, micro-batch and a message id that is the same on
// both sides. At the end each rank reports the metrics "max_in_flight" and
// "peak_activation_bytes".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "loom/core/stage_graph.h"
#include "loom/engine/gradient_sync.h"
#include "loom/engine/pipeline_schedule.h"
#include "loom/engine/training_loop.h"

namespace loom::engine {

// Pipeline stages or micro-batches: the plan runs on PipelineTrainer.
bool uses_pipeline(const Plan& plan);

// Message ids of pipeline messages: base + ((step % 4096) * 256 + microbatch % 256) * 256
// + channel, channel < 128 for activations (value id) and 128 + edge for gradients. Ids
// repeat every 4096 steps; a viewer matches each send to the next receive with its id.
inline constexpr std::int32_t kPipelineMessageBase = 1 << 28;

class PipelineTrainer final : public TrainingLoop {
 public:
  // Throws std::invalid_argument when the stage graph cannot be built (validate_plan
  // reports the same problems with their JSON paths before a run).
  PipelineTrainer(const Plan& plan, const ModelInfo& info, const data::TrainTest& data, trace::Recorder* recorder,
                  comm::Communicator* comm = nullptr, kernels::Backend& backend = default_backend());
  ~PipelineTrainer() override;

  const std::vector<Param*>& params() const override { return params_; }
  Expected<std::vector<NamedTensor>> gather_params() override;

  int stage() const { return stage_; }
  int max_in_flight() const { return max_in_flight_; }
  // Activations kept for backward at the busiest moment: in-flight micro-batches times
  // the bytes one micro-batch leaves in this stage's layers and received inputs.
  std::int64_t peak_activation_bytes() const { return std::int64_t(max_in_flight_) * microbatch_activation_bytes_; }

 private:
  struct Slot;
  class SendProgress;
  // A device's pipeline bubble while it waits for a neighbour's tensor: from a stamp when
  // the host starts waiting (the device then runs out of queued work) to one after the
  // tensor is on the device, so it never overlaps the device's other spans. Nothing on
  // the CPU, where the receive itself is marked Idle.
  class Bubble {
   public:
    explicit Bubble(const Pass& pass);
    ~Bubble();
    Bubble(const Bubble&) = delete;
    Bubble& operator=(const Bubble&) = delete;

   private:
    DeviceTrace* device_;
    trace::Event event_;
    std::int32_t start_ = 0;
  };
  struct MicroBatch {
    int index = 0;  // within the step (flush * microbatches + m): traced
    int slot = 0;
    data::BatchSlice slice;
    std::int64_t first_sample = 0;
  };

  Expected<StepStats> train_step(std::int64_t step, const std::vector<std::int64_t>& order,
                                 std::int64_t batch_in_epoch, bool stop_requested) override;
  Expected<std::optional<Evaluation>> evaluate_due() override;
  void finish(const TrainerHooks& hooks, std::int64_t steps) override;
  Optimizer* optimizer() override { return &optimizer_; }
  std::int64_t workspace_bytes() const override;
  const ParamArena* packed_params() const override { return &arena_; }

  Status run_flush(std::int64_t step, int flush, const std::vector<std::int64_t>& order, std::int64_t batch_in_epoch,
                   bool last_flush, StepStats& stats);
  // stats (when given) collect loss x samples and the correct count on the loss stage.
  Status forward(const MicroBatch& mb, const data::Dataset& set, const std::vector<std::int64_t>& order,
                 const Pass& pass, StepStats* stats);
  Status backward(const MicroBatch& mb, const Pass& pass);
  Status receive_inputs(const StageUnit& unit, const MicroBatch& mb, const Pass& pass);
  Status gradient_of_output(int unit_index, const MicroBatch& mb, const Pass& pass, const Tensor** dy);
  void run_unit_forward(int unit_index, Slot& slot, const Pass& pass);
  void run_unit_backward(int unit_index, Slot& slot, const Tensor& dy, const Pass& pass);
  void send_input_gradients(int unit_index, const MicroBatch& mb, const Pass& pass);
  void load_batch(const data::Dataset& set, const std::vector<std::int64_t>& order, const MicroBatch& mb, Slot& slot,
                  const Pass& pass);
  std::pair<float, int> compute_loss(Slot& slot, const Pass& pass);
  Status evaluate_pipeline(StepStats& totals);

  // Communication with this replica's other stages, traced.
  void send(const Tensor& tensor, int stage, int tag, int channel, const MicroBatch& mb, const Pass& pass);
  Status receive(Tensor& tensor, std::int64_t batch, const Shape& shape, int stage, int tag, int channel,
                 const MicroBatch& mb, const Pass& pass);
  std::int32_t message_id(const Pass& pass, int channel) const;
  // Activations and gradients cross as device memory (NCCL), not staged through the host.
  bool sends_device_memory() const { return comm_->accepts_device_memory() && !backend_.host_memory(); }
  Status wait_sends(Slot& slot);
  Status wait_all_sends();
  int acquire_slot();
  void release_slot(int slot);

  int rank_of_stage(int stage) const { return stage * plan_.parallel.data_parallel + replica_; }
  bool consumes_input_batch() const;
  int edge_index(int unit, int input) const { return edge_offset_[std::size_t(unit)] + input; }

  StageGraph graph_;
  int stage_ = 0;
  int replica_ = 0;
  std::vector<int> my_units_;                         // unit indices on this stage, in order
  std::vector<std::unique_ptr<Sequential>> modules_;  // by unit index; null for other stages / Concat
  std::vector<int> edge_offset_;                      // first edge index of each unit's inputs
  std::vector<std::vector<int>> remote_stages_;       // by value: stages it is sent to
  bool needs_input_batch_ = false;                    // loads the batch (input or labels)
  std::vector<Param*> params_;
  ParamArena arena_;  // params_, packed
  Optimizer optimizer_;
  std::unique_ptr<comm::Communicator> stage_comm_;    // this stage's replicas (hybrid)
  std::unique_ptr<GradientSync> sync_;
  bool overlap_sync_ = false;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<SendProgress> progress_;  // after slots_: destroyed first, while requests live
  std::vector<int> free_slots_;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
  std::int64_t microbatch_activation_bytes_ = 0;
  std::int32_t message_step_ = 0;  // step part of message ids
};

}  // namespace loom::engine
