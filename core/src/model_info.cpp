// Shape, parameter, FLOP and memory inference through a model, plus the text table that
// `loom-cli validate` prints. Inference keeps going after a problem: a layer whose input
// shape is unknown (empty Shape) produces an unknown output without further complaints,
// so one mistake yields one error rather than a cascade.
#include "loom/core/model_info.h"

#include "loom/core/plan_limits.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace loom {
namespace {

constexpr std::int64_t kFloatBytes = 4;

// Sizes come from user input; saturate instead of overflowing on absurd values.
std::int64_t mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<std::int64_t>::max() : r;
}
std::int64_t add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<std::int64_t>::max() : r;
}

std::int64_t elements(const Shape& shape) {
  if (shape.empty()) return 0;
  std::int64_t n = 1;
  for (std::int64_t d : shape) n = mul(n, d);
  return n;
}

std::string bracketed(const Shape& shape) { return "[" + format_shape(shape) + "]"; }

class Inference {
 public:
  Inference(const Plan& plan, std::vector<PlanError>* errors) : plan_(plan), errors_(errors) {}
  ModelInfo run();

 private:
  Shape walk(const std::vector<LayerSpec>& layers, Shape shape, const std::string& path, int depth,
             LayerId parent, int branch);
  Shape visit(const LayerSpec& layer, const Shape& input, const std::string& path, int depth, LayerId parent,
              int branch);
  Shape infer_layer(const LayerSpec& layer, const Shape& in, const std::string& path, LayerInfo& info);
  Shape linear(const LayerSpec& layer, const Shape& in, const std::string& path, LayerInfo& info);
  Shape conv2d(const LayerSpec& layer, const Shape& in, const std::string& path, LayerInfo& info);
  Shape maxpool2d(const LayerSpec& layer, const Shape& in, const std::string& path, LayerInfo& info);
  Shape parallel(const LayerSpec& layer, const Shape& in, const std::string& path, LayerId self, int depth);
  bool needs_image(const Shape& in, const std::string& path, std::string_view what);
  bool positive(const std::string& path, std::int64_t value);
  void error(std::string path, std::string reason) {
    if (errors_ != nullptr) errors_->push_back({std::move(path), std::move(reason)});
  }
  void fill_totals();

  const Plan& plan_;
  std::vector<PlanError>* errors_;
  ModelInfo info_;
};

bool Inference::positive(const std::string& path, std::int64_t value) {
  if (value > 0) return true;
  error(path, "expected a positive integer, got " + std::to_string(value));
  return false;
}

bool Inference::needs_image(const Shape& in, const std::string& path, std::string_view what) {
  if (in.size() == 3) return true;
  error(path, std::string(what) + " needs a 3-D input [channels, height, width] but gets " + bracketed(in));
  return false;
}

ModelInfo Inference::run() {
  Shape input = plan_.model.input;
  if (input.empty()) {
    error("/model/input", "the model input shape is empty: give the per-sample shape, e.g. [1, 28, 28]");
  } else if (std::any_of(input.begin(), input.end(), [](std::int64_t d) { return d <= 0; })) {
    error("/model/input", "input dimensions must be positive, got " + bracketed(input));
    input.clear();
  }
  info_.output = walk(plan_.model.layers, input, "/model/layers", 0, LayerId(), -1);
  fill_totals();
  return std::move(info_);
}

Shape Inference::walk(const std::vector<LayerSpec>& layers, Shape shape, const std::string& path, int depth,
                      LayerId parent, int branch) {
  for (std::size_t i = 0; i < layers.size(); ++i) {
    shape = visit(layers[i], shape, path + "/" + std::to_string(i), depth, parent, branch);
  }
  return shape;
}

Shape Inference::visit(const LayerSpec& layer, const Shape& input, const std::string& path, int depth,
                       LayerId parent, int branch) {
  const std::size_t index = info_.layers.size();
  LayerInfo entry;
  entry.id = LayerId(static_cast<std::int32_t>(index));
  entry.name = layer.name;
  entry.kind = layer.kind;
  entry.json_path = path;
  entry.depth = depth;
  entry.parent = parent;
  entry.branch = branch;
  entry.stage = layer.stage;
  entry.input = input;
  info_.layers.push_back(entry);  // before the branches: pre-order
  Shape output;
  if (layer.kind == LayerKind::Parallel) {
    output = parallel(layer, input, path, entry.id, depth);
  } else {
    output = infer_layer(layer, input, path, info_.layers[index]);
  }
  LayerInfo& done = info_.layers[index];  // re-fetched: branches may have grown the vector
  done.output = output;
  done.param_bytes = mul(done.params, kFloatBytes);
  done.activation_bytes = mul(mul(elements(output), std::max<std::int64_t>(plan_.training.batch, 0)), kFloatBytes);
  return output;
}

