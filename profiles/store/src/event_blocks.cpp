// A finished run's events packed per rank into blocks of trace::Event records (schema
// v6), which load_events copies instead of decoding a row per event; the rows stay the
// record, and readers fall back to them for a block that is missing, short or of
// another format.
#include "loom/store/run_store.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <span>

#include "store_rows.h"

namespace loom::store {

namespace {
// Blocks of format 1 hold trace::Event exactly as this build lays it out: 48 bytes, no
// padding, little-endian. Changing Event means a new format number; readers fall back to
// the rows for any other.
constexpr std::int64_t kEventBlockFormat = 1;
static_assert(sizeof(trace::Event) == 48 && std::endian::native == std::endian::little,
              "event block format 1 is the 48-byte little-endian Event");
constexpr std::size_t kEventsPerBlock = std::size_t(1) << 16;  // 3 MiB blobs
}  // namespace

Status RunStore::drop_event_blocks(std::int64_t run_id) {
  auto q = db_.prepare("DELETE FROM event_blocks WHERE run_id = ?");
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  return run_once(*q);
}

Status RunStore::pack_events(std::int64_t run_id) {
  auto tx = Transaction::begin(db_);
  if (!tx.ok()) return tx.error();
  LOOM_TRY(write_event_blocks(run_id));
  return tx->commit();
}

Status RunStore::write_event_blocks(std::int64_t run_id) {
  LOOM_TRY(drop_event_blocks(run_id));
  auto ranks = event_ranks(run_id);
  if (!ranks.ok()) return ranks.error();
  auto insert = db_.prepare("INSERT INTO event_blocks (run_id, rank, block, format, events, data) VALUES (?,?,?,?,?,?)");
  if (!insert.ok()) return insert.error();
  for (int rank : *ranks) {
    auto events = load_event_rows(run_id, rank);
    if (!events.ok()) return events.error();
    for (std::size_t first = 0, block = 0; first < events->size(); first += kEventsPerBlock, ++block) {
      const std::size_t n = std::min(kEventsPerBlock, events->size() - first);
      insert->bind(1, run_id).bind(2, rank).bind(3, static_cast<std::int64_t>(block)).bind(4, kEventBlockFormat);
      insert->bind(5, static_cast<std::int64_t>(n));
      insert->bind_blob_static(6, std::as_bytes(std::span(events->data() + first, n)));
      LOOM_TRY(run_once(*insert));
    }
  }
  return {};
}

Expected<std::optional<std::vector<trace::Event>>> RunStore::load_event_blocks(std::int64_t run_id, int rank) {
  const std::string where = std::string(" WHERE run_id = ?1") + (rank < 0 ? "" : " AND rank = ?2");
  auto total = db_.prepare("SELECT COUNT(*), COALESCE(SUM(events), 0), COALESCE(MIN(format = " +
                           std::to_string(kEventBlockFormat) + "), 0), COALESCE(SUM(length(data)), 0) FROM event_blocks" +
                           where);
  if (!total.ok()) return total.error();
  total->bind(1, run_id);
  if (rank >= 0) total->bind(2, rank);
  if (auto row = total->step(); !row.ok()) return row.error();
  const std::int64_t declared = total->column_int64(1), bytes = total->column_int64(3);
  // The count is sized from the bytes really there, so a damaged count cannot ask for more.
  const bool usable = total->column_int64(0) > 0 && total->column_int64(2) == 1 && declared >= 0 &&
                      bytes == declared * std::int64_t(sizeof(trace::Event));
  const auto count = static_cast<std::size_t>(declared);
  total->reset();
  if (!usable) return std::optional<std::vector<trace::Event>>();
  auto q = db_.prepare("SELECT events, data FROM event_blocks" + where + " ORDER BY rank, block");
  if (!q.ok()) return q.error();
  q->bind(1, run_id);
  if (rank >= 0) q->bind(2, rank);
  std::vector<trace::Event> events(count);
  std::size_t filled = 0;
  bool intact = true;
  LOOM_TRY(each_row(*q, [&](const Statement& row) {
    const std::span<const std::byte> data = row.column_blob(1);
    const auto n = static_cast<std::size_t>(row.column_int64(0));
    intact = intact && data.size() == n * sizeof(trace::Event) && filled + n <= count;
    if (intact) std::memcpy(static_cast<void*>(events.data() + filled), data.data(), data.size());
    filled += n;
  }));
  if (!intact || filled != count) return std::optional<std::vector<trace::Event>>();  // damaged: read the rows
  return std::optional(std::move(events));
}

Expected<std::optional<RunStore::PackedRun>> RunStore::load_packed_run(std::int64_t run_id) {
  auto ranks = event_ranks(run_id);
  if (!ranks.ok()) return ranks.error();
  PackedRun packed;
  for (int rank : *ranks) {
    auto events = load_event_blocks(run_id, rank);
    if (!events.ok()) return events.error();
    if (!*events) return std::optional<PackedRun>();  // a rank unpacked or damaged: use the rows
    packed.ranks.emplace_back(rank, std::move(**events));
  }
  if (packed.ranks.empty()) return std::optional<PackedRun>();
  return std::optional(std::move(packed));
}

}  // namespace loom::store
