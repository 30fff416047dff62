// Epoch order, per-rank shards of each global batch, and batch gathering. Every rank
// computes the same order from (seed, epoch), so data parallelism needs no communication
// to agree on which samples each replica takes.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <numeric>

#include "loom/data/dataset.h"
#include "random.h"

namespace loom::data {

std::vector<std::int64_t> epoch_order(std::int64_t count, std::uint64_t seed, int epoch, bool shuffle) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (!shuffle || order.size() < 2) return order;
  // The epoch is the stream key, so each epoch's permutation is independent of the others.
  detail::Rng rng(seed, static_cast<std::uint64_t>(static_cast<std::int64_t>(epoch)) + 1);
  for (std::size_t i = order.size() - 1; i > 0; --i) {
    const auto j = static_cast<std::size_t>(rng.below(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

BatchSlice shard_of_batch(std::int64_t batch_index, std::int64_t global_batch, int shard, int shards) {
  assert(shards > 0 && shard >= 0 && shard < shards);
  // Spreading a remainder over the first shards keeps the union exact even when the
  // documented precondition (global_batch % shards == 0) is broken.
  const std::int64_t base = global_batch / shards;
  const std::int64_t rem = global_batch % shards;
  BatchSlice slice;
  slice.begin = batch_index * global_batch + shard * base + std::min<std::int64_t>(shard, rem);
  slice.size = base + (shard < rem ? 1 : 0);
  return slice;
}

std::int64_t batches_per_epoch(std::int64_t count, std::int64_t global_batch) {
  if (global_batch <= 0 || count <= 0) return 0;
  return count / global_batch;
}

void gather_batch(const Dataset& set, const std::vector<std::int64_t>& order, BatchSlice slice, float* x, std::int32_t* y) {
  assert(slice.begin >= 0 && slice.begin + slice.size <= static_cast<std::int64_t>(order.size()));
  const auto row_bytes = static_cast<std::size_t>(set.sample_size) * sizeof(float);
  for (std::int64_t i = 0; i < slice.size; ++i) {
    const std::int64_t sample = order[static_cast<std::size_t>(slice.begin + i)];
    std::memcpy(x + i * set.sample_size, set.sample(sample), row_bytes);
    y[i] = set.labels[static_cast<std::size_t>(sample)];
  }
}

}  // namespace loom::data
