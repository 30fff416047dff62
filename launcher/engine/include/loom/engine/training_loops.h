// The factory of training loops, above every strategy: the one place that includes them
// all, so no strategy includes another (docs/architecture.md).
#pragma once

#include <memory>

#include "loom/comm/communicator.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/training_loop.h"
#include "loom/trace/recorder.h"

namespace loom::engine {

// The loop the plan calls for: pipeline stages (and micro-batches) run as a pipeline
// (PipelineTrainer), the parameter-server and ssp modes as an asynchronous worker
// (AsyncWorker), everything else as data parallelism (Trainer). Everything computes
// through `backend` (the rank's device).
std::unique_ptr<TrainingLoop> make_training_loop(const Plan& plan, const ModelInfo& info, const data::TrainTest& data,
                                                 trace::Recorder* recorder, comm::Communicator* comm = nullptr,
                                                 kernels::Backend& backend = default_backend());

}  // namespace loom::engine
