// What a rank's trainer keeps in its backend, counted tensor by tensor as the engine
// allocates it (internal to loom_predict). Two trainers: the one-stage trainer
// (engine::Sequential over the whole model, one copy of everything) and the pipeline
// trainer (stages or micro-batches: per micro-batch slot, by the stage graph).
#pragma once

#include <cstdint>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/core/status.h"

namespace loom::predict {

struct StageFloats {
  double per_slot = 0;   // floats per sample, for each micro-batch the stage holds at once
  double once = 0;       // floats per sample, however many are in flight (gradient scratch)
  double workspace = 0;  // floats in all: the convolutions' scratch, sized by the micro-batch
};

// The floats stage `stage` of `plan` keeps, `samples` samples a micro-batch; a gpu rank's
// convolutions unfold the whole micro-batch, a cpu rank's a block of it
// (core/memory_layout.h).
// The stage's parameters as its arena holds them: each tensor padded (core/memory_layout.h).
std::int64_t stage_param_floats(const ModelInfo& model, int stage);

Expected<StageFloats> stage_floats(const Plan& plan, const ModelInfo& model, int stage, std::int64_t samples,
                                   DeviceKind device);

}  // namespace loom::predict
