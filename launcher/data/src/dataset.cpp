// Entry points that turn the plan's data section into in-memory train/test sets:
// Fashion-MNIST from a directory of IDX files (gzip or raw) or a synthetic set, with the
// plan's sample limits applied.
#include <filesystem>

#include "loom/data/dataset.h"

namespace loom::data {
namespace {

constexpr int kFashionClasses = 10;

// Prefers the .gz file (as Debian ships it) and falls back to an uncompressed copy.
// When neither exists the .gz path is returned, so the reader's NotFound error names it.
std::string find_idx(const std::string& directory, const std::string& stem) {
  const std::filesystem::path base = std::filesystem::path(directory) / stem;
  const std::string gz = base.string() + ".gz";
  if (std::filesystem::exists(gz)) return gz;
  if (std::filesystem::exists(base)) return base.string();
  return gz;
}

Expected<Dataset> load_split(const std::string& directory, const std::string& prefix) {
  auto set = read_idx_pair(find_idx(directory, prefix + "-images-idx3-ubyte"),
                           find_idx(directory, prefix + "-labels-idx1-ubyte"));
  if (!set) return set.error();
  if (set->classes > kFashionClasses) {
    return make_error(ErrorCode::Corrupt,
                      "Fashion-MNIST labels in '" + directory + "' (" + prefix + ") go up to " +
                          std::to_string(set->classes - 1) + ", expected 0..9",
                      "the label file is damaged or is not Fashion-MNIST");
  }
  set->classes = kFashionClasses;  // a small subset may lack the highest class
  return set;
}

void apply_limit(Dataset& set, std::int64_t limit) {
  if (limit <= 0 || limit >= set.count()) return;
  set.labels.resize(static_cast<std::size_t>(limit));
  set.features.resize(static_cast<std::size_t>(limit * set.sample_size));
  set.labels.shrink_to_fit();
  set.features.shrink_to_fit();
}

}  // namespace

Expected<TrainTest> load_fashion_mnist(const std::string& directory) {
  auto train = load_split(directory, "train");
  if (!train) return train.error();
  auto test = load_split(directory, "t10k");
  if (!test) return test.error();
  if (test->sample_shape != train->sample_shape) {
    auto dims = [](const Shape& s) { return std::to_string(s[1]) + "x" + std::to_string(s[2]); };
    return make_error(ErrorCode::Corrupt,
                      "Fashion-MNIST image dims do not match in '" + directory + "': train images are " +
                          dims(train->sample_shape) + ", test images are " + dims(test->sample_shape),
                      "use train and t10k files from the same dataset");
  }
  return TrainTest{std::move(*train), std::move(*test)};
}

Expected<TrainTest> load_dataset(const DataSpec& spec) {
  TrainTest sets;
  if (spec.source == DataSource::Synthetic) {
    if (spec.classes < 1 || spec.features < 1 || spec.train_samples < 0 || spec.test_samples < 0) {
      return make_error(ErrorCode::InvalidArgument,
                        "synthetic data needs classes >= 1, features >= 1 and non-negative sample counts",
                        "fix the plan's data section");
    }
    sets = make_synthetic(spec);
  } else {
    auto loaded = load_fashion_mnist(spec.path);
    if (!loaded) return loaded.error();
    sets = std::move(*loaded);
  }
  apply_limit(sets.train, spec.train_limit);
  apply_limit(sets.test, spec.test_limit);
  return sets;
}

}  // namespace loom::data
