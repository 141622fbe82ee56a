#include "index/entry_cost.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/strings/string_view.h"

namespace chunkd::index {
namespace {

// Bytes per entry in tenths of a byte, so that IndexBytes rounds exactly.
struct CostRow {
  CostedIndex index;
  uint64_t measured_at;
  uint64_t tenths;
  uint64_t tenths_hints;
};
constexpr CostRow kEntryCosts[] = {
    // Resident bytes, memory_index_footprint (docs/design.md, "The memory
    // backend"); the tables are 72-90 % full, so up to 61 and 144.
    {CostedIndex::kMemory, 1'000'000, 530, 1260},
    {CostedIndex::kMemory, 10'000'000, 490, 1170},
    // On disk after a full compaction, rocksdb_index_bench
    // (docs/benchmarks.md, "The RocksDB index").
    {CostedIndex::kRocksDb, 10'000'000, 372, 394},
    // Redis used_memory, the bucket layout with the default 2^18 buckets
    // (3.8 and 38 entries a bucket), index_bench (docs/benchmarks.md, "The
    // Redis index"); at the bucket_bits chunkctl suggests, buckets hold
    // 32-64 entries, as at 10M.
    {CostedIndex::kRedis, 1'000'000, 658, 826},
    {CostedIndex::kRedis, 10'000'000, 437, 607},
};

const CostRow* RowFor(CostedIndex index, uint64_t entries) {
  const CostRow* below = nullptr;
  const CostRow* fewest = nullptr;
  for (const CostRow& row : kEntryCosts) {
    if (row.index != index) continue;
    if (row.measured_at <= entries &&
        (below == nullptr || row.measured_at > below->measured_at)) {
      below = &row;
    }
    if (fewest == nullptr || row.measured_at < fewest->measured_at) {
      fewest = &row;
    }
  }
  return below != nullptr ? below : fewest;
}

}  // namespace

const std::vector<CostedIndex>& AllCostedIndexes() {
  static const auto* const kAll = new std::vector<CostedIndex>{
      CostedIndex::kMemory, CostedIndex::kRocksDb, CostedIndex::kRedis};
  return *kAll;
}

absl::string_view CostedIndexName(CostedIndex index) {
  switch (index) {
    case CostedIndex::kMemory:
      return "memory";
    case CostedIndex::kRocksDb:
      return "rocksdb";
    case CostedIndex::kRedis:
      return "redis";
  }
  return "";
}

absl::string_view CostedIndexMedium(CostedIndex index) {
  return index == CostedIndex::kRocksDb ? "disk" : "memory";
}

EntryCost EntryCostFor(CostedIndex index, uint64_t entries) {
  const CostRow* row = RowFor(index, entries);
  if (row == nullptr) return EntryCost{};
  return EntryCost{row->measured_at, static_cast<double>(row->tenths) / 10,
                   static_cast<double>(row->tenths_hints) / 10};
}

uint64_t IndexBytes(CostedIndex index, uint64_t entries) {
  const CostRow* row = RowFor(index, entries);
  if (row == nullptr) return 0;
  const absl::uint128 tenths = absl::uint128(entries) * row->tenths;
  return absl::Uint128Low64((tenths + 9) / 10);
}

}  // namespace chunkd::index
