// Addressing layers and branches inside a plan's nested model, for the designer models.
// A row is a layer or a branch header, in pre-order; its address is the index path
// through the tree: {layer} at top level, {layer, branch} for a branch, {layer, branch,
// layer} for a layer inside it, and so on. Stage edits go through setRowStage, which
// keeps branch layers on their branch's stage as validate_plan demands.
#pragma once

#include <string>
#include <vector>

#include "loom/core/plan.h"

namespace loom::ui {

using LayerAddress = std::vector<int>;  // odd length: a layer; even length: a branch

struct LayerRow {
  LayerAddress address;
  std::string json_path;  // "/model/layers/0/branches/1" for a branch header
  int depth = 0;          // nesting level as loom::LayerInfo counts it (branch = its layers' depth)
  bool is_branch = false;
  int stage = 0;          // resolved stage: a branch's own, or its block's when unset
};

// Every layer (and, when includeBranches, every branch header) in pre-order.
std::vector<LayerRow> layerRows(const loom::ModelSpec& model, bool includeBranches);

bool isBranchAddress(const LayerAddress& address);
// The list holding the layer at `address` (address must name a layer).
std::vector<loom::LayerSpec>& layerList(loom::ModelSpec& model, const LayerAddress& address);
loom::LayerSpec& layerAt(loom::ModelSpec& model, const LayerAddress& address);
const loom::LayerSpec& layerAt(const loom::ModelSpec& model, const LayerAddress& address);
loom::BranchSpec& branchAt(loom::ModelSpec& model, const LayerAddress& address);
const loom::BranchSpec& branchAt(const loom::ModelSpec& model, const LayerAddress& address);
// True when every index of `address` is in range.
bool addressValid(const loom::ModelSpec& model, const LayerAddress& address);

// Moves a layer (with its nested branches that follow it) or a whole branch to `stage`.
// A layer inside a branch cannot run elsewhere than its branch, so it moves the branch.
void setRowStage(loom::ModelSpec& model, const LayerAddress& address, int stage);
// Sets the stage of every layer in `layers`, recursing into branches that inherit it.
void applyStage(std::vector<loom::LayerSpec>& layers, int stage);

// A new layer of `kind` with settings that work for a typical input (linear out 64,
// conv 8 channels k3 p1, pool k2, dropout 0.1, parallel with two relu branches).
loom::LayerSpec defaultLayer(loom::LayerKind kind, int stage);

}  // namespace loom::ui
