// What one fingerprint index entry costs in each backend, as measured by the
// benchmarks (SHA-256 fingerprints, one namespace): the figures behind
// `chunkctl size` and the Estimate RPC's index costs. docs/operations.md
// ("Capacity") gives them with their sources and what they leave out.
//
// Thread safety: pure functions over constant tables.
#ifndef CHUNKD_INDEX_ENTRY_COST_H_
#define CHUNKD_INDEX_ENTRY_COST_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"

namespace chunkd::index {

// The backends with a measured cost; Redis Cluster takes Redis's figures.
enum class CostedIndex { kMemory, kRocksDb, kRedis };

// memory, rocksdb, redis: the order in which results list them.
const std::vector<CostedIndex>& AllCostedIndexes();

// "memory", "rocksdb", "redis".
absl::string_view CostedIndexName(CostedIndex index);

// Where the bytes are: "memory" (memory, redis) or "disk" (rocksdb).
absl::string_view CostedIndexMedium(CostedIndex index);

// One measured figure: bytes per entry of an index at a number of entries.
struct EntryCost {
  uint64_t measured_at = 0;  // entries in the measurement
  double bytes = 0;          // without next-size hints
  double bytes_hints = 0;    // with next-size hints and their runs
};

// The figure for an index of `entries` entries: the one measured at the most
// entries not above `entries`, else the one measured at the fewest.
EntryCost EntryCostFor(CostedIndex index, uint64_t entries);

// Bytes an index of `entries` entries without hints takes:
// entries * EntryCostFor(index, entries).bytes, rounded up (computed exactly:
// the figures are tenths of a byte).
uint64_t IndexBytes(CostedIndex index, uint64_t entries);

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_ENTRY_COST_H_
