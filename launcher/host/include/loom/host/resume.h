// What `loom-cli resume RUN_ID` and the workbench's Resume action start: the stored run's
// own plan (optionally with another data-parallel replica count; the global batch stays,
// so the step still fixes the data position) from its newest complete checkpoint, as a
// new run that records the old one in resumed_from. Everything that would make the
// resumed run fail is said here, before anything starts.
#pragma once

#include <cstdint>
#include <string>

#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/store/run_store.h"

namespace loom::host {

struct ResumeRequest {
  Plan plan;                    // what the new run trains
  std::int64_t from_run = 0;    // the run it continues
  std::string step_dir;         // the checkpoint (profiles/checkpoint_files.h)
  std::int64_t step = 0;        // steps that checkpoint had completed
  std::int64_t saved_world = 0;  // ranks that saved it
};

// `replicas` 0 keeps the run's own replica count.
Expected<ResumeRequest> prepare_resume(store::RunStore& store, std::int64_t run_id, int replicas = 0);

// Whether a resumed run of this plan may have another replica count: data-parallel
// all-reduce without pipeline stages (each replica's checkpoint holds the whole model).
bool replicas_can_change(const Plan& plan);


}  // namespace loom::host
