// Cuts the model into stage units (see stage_graph.h). Rows of ModelInfo are numbered in
// pre-order, so a run of consecutive layers occupies consecutive rows and a unit can be
// built from its first row alone.
#include "loom/core/stage_graph.h"

#include <algorithm>
#include <string>

namespace loom {
namespace {

std::size_t subtree_rows(const LayerSpec& spec) {
  std::size_t rows = 1;
  for (const BranchSpec& branch : spec.branches) {
    for (const LayerSpec& layer : branch.layers) rows += subtree_rows(layer);
  }
  return rows;
}

int branch_stage(const LayerSpec& block, const BranchSpec& branch) {
  return branch.stage >= 0 ? branch.stage : block.stage;
}

// True when a block's branches run on a stage other than the block's own.
bool placed_apart(const LayerSpec& block) {
  return std::any_of(block.branches.begin(), block.branches.end(),
                     [&](const BranchSpec& b) { return branch_stage(block, b) != block.stage; });
}

class GraphBuilder {
 public:
  GraphBuilder(const Plan& plan, const ModelInfo& info) : plan_(plan), info_(info) {
    graph_.stages = std::max(plan.parallel.stages, 1);
    graph_.values.push_back({-1, -1, plan.model.input, {}});
  }

  Expected<StageGraph> build() {
    const auto& layers = plan_.model.layers;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const std::string path = "/model/layers/" + std::to_string(i);
      const LayerSpec& spec = layers[i];
      if (spec.kind == LayerKind::Parallel && placed_apart(spec)) {
        const int end_stage = i + 1 < layers.size() ? layers[i + 1].stage : last_branch_stage(spec);
        LOOM_TRY(add_split_block(spec, end_stage, path));
      } else {
        LOOM_TRY(check_stage(spec.stage, path + "/stage"));
        LOOM_TRY(check_nested(spec, spec.stage, path));
        add_layer(spec, spec.stage);
      }
    }
    if (current_ == kModelInput) return make_error(ErrorCode::InvalidArgument, "/model/layers: the model has no layers");
    graph_.output = current_;
    return std::move(graph_);
  }

 private:
  Status check_stage(int stage, const std::string& path) const {
    if (stage >= 0 && stage < graph_.stages) return {};
    return make_error(ErrorCode::InvalidArgument, path + ": stage " + std::to_string(stage) +
                                                      " does not exist (parallel.stages is " +
                                                      std::to_string(graph_.stages) + ")");
  }

  // Blocks nested inside a unit run as one module, so they cannot be split further.
  Status check_nested(const LayerSpec& spec, int stage, const std::string& path) const {
    for (std::size_t b = 0; b < spec.branches.size(); ++b) {
      const BranchSpec& branch = spec.branches[b];
      const std::string branch_path = path + "/branches/" + std::to_string(b);
      if (branch_stage(spec, branch) != stage) {
        return make_error(ErrorCode::InvalidArgument,
                          branch_path + "/stage: a parallel block inside a branch or run of layers runs on stage " +
                              std::to_string(stage) + "; only top-level blocks may place branches on other stages");
      }
      for (std::size_t l = 0; l < branch.layers.size(); ++l) {
        LOOM_TRY(check_nested(branch.layers[l], stage, branch_path + "/layers/" + std::to_string(l)));
      }
    }
    return {};
  }

  static int last_branch_stage(const LayerSpec& block) {
    int stage = block.stage;
    for (const BranchSpec& b : block.branches) stage = std::max(stage, branch_stage(block, b));
    return stage;
  }

  int add_value(int producer, int stage, const Shape& shape) {
    graph_.values.push_back({producer, stage, shape, {}});
    return int(graph_.values.size()) - 1;
  }

  int add_unit(StageUnit unit, const Shape& output_shape) {
    const int index = int(graph_.units.size());
    for (int input : unit.inputs) graph_.values[std::size_t(input)].consumers.push_back(index);
    unit.output = add_value(index, unit.stage, output_shape);
    graph_.units.push_back(std::move(unit));
    return graph_.units.back().output;
  }

  // Extends the last unit when it runs on the same stage and produced the current value.
  void add_layer(const LayerSpec& spec, int stage) {
    const Shape& shape = info_.layers.at(row_).output;
    if (!graph_.units.empty()) {
      StageUnit& last = graph_.units.back();
      if (last.kind == UnitKind::Layers && last.stage == stage && last.output == current_) {
        last.layers.push_back(&spec);
        last.rows += subtree_rows(spec);
        graph_.values[std::size_t(current_)].shape = shape;
        row_ += subtree_rows(spec);
        return;
      }
    }
    StageUnit unit;
    unit.stage = stage;
    unit.layers = {&spec};
    unit.first_row = row_;
    unit.rows = subtree_rows(spec);
    unit.inputs = {current_};
    current_ = add_unit(std::move(unit), shape);
    row_ += subtree_rows(spec);
  }

  Status add_split_block(const LayerSpec& block, int end_stage, const std::string& path) {
    LOOM_TRY(check_stage(end_stage, path + "/stage"));
    const std::size_t block_row = row_++;
    StageUnit concat;
    concat.kind = UnitKind::Concat;
    concat.stage = end_stage;
    concat.layer = info_.layers.at(block_row).id.value;
    for (std::size_t b = 0; b < block.branches.size(); ++b) {
      const std::string branch_path = path + "/branches/" + std::to_string(b);
      const int value = add_branch(block, block.branches[b], branch_path);
      if (value < 0) return make_error(ErrorCode::InvalidArgument, branch_path + "/stage: stage does not exist");
      concat.inputs.push_back(value);
      concat.widths.push_back(shape_elements(graph_.values[std::size_t(value)].shape));
    }
    current_ = add_unit(std::move(concat), info_.layers.at(block_row).output);
    return {};
  }

  // One branch as its own unit fed with the block's input; returns its output value.
  int add_branch(const LayerSpec& block, const BranchSpec& branch, const std::string& path) {
    const int stage = branch_stage(block, branch);
    if (!check_stage(stage, path + "/stage").ok()) return -1;
    if (branch.layers.empty()) return current_;  // an empty branch passes its input on
    StageUnit unit;
    unit.stage = stage;
    unit.first_row = row_;
    unit.inputs = {current_};
    std::size_t last_row = row_;
    for (const LayerSpec& layer : branch.layers) {
      if (!check_nested(layer, stage, path).ok()) return -1;
      unit.layers.push_back(&layer);
      unit.rows += subtree_rows(layer);
      last_row = row_;
      row_ += subtree_rows(layer);
    }
    return add_unit(std::move(unit), info_.layers.at(last_row).output);
  }

  const Plan& plan_;
  const ModelInfo& info_;
  StageGraph graph_;
  int current_ = kModelInput;
  std::size_t row_ = 0;
};

}  // namespace

std::vector<int> StageGraph::remote_consumer_stages(int value) const {
  const StageValue& v = values[static_cast<std::size_t>(value)];
  std::vector<int> stages_out;
  for (int unit : v.consumers) {
    const int stage = units[static_cast<std::size_t>(unit)].stage;
    if (stage != v.stage && std::find(stages_out.begin(), stages_out.end(), stage) == stages_out.end()) {
      stages_out.push_back(stage);
    }
  }
  std::sort(stages_out.begin(), stages_out.end());
  return stages_out;
}

Expected<StageGraph> build_stage_graph(const Plan& plan, const ModelInfo& info) {
  return GraphBuilder(plan, info).build();
}

}  // namespace loom
