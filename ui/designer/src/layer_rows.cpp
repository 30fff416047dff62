// Index-path addressing of the plan's layer tree (see layer_rows.h).
#include "loom/ui/designer/layer_rows.h"

#include <cassert>

namespace loom::ui {
namespace {

void collect(const std::vector<loom::LayerSpec>& layers, const LayerAddress& prefix, const std::string& path,
             int depth, int inherited, bool includeBranches, std::vector<LayerRow>& rows) {
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const loom::LayerSpec& layer = layers[i];
    LayerAddress address = prefix;
    address.push_back(static_cast<int>(i));
    const std::string layerPath = path + "/" + std::to_string(i);
    const int stage = inherited >= 0 ? inherited : layer.stage;
    rows.push_back({address, layerPath, depth, false, stage});
    for (std::size_t b = 0; b < layer.branches.size(); ++b) {
      const loom::BranchSpec& branch = layer.branches[b];
      LayerAddress branchAddress = address;
      branchAddress.push_back(static_cast<int>(b));
      const std::string branchPath = layerPath + "/branches/" + std::to_string(b);
      const int branchStage = branch.stage >= 0 ? branch.stage : layer.stage;
      if (includeBranches) rows.push_back({branchAddress, branchPath, depth + 1, true, branchStage});
      collect(branch.layers, branchAddress, branchPath + "/layers", depth + 1, branchStage, includeBranches, rows);
    }
  }
}

}  // namespace

std::vector<LayerRow> layerRows(const loom::ModelSpec& model, bool includeBranches) {
  std::vector<LayerRow> rows;
  // Top-level layers carry their own stage; inside a branch, the branch's stage rules.
  collect(model.layers, {}, "/model/layers", 0, -1, includeBranches, rows);
  return rows;
}

bool isBranchAddress(const LayerAddress& address) { return !address.empty() && address.size() % 2 == 0; }

bool addressValid(const loom::ModelSpec& model, const LayerAddress& address) {
  const std::vector<loom::LayerSpec>* list = &model.layers;
  for (std::size_t k = 0; k < address.size(); ++k) {
    const int i = address[k];
    if (k % 2 == 0) {
      if (i < 0 || i >= static_cast<int>(list->size())) return false;
    } else {
      const loom::LayerSpec& block = (*list)[static_cast<std::size_t>(address[k - 1])];
      if (i < 0 || i >= static_cast<int>(block.branches.size())) return false;
      list = &block.branches[static_cast<std::size_t>(i)].layers;
    }
  }
  return !address.empty();
}

std::vector<loom::LayerSpec>& layerList(loom::ModelSpec& model, const LayerAddress& address) {
  assert(!address.empty() && !isBranchAddress(address));
  std::vector<loom::LayerSpec>* list = &model.layers;
  for (std::size_t k = 0; k + 1 < address.size(); k += 2) {
    list = &(*list)[static_cast<std::size_t>(address[k])].branches[static_cast<std::size_t>(address[k + 1])].layers;
  }
  return *list;
}

loom::LayerSpec& layerAt(loom::ModelSpec& model, const LayerAddress& address) {
  return layerList(model, address)[static_cast<std::size_t>(address.back())];
}

const loom::LayerSpec& layerAt(const loom::ModelSpec& model, const LayerAddress& address) {
  return layerAt(const_cast<loom::ModelSpec&>(model), address);  // read-only use of the same walk
}

loom::BranchSpec& branchAt(loom::ModelSpec& model, const LayerAddress& address) {
  assert(isBranchAddress(address));
  LayerAddress block(address.begin(), address.end() - 1);
  return layerAt(model, block).branches[static_cast<std::size_t>(address.back())];
}

const loom::BranchSpec& branchAt(const loom::ModelSpec& model, const LayerAddress& address) {
  return branchAt(const_cast<loom::ModelSpec&>(model), address);  // read-only use of the same walk
}

void applyStage(std::vector<loom::LayerSpec>& layers, int stage) {
  for (loom::LayerSpec& layer : layers) {
    layer.stage = stage;
    for (loom::BranchSpec& branch : layer.branches) {
      if (branch.stage < 0) applyStage(branch.layers, stage);
    }
  }
}

void setRowStage(loom::ModelSpec& model, const LayerAddress& address, int stage) {
  if (!addressValid(model, address)) return;
  if (address.size() == 1) {
    std::vector<loom::LayerSpec> one{layerAt(model, address)};
    applyStage(one, stage);
    layerAt(model, address) = std::move(one.front());
    return;
  }
  // Inside (or naming) a branch: the innermost enclosing branch takes the stage.
  LayerAddress branchAddress = isBranchAddress(address) ? address : LayerAddress(address.begin(), address.end() - 1);
  loom::BranchSpec& branch = branchAt(model, branchAddress);
  branch.stage = stage;
  applyStage(branch.layers, stage);
}

loom::LayerSpec defaultLayer(loom::LayerKind kind, int stage) {
  loom::LayerSpec layer;
  layer.kind = kind;
  layer.stage = stage;
  switch (kind) {
    case loom::LayerKind::Linear: layer.out = 64; break;
    case loom::LayerKind::Conv2d:
      layer.out_channels = 8;
      layer.kernel = 3;
      layer.stride = 1;
      layer.padding = 1;
      break;
    case loom::LayerKind::MaxPool2d: layer.kernel = 2; break;
    case loom::LayerKind::Dropout: layer.p = 0.1; break;
    case loom::LayerKind::Parallel: {
      loom::LayerSpec relu = defaultLayer(loom::LayerKind::Relu, stage);
      layer.branches = {loom::BranchSpec{{relu}, -1}, loom::BranchSpec{{relu}, -1}};
      break;
    }
    default: break;
  }
  return layer;
}

}  // namespace loom::ui