Shape Inference::infer_layer(const LayerSpec& layer, const Shape& in, const std::string& path, LayerInfo& info) {
  switch (layer.kind) {
    case LayerKind::Linear: return linear(layer, in, path, info);
    case LayerKind::Conv2d: return conv2d(layer, in, path, info);
    case LayerKind::MaxPool2d: return maxpool2d(layer, in, path, info);
    case LayerKind::Flatten: return in.empty() ? Shape{} : Shape{elements(in)};
    case LayerKind::Dropout:
      if (!(layer.p >= 0.0 && layer.p < 1.0)) {
        char value[32];
        std::snprintf(value, sizeof value, "%g", layer.p);
        error(path + "/p", std::string("dropout probability p must be in [0, 1), got ") + value);
      }
      [[fallthrough]];
    default:  // element-wise activations: one op per element
      info.forward_flops = elements(in);
      return in;
  }
}

Shape Inference::linear(const LayerSpec& layer, const Shape& in, const std::string& path, LayerInfo& info) {
  if (!positive(path + "/out", layer.out)) return {};
  if (in.size() > 1) {
    error(path, "a linear layer needs a flat (1-D) input but gets " + bracketed(in) +
                    ": insert a flatten layer before it");
  } else if (in.size() == 1) {
    info.params = add(mul(in[0], layer.out), layer.bias ? layer.out : 0);
    info.bias_params = layer.bias ? layer.out : 0;
    info.forward_flops = mul(2, mul(in[0], layer.out));
  }
  // The output width is known even when the input is not, which keeps later checks useful.
  return {layer.out};
}

Shape Inference::conv2d(const LayerSpec& layer, const Shape& in, const std::string& path, LayerInfo& info) {
  const std::int64_t stride = layer.stride == 0 ? 1 : layer.stride;  // 0 = default
  if (!positive(path + "/out_channels", layer.out_channels) || !positive(path + "/kernel", layer.kernel) ||
      !positive(path + "/stride", stride)) {
    return {};
  }
  if (layer.padding < 0) {
    error(path + "/padding", "expected a non-negative integer, got " + std::to_string(layer.padding));
    return {};
  }
  if (in.empty() || !needs_image(in, path, "conv2d")) return {};
  const std::int64_t k = layer.kernel, pad = layer.padding;
  const std::int64_t h = in[1] + 2 * pad, w = in[2] + 2 * pad;
  if (k > h || k > w) {
    error(path + "/kernel", "kernel " + std::to_string(k) + " is larger than the padded input " +
                                std::to_string(h) + "x" + std::to_string(w) + " (input " +
                                format_shape({in[1], in[2]}) + ", padding " + std::to_string(pad) + ")");
    return {};
  }
  Shape out{layer.out_channels, (h - k) / stride + 1, (w - k) / stride + 1};
  const std::int64_t weights = mul(mul(layer.out_channels, in[0]), mul(k, k));
  info.params = add(weights, layer.bias ? layer.out_channels : 0);
  info.bias_params = layer.bias ? layer.out_channels : 0;
  info.forward_flops = mul(2, mul(weights, mul(out[1], out[2])));
  return out;
}

Shape Inference::maxpool2d(const LayerSpec& layer, const Shape& in, const std::string& path, LayerInfo& info) {
  const std::int64_t stride = layer.stride == 0 ? layer.kernel : layer.stride;  // 0 = default
  if (!positive(path + "/kernel", layer.kernel) || !positive(path + "/stride", stride)) return {};
  if (in.empty() || !needs_image(in, path, "maxpool2d")) return {};
  const std::int64_t k = layer.kernel;
  if (k > in[1] || k > in[2]) {
    error(path + "/kernel", "pooling window " + std::to_string(k) + " is larger than the input " +
                                format_shape({in[1], in[2]}));
    return {};
  }
  Shape out{in[0], (in[1] - k) / stride + 1, (in[2] - k) / stride + 1};
  info.forward_flops = mul(elements(out), mul(k, k));  // one comparison per window element
  return out;
}

// The block's output concatenates its branches along dim 0 (channels or features).
Shape Inference::parallel(const LayerSpec& layer, const Shape& in, const std::string& path, LayerId self,
                          int depth) {
  if (layer.branches.empty()) {
    error(path + "/branches", "a parallel block needs at least one branch");
    return {};
  }
  std::vector<Shape> outputs;
  for (std::size_t b = 0; b < layer.branches.size(); ++b) {
    const std::string branch_path = path + "/branches/" + std::to_string(b) + "/layers";
    if (layer.branches[b].layers.empty()) {
      error(branch_path, "a branch needs at least one layer");
      outputs.emplace_back();
      continue;
    }
    outputs.push_back(walk(layer.branches[b].layers, in, branch_path, depth + 1, self, static_cast<int>(b)));
  }
  if (std::any_of(outputs.begin(), outputs.end(), [](const Shape& s) { return s.empty(); })) return {};
  Shape out = outputs[0];
  bool compatible = true;
  for (std::size_t b = 1; b < outputs.size(); ++b) {
    const Shape& s = outputs[b];
    compatible = compatible && s.size() == out.size() && std::equal(s.begin() + 1, s.end(), out.begin() + 1);
    out[0] = add(out[0], s[0]);
  }
  if (!compatible) {
    std::string list;
    for (std::size_t b = 0; b < outputs.size(); ++b) {
      list += (b ? ", branch " : "branch ") + std::to_string(b) + " gives " + bracketed(outputs[b]);
    }
    error(path, "branch outputs cannot be concatenated: " + list + "; all dimensions but the first must match");
    return {};
  }
  return out;
}

