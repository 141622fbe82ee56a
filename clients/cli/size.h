// `chunkctl size`: what an index of a given amount of unique data costs.
//
// The data over the average chunk size is the number of index entries (every
// unique chunk is one entry; duplicate data adds none). Each index's bytes
// per entry, measured by the benchmarks at 1M and 10M entries, turn that
// into memory (the memory index, Redis) or disk (RocksDB), and for Redis into
// servers or Cluster masters and the bucket count of its compact layout
// (`?bucket_bits=`). docs/operations.md ("Capacity") explains the figures and
// how to read them.
//
// Thread safety: pure functions.
#ifndef CHUNKD_CLIENTS_CLI_SIZE_H_
#define CHUNKD_CLIENTS_CLI_SIZE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/cli/args.h"
#include "clients/cli/record_writer.h"
#include "index/entry_cost.h"
#include "index/redis_layout.h"

namespace chunkd::cli {

// The indexes `chunkctl size` estimates, in the order it prints them.
enum class SizedIndex { kMemory, kRocksDb, kRedis, kRedisCluster };

// The index's name as --index spells it ("redis-cluster").
absl::string_view SizedIndexName(SizedIndex index);

// The largest size ParseByteSize() accepts: 10^19 bytes (10,000 PB).
inline constexpr uint64_t kMaxSizeBytes = 10'000'000'000'000'000'000u;
// --avg when not given: FastCDC's default average chunk, 16 KiB.
inline constexpr uint64_t kDefaultSizeAvg = 16 << 10;
// --redis-master-memory when not given: 64 GiB.
inline constexpr uint64_t kDefaultRedisMasterMemory = uint64_t{64} << 30;
// The share of a Redis server's RAM the estimate fills with data; the rest
// is for fragmentation, replication buffers and the fork that persists it.
inline constexpr double kRedisDataShare = 0.75;
// Buckets of the Redis layout should average at most this many entries.
inline constexpr uint64_t kRedisBucketEntries = 64;
// The fewest bucket bits the estimate suggests: the Redis URL's default;
// the most it takes (?bucket_bits=8..32).
inline constexpr int kMinRedisBucketBits = index::kDefaultBucketBits;
inline constexpr int kMaxRedisBucketBits = index::kMaxBucketBits;
// The memory index above this many bytes is past one machine's memory.
inline constexpr uint64_t kOneMachineMemory = uint64_t{1} << 40;  // 1 TiB

// A byte count: a number (decimals allowed) and a unit, B, KB, MB, GB, TB,
// PB (powers of 1000) or KiB, MiB, GiB, TiB, PiB (powers of 1024), in any
// case, with or without a space; a bare number is bytes. "1.5PB" is
// 1,500,000,000,000,000. Rounded to the nearest byte. INVALID_ARGUMENT
// ("expected a size such as ...") for anything else, for 0 bytes and for
// more than kMaxSizeBytes.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// What to estimate, from the command line.
struct SizeConfig {
  // --data SIZE: unique data. Required.
  uint64_t data_bytes = 0;
  // --avg SIZE: average chunk size. Default kDefaultSizeAvg.
  uint64_t avg_bytes = kDefaultSizeAvg;
  // --index NAME|all. Default all, in SizedIndex's order.
  std::vector<SizedIndex> indexes;
  // --hints: entries carry next-size hints and their runs (RapidCDC, what a
  // Dedup with hints records for nearly every chunk). Default off.
  bool hints = false;
  // --redis-master-memory SIZE: RAM of one Redis server or Cluster master.
  // Default kDefaultRedisMasterMemory.
  uint64_t redis_master_memory = kDefaultRedisMasterMemory;
  // --format / --json. Default text.
  OutputFormat format = OutputFormat::kText;
};

// The flags of `chunkctl size`.
std::vector<FlagSpec> SizeFlagSpecs();

// Reads the flags of SizeFlagSpecs() from `args`. INVALID_ARGUMENT names the
// flag and the forms it accepts.
absl::StatusOr<SizeConfig> SizeConfigFromArgs(const ParsedArgs& args);

// Index entries for `data_bytes` of unique data in chunks of `avg_bytes` on
// average: the quotient rounded up. REQUIRES: avg_bytes > 0.
uint64_t SizeEntries(uint64_t data_bytes, uint64_t avg_bytes);

// One measured figure: bytes per entry of an index at a number of entries
// (index/entry_cost.h holds the figures).
using EntryCost = index::EntryCost;

// The figure the estimate of `entries` entries uses: the one measured at the
// most entries not above `entries`, else the one measured at the fewest.
EntryCost EntryCostFor(SizedIndex index, uint64_t entries);

// The Redis layout's bucket bits for a namespace of `entries` entries:
// max(16, ceil(log2(entries / 256))), so buckets average at most 256; at
// most kMaxRedisBucketBits (then buckets average more).
int RedisBucketBits(uint64_t entries);

// Redis servers of `server_memory` bytes of RAM that hold `bytes` of data,
// each filled to kRedisDataShare of its RAM: at least 1.
uint64_t RedisServersFor(double bytes, uint64_t server_memory);

// The estimate, as text lines or (OutputFormat::kJson) one JSON object, with
// its final newline.
std::string FormatSizeEstimate(const SizeConfig& config);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_SIZE_H_
