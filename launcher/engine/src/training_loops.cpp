// The factory of training loops: the one file that knows every strategy.
#include "loom/engine/training_loops.h"

#include "loom/engine/data_parallel_trainer.h"
#include "loom/engine/parameter_server.h"
#include "loom/engine/pipeline_trainer.h"

namespace loom::engine {

std::unique_ptr<TrainingLoop> make_training_loop(const Plan& plan, const ModelInfo& info, const data::TrainTest& data,
                                                 trace::Recorder* recorder, comm::Communicator* comm,
                                                 kernels::Backend& backend) {
  if (uses_pipeline(plan)) return std::make_unique<PipelineTrainer>(plan, info, data, recorder, comm, backend);
  if (uses_parameter_server(plan)) return std::make_unique<AsyncWorker>(plan, info, data, recorder, comm, backend);
  return std::make_unique<Trainer>(plan, info, data, recorder, comm, backend);
}

}  // namespace loom::engine
