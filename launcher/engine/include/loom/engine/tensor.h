// A batch of activations or gradients: a float buffer with a batch size and a per-sample
// shape. Buffers are kept between steps and only grow, so the training step does not
// allocate once the first step has sized everything.
#pragma once

#include <cstdint>
#include <vector>

#include "loom/core/plan.h"

namespace loom::engine {

inline std::int64_t shape_elements(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

struct Tensor {
  std::vector<float> data;
  std::int64_t batch = 0;
  Shape sample;

  void resize(std::int64_t new_batch, const Shape& new_sample) {
    batch = new_batch;
    sample = new_sample;
    const auto needed = static_cast<std::size_t>(new_batch * shape_elements(new_sample));
    if (data.size() < needed) data.resize(needed);
  }
  std::int64_t sample_size() const { return shape_elements(sample); }
  std::int64_t size() const { return batch * sample_size(); }
  float* ptr() { return data.data(); }
  const float* ptr() const { return data.data(); }
};

// A trainable tensor and its gradient (same size). Gradients accumulate until zeroed.
struct Param {
  std::string name;  // "fc1.weight"
  std::int32_t layer = -1;
  std::vector<float> value;
  std::vector<float> grad;
};

}  // namespace loom::engine
