// Files a run leaves beside the run store, in plain binary: parameter files
// ("loom-params/1": name, element count and float values per tensor, little-endian
// float32, no padding), used to compare parallel runs with single-process training, and
// training checkpoints ("loom-checkpoint/1").
//
// A checkpoint holds the same tensor list after a header that says where training stood:
// steps completed (which fixes the data position: the epoch's shuffle and the batch
// within it follow from the step), the optimizer's step count, the rank and world that
// wrote it, the global batch and the optimizer's name. A run's checkpoints live in one
// directory per step, one file per rank (store::checkpoint_dir gives the run's):
//   <run dir>/step-00000200/rank-0.ckpt
// A step directory is complete when every rank of the world has its file there.
// Written by the ranks (launcher/engine), found by whoever resumes (loom-cli, the
// workbench).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/status.h"

namespace loom::store {

struct NamedTensor {
  std::string name;
  std::vector<float> values;
};

Status save_params(const std::string& path, const std::vector<NamedTensor>& tensors);
Expected<std::vector<NamedTensor>> load_params(const std::string& path);

// One rank's checkpoint. Optimizer state rides in `tensors` as "<param>#m" (momentum,
// Adam's first moment) and "<param>#v" (Adam's second moment).
struct Checkpoint {
  std::int64_t step = 0;             // steps completed when it was saved
  std::int64_t optimizer_steps = 0;  // the optimizer's step count (Adam's bias correction)
  std::int64_t rank = 0, world = 1;
  std::int64_t global_batch = 0;
  std::string optimizer;  // "sgd", "momentum", "adam": what the state tensors mean
  std::vector<NamedTensor> tensors;
};

// Written to a temporary file and renamed, so a rank killed while saving leaves either
// the whole file or none.
Status save_checkpoint(const std::string& path, const Checkpoint& checkpoint);
Expected<Checkpoint> load_checkpoint(const std::string& path);
// The header alone (tensors left empty): cheap, for finding and describing checkpoints.
Expected<Checkpoint> load_checkpoint_header(const std::string& path);

std::string checkpoint_step_dir(const std::string& run_dir, std::int64_t step);
std::string checkpoint_file(const std::string& step_dir, int rank);
// The newest step directory under `run_dir` that holds every rank's file; NotFound when
// there is none.
Expected<std::string> latest_checkpoint(const std::string& run_dir);
// Removes this rank's files from every step directory of `run_dir` but the newest `keep`
// (and directories left empty), so a long run keeps two checkpoints, not hundreds.
void prune_checkpoints(const std::string& run_dir, int rank, int keep);
// A completed run is never resumed: its checkpoints are removed when it completes.
void remove_checkpoints(const std::string& run_dir);

}  // namespace loom::store