void Inference::fill_totals() {
  // Sized by the plan's stages only: a layer naming a stage outside them is reported by
  // validation and left out here (a stage of 2^31-1 must not size or index anything).
  const int stages = std::clamp(plan_.parallel.stages, 1, limits::kMaxStages);
  info_.stage_memory_bytes.assign(static_cast<std::size_t>(stages), 0);
  info_.stage_params.assign(static_cast<std::size_t>(stages), 0);
  // Weights and gradients, plus optimizer state: Adam keeps two moments, momentum one.
  std::int64_t copies = 2;
  if (plan_.training.optimizer.kind == OptimizerKind::Adam) copies += 2;
  if (plan_.training.optimizer.kind == OptimizerKind::Momentum) copies += 1;
  for (const LayerInfo& l : info_.layers) {
    info_.total_params = add(info_.total_params, l.params);
    info_.total_param_bytes = add(info_.total_param_bytes, l.param_bytes);
    info_.total_activation_bytes = add(info_.total_activation_bytes, l.activation_bytes);
    info_.forward_flops = add(info_.forward_flops, l.forward_flops);
    if (l.stage < 0 || l.stage >= stages) continue;
    auto s = static_cast<std::size_t>(l.stage);
    info_.stage_params[s] = add(info_.stage_params[s], l.params);
    info_.stage_memory_bytes[s] = add(info_.stage_memory_bytes[s], add(mul(l.param_bytes, copies), l.activation_bytes));
  }
}

// 235146 -> "235,146": parameter counts are read at a glance.
std::string group_digits(std::int64_t value) {
  const std::string digits = std::to_string(value);
  std::string grouped;
  const std::size_t first = (value < 0) ? 1 : 0;  // keep the sign out of the groups
  for (std::size_t i = 0; i < digits.size(); ++i) {
    const std::size_t left = digits.size() - i;
    if (i > first && left % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

std::string format_flops(std::int64_t flops) {
  static const char* const kUnits[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP"};
  double value = static_cast<double>(flops);
  int unit = 0;
  while (value >= 1000.0 && unit < 4) {
    value /= 1000.0;
    ++unit;
  }
  char text[48];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", value, kUnits[unit]);
  return text;
}

std::string pad(const std::string& text, std::size_t width, bool right_align) {
  if (text.size() >= width) return text;
  std::string fill(width - text.size(), ' ');
  return right_align ? fill + text : text + fill;
}

}  // namespace

ModelInfo infer_model(const Plan& plan, std::vector<PlanError>* errors) { return Inference(plan, errors).run(); }

std::string format_shape(const Shape& shape) {
  if (shape.empty()) return "?";
  std::string text;
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? "x" : "") + std::to_string(shape[i]);
  return text;
}

std::string format_bytes(std::int64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string format_model_table(const ModelInfo& info) {
  const std::vector<std::string> header{"#", "name", "type", "stage", "output", "params", "memory"};
  const std::vector<bool> right{true, false, false, true, false, true, true};
  std::vector<std::vector<std::string>> rows{header};
  for (const LayerInfo& l : info.layers) {
    rows.push_back({std::to_string(l.id.value), std::string(2 * static_cast<std::size_t>(l.depth), ' ') + l.name,
                    std::string(layer_kind_name(l.kind)), std::to_string(l.stage), format_shape(l.output),
                    group_digits(l.params), format_bytes(add(l.param_bytes, l.activation_bytes))});
  }
  std::vector<std::size_t> widths(header.size(), 0);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string table;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::string line;
    for (std::size_t c = 0; c < rows[r].size(); ++c) line += (c ? "  " : "") + pad(rows[r][c], widths[c], right[c]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    table += line + "\n";
    if (r == 0) table += std::string(line.size(), '-') + "\n";
  }
  table += "memory = weights + activations for the global batch (fp32)\n";
  table += "total: " + group_digits(info.total_params) + " params (" + format_bytes(info.total_param_bytes) +
           "), activations " + format_bytes(info.total_activation_bytes) + ", forward " +
           format_flops(info.forward_flops) + " per sample\n";
  for (std::size_t s = 0; s < info.stage_memory_bytes.size(); ++s) {
    table += "stage " + std::to_string(s) + ": " + group_digits(info.stage_params[s]) + " params, " +
             format_bytes(info.stage_memory_bytes[s]) + " with gradients and optimizer state\n";
  }
  return table;
}

}  // namespace loom
