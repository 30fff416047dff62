// Seeded synthetic classification sets (Gaussian blobs, interleaved spirals) for quick
// runs and tests that need no files. Deterministic per seed on every platform: the
// generator is Loom's own (random.h), and train and test come from independent streams.
#include <algorithm>
#include <cmath>

#include "loom/data/dataset.h"
#include "random.h"

namespace loom::data {
namespace {

// Stream ids under the data seed: centres, training samples, test samples.
constexpr std::uint64_t kCentreStream = 101;
constexpr std::uint64_t kTrainStream = 102;
constexpr std::uint64_t kTestStream = 103;

// Blob centres lie in [-kCentreRange, kCentreRange]^features; with the default noise 0.5
// the classes are separable but overlap a little, which makes training non-trivial.
constexpr double kCentreRange = 3.0;

Dataset empty_set(Shape shape, int classes, std::int64_t count) {
  Dataset set;
  set.sample_shape = std::move(shape);
  set.sample_size = 1;
  for (auto d : set.sample_shape) set.sample_size *= d;
  set.classes = classes;
  set.features.reserve(static_cast<std::size_t>(count * set.sample_size));
  set.labels.reserve(static_cast<std::size_t>(count));
  return set;
}

// Labels cycle through the classes so every class has (almost) the same share.
Dataset blobs(const std::vector<double>& centres, int classes, int features, std::int64_t count,
              double noise, detail::Rng& rng) {
  Dataset set = empty_set({features}, classes, count);
  for (std::int64_t i = 0; i < count; ++i) {
    const int label = static_cast<int>(i % classes);
    for (int f = 0; f < features; ++f) {
      const double centre = centres[static_cast<std::size_t>(label * features + f)];
      set.features.push_back(static_cast<float>(centre + noise * rng.normal()));
    }
    set.labels.push_back(label);
  }
  return set;
}

// Arm k starts at the origin at angle 2*pi*k/classes and winds 1.5 turns out to radius 1.
// Noise is a standard deviation in units of one tenth of that radius, so noise 0.5 keeps
// the arms distinct while blurring their edges.
Dataset spirals(int classes, std::int64_t count, double noise, detail::Rng& rng) {
  constexpr double kTwoPi = 6.283185307179586476925;
  constexpr double kTurns = 1.5;
  Dataset set = empty_set({2}, classes, count);
  for (std::int64_t i = 0; i < count; ++i) {
    const int label = static_cast<int>(i % classes);
    const double t = rng.uniform();
    const double angle = kTwoPi * (static_cast<double>(label) / classes + kTurns * t);
    set.features.push_back(static_cast<float>(t * std::cos(angle) + 0.1 * noise * rng.normal()));
    set.features.push_back(static_cast<float>(t * std::sin(angle) + 0.1 * noise * rng.normal()));
    set.labels.push_back(label);
  }
  return set;
}

}  // namespace

TrainTest make_synthetic(const DataSpec& spec) {
  const int classes = std::max(spec.classes, 1);
  const std::int64_t train_count = std::max<std::int64_t>(spec.train_samples, 0);
  const std::int64_t test_count = std::max<std::int64_t>(spec.test_samples, 0);
  detail::Rng train_rng(spec.seed, kTrainStream);
  detail::Rng test_rng(spec.seed, kTestStream);
  if (spec.synthetic == SyntheticKind::Spirals) {
    return {spirals(classes, train_count, spec.noise, train_rng),
            spirals(classes, test_count, spec.noise, test_rng)};
  }
  const int features = std::max(spec.features, 1);
  detail::Rng centre_rng(spec.seed, kCentreStream);
  std::vector<double> centres(static_cast<std::size_t>(classes * features));
  for (auto& c : centres) c = kCentreRange * (2.0 * centre_rng.uniform() - 1.0);
  return {blobs(centres, classes, features, train_count, spec.noise, train_rng),
          blobs(centres, classes, features, test_count, spec.noise, test_rng)};
}

}  // namespace loom::data
