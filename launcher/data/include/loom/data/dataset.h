// Training data for a rank: Fashion-MNIST from IDX files (gzip or raw) or seeded synthetic
// sets, held in memory as float features plus int32 labels, with a deterministic
// per-epoch shuffle and per-rank sharding of each global batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/plan.h"
#include "loom/core/status.h"

namespace loom::data {

struct Dataset {
  Shape sample_shape;             // per-sample shape, e.g. {1, 28, 28}
  std::int64_t sample_size = 0;   // product of sample_shape
  int classes = 0;
  std::vector<float> features;    // [count, sample_size]; images scaled to [0, 1]
  std::vector<std::int32_t> labels;
  std::int64_t count() const { return static_cast<std::int64_t>(labels.size()); }
  const float* sample(std::int64_t i) const { return features.data() + i * sample_size; }
};

struct TrainTest {
  Dataset train;
  Dataset test;
};

// IDX reader. Errors name the file and what is wrong with it: missing file, wrong magic
// number, truncated data, image/label count mismatch.
Expected<Dataset> read_idx_pair(const std::string& images_path, const std::string& labels_path);

// Looks for train-images-idx3-ubyte(.gz) etc. in `directory`.
Expected<TrainTest> load_fashion_mnist(const std::string& directory);

// Seeded Gaussian blobs or interleaved spirals (one arm per class), as the plan's data section describes.
TrainTest make_synthetic(const DataSpec& spec);

// Loads what the plan's data section asks for, applying train_limit/test_limit.
Expected<TrainTest> load_dataset(const DataSpec& spec);

// The order in which an epoch visits the training set: identity when shuffle is off,
// else a Fisher-Yates permutation from a generator keyed by (seed, epoch). Every rank
// computes the same order, so sharding needs no communication.
std::vector<std::int64_t> epoch_order(std::int64_t count, std::uint64_t seed, int epoch, bool shuffle);

// The samples rank `shard` of `shards` takes from global batch `batch_index`: the global
// batch is the contiguous slice [batch_index*global_batch, +global_batch) of `order`, and
// the shard takes its own contiguous part of that slice, so the union over shards is
// exactly what a single process would see. Requires global_batch % shards == 0.
struct BatchSlice {
  std::int64_t begin = 0;  // index into `order`
  std::int64_t size = 0;
};
BatchSlice shard_of_batch(std::int64_t batch_index, std::int64_t global_batch, int shard, int shards);

// Batches per epoch with the last incomplete batch dropped (keeps every step's global
// batch the same size, which parallel equivalence relies on).
std::int64_t batches_per_epoch(std::int64_t count, std::int64_t global_batch);

// Copies the samples order[begin .. begin+size) into x[size, sample_size] and y[size].
void gather_batch(const Dataset& set, const std::vector<std::int64_t>& order, BatchSlice slice, float* x, std::int32_t* y);

}  // namespace loom::data
