// Limits on every size and count a plan may state. They are generous for anything Loom
// trains (a workstation or a small cluster, fp32 on CPUs or GPUs), and they are what
// keeps validation itself safe: no arithmetic on plan values overflows, no vector sized
// by a plan value exhausts memory, and no recursion over the JSON or the model goes
// deeper than kMaxNesting. validate_plan checks them first and stops there if any is
// broken, so nothing after it ever sees an absurd value. docs/plan-format.md lists them.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"

namespace loom::limits {

inline constexpr int kMaxJsonDepth = 64;             // nested arrays/objects in the document
inline constexpr std::int64_t kMaxPlanBytes = std::int64_t(16) << 20;  // a plan file's size
inline constexpr int kMaxNesting = 16;               // parallel blocks inside parallel blocks
inline constexpr int kMaxLayers = 10'000;            // layers, counting those inside branches
inline constexpr std::int64_t kMaxDimension = 1 << 24;  // any shape dimension, out, out_channels, features
inline constexpr std::int64_t kMaxKernel = 1024;     // conv2d / maxpool2d kernel, stride, padding
inline constexpr std::int64_t kMaxBatch = 1 << 24;   // global batch
inline constexpr std::int64_t kMaxSteps = 1LL << 40;
inline constexpr int kMaxEpochs = 1'000'000;
inline constexpr int kMaxRanks = 4096;               // data_parallel x stages + servers
inline constexpr int kMaxStages = 1024;
inline constexpr int kMaxMicrobatches = 1 << 16;
inline constexpr int kMaxThreads = 1024;
inline constexpr std::int64_t kMaxSamples = 1LL << 32;  // synthetic samples, train/test limits
inline constexpr int kMaxClasses = 1 << 20;
inline constexpr std::int64_t kMaxParameters = 1LL << 36;  // about 69 billion: 275 GB of fp32 weights

// The deepest nesting of arrays and objects in a JSON text (strings skipped), counted
// without parsing, so that a document nested a million deep is refused before a
// recursive parser sees it. Stops counting past `stop_at`.
int json_depth(std::string_view text, int stop_at = kMaxJsonDepth + 1);

// Every limit on a field the plan breaks, with its JSON path; empty when none is.
std::vector<PlanError> check_limits(const Plan& plan);

// Sizes within limits can still multiply into an absurd model (a few layers of 2^24
// features): the parameter count (saturating in model_info) against kMaxParameters.
std::vector<PlanError> check_parameters(const ModelInfo& info);

// A plan whose largest rank needs more memory than `memory_bytes` (weights, gradients,
// optimizer state and activations, as model_info estimates them), as one error naming
// the stage; else whose ranks on this machine (host "localhost") need more together, as
// one error naming how many; empty when it fits or when memory_bytes <= 0 (unknown).
std::vector<PlanError> check_memory(const Plan& plan, std::int64_t memory_bytes);
std::vector<PlanError> check_memory(const Plan& plan, const ModelInfo& info, std::int64_t memory_bytes);  // inferred

}  // namespace loom::limits
