// MemoryPlan: what the memory flags are set to, and the bound on resident
// memory they give (docs/design.md, "Memory bounds"; docs/operations.md,
// "Memory and the chart's resources").
//
// Resident memory stays under the sum of what each part can hold at most,
// every term measured (MemoryCosts says how):
//
//   base + arenas x kTrimThreshold + request buffers kept for reuse
//     + --memory_budget (request bytes)
//     + --stream_memory_budget (what streams hold beyond them)
//     + --max_streams x kGrpcBytesPerStream
//     + memory index entries x kIndexEntryBytes
//     + (rocksdb index) --index_cache_mib x kIndexCacheFactor
//       + kIndexCacheBaseBytes
//     + --hint_cache_mib x kHintCacheFactor
//
// A stream's memory beyond its request bytes depends on the chunking
// parameters its client chose (StreamMemoryBytes): the service reserves it
// from --stream_memory_budget once they are known, and a stream that does
// not fit waits its turn (service/memory_budget.h, FairBudget). So the
// bound holds for every mix of parameters, while --max_streams is sized
// for typical streams: Dedup with fastcdc's default sizes and hints.
//
// Under a memory limit (service/memory_limit.h), the flags left at their
// defaults are sized so that this sum stays within kLimitShare of it: the
// hint cache takes 1/16 of what is left after the fixed terms (at most its
// default 64 MiB), a memory index or a rocksdb index's cache 1/4, and the
// streams the rest: as many as
// fit with two messages of --memory_budget and a typical stream's memory
// each (at most the default 128), the stream memory at least the largest
// stream's; malloc gets at most kMaxArenasUnderLimit arenas, as each may
// keep kTrimThreshold of free memory. Flags given explicitly are kept as
// they are, with a warning when the sum then passes the share of the limit.
// Without a limit every default stays what it always was, and the stream
// memory holds --max_streams streams at their largest: none ever waits.
//
// Thread safety: pure functions.
#ifndef CHUNKD_SERVICE_MEMORY_PLAN_H_
#define CHUNKD_SERVICE_MEMORY_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chunkd/chunker.h"

namespace chunkd::service {

// The part of the memory limit the bound is sized to; the rest is the
// margin for what the bound leaves out (the kernel's socket buffers, which
// cgroup v2 charges to the container, and page cache).
inline constexpr double kLimitShare = 0.85;
// Without a limit: the flags' defaults.
inline constexpr uint32_t kDefaultMaxStreams = 128;
inline constexpr uint64_t kDefaultMemoryBudget = uint64_t{1} << 30;
inline constexpr uint64_t kDefaultHintCacheMib = 64;
// Without a limit, the rocksdb index's block cache (memtables included).
inline constexpr uint64_t kDefaultIndexCacheMib = 256;
// Under a limit, never less than this.
inline constexpr uint64_t kMinIndexCacheMib = 16;
// Without a limit, the default --index_max_entries: half of --memory_budget
// at this many bytes an entry (room beyond kIndexEntryBytes).
inline constexpr uint64_t kDefaultIndexBudgetBytesPerEntry = 400;

// Measured costs (docs/design.md, "Memory bounds", has the measurements).
// Resident memory of an idle server after start-up, with room for gRPC's
// threads and the metrics server under load.
inline constexpr uint64_t kBaseBytes = uint64_t{48} << 20;
// A memory index entry at its largest: SHA-256, next-size hints with their
// run, the write-token positions max_entries allows (index/memory_index.h:
// 144 + 36), and a growing shard's second table (1/64 of the index, 2.25
// times over).
inline constexpr uint64_t kIndexEntryBytes = 190;
// Resident bytes of a rocksdb index per byte of its cache (RocksDB lets
// the cache pass its capacity by blocks in use, and memtables are charged
// to it as they grow), and what it holds beyond the cache (its threads,
// table readers' metadata, compaction buffers).
inline constexpr double kIndexCacheFactor = 1.25;
inline constexpr uint64_t kIndexCacheBaseBytes = uint64_t{32} << 20;
// Resident bytes of a full hint cache per byte of --hint_cache_mib: its
// tables are 7/16 to 7/8 full and a growing shard briefly holds two.
inline constexpr double kHintCacheFactor = 1.3;
// Under a memory limit, malloc's arenas (one per core by chunkd's set-up,
// service/allocator.h) are at most this many.
inline constexpr size_t kMaxArenasUnderLimit = 8;
// gRPC's receive buffers per stream beyond the budget: the slices of the
// message being read while its copy is made, and what HTTP/2 flow control
// lets in while the stream does not read. The one per-stream cost that does
// not depend on the stream's parameters.
inline constexpr uint64_t kGrpcBytesPerStream = uint64_t{2} << 20;

// The reactor's limits that set how many responses a stream holds
// (service/stream_reactor.h): unsent responses at which reading pauses,
// records per response, and input bytes one task processes.
inline constexpr size_t kMaxQueuedResponses = 16;
inline constexpr size_t kMaxRecordsPerResponse = 1024;
inline constexpr size_t kMaxBytesPerTask = size_t{4} << 20;
// A record waiting in a serialized response: a DedupRecord with a SHA-256
// fingerprint takes at most 56 bytes on the wire.
inline constexpr uint64_t kQueuedRecordBytes = 64;
// A record while its task makes it: the pipeline's ChunkRecord with its
// fingerprint, the engine's Chunk and the response message being built.
inline constexpr uint64_t kTaskRecordBytes = 128;

// An Estimate stream's memory (docs/design.md, "The Estimate stream"): an
// entry of a set's table of distinct chunks at its largest (a hash table
// slot of fingerprint, length and copies and its control byte, the table
// 7/16 full just after it grew, while the old table, 7/8 full, still
// exists), per fingerprint; and a distinct chunk length in a set's size
// counts at its largest likewise.
inline constexpr uint64_t kEstimateEntryBytesXxh128 = 114;
inline constexpr uint64_t kEstimateEntryBytesSha256 = 168;
inline constexpr uint64_t kEstimateSizeCountBytes = 59;

// What the plan starts from.
struct MemoryInputs {
  // The memory limit in bytes; nullopt: none.
  std::optional<uint64_t> limit;
  // The flags as given; nullopt: left at their default. index_max_entries
  // -1 is the default too.
  std::optional<uint32_t> max_streams;
  std::optional<uint64_t> memory_budget;
  std::optional<int64_t> index_max_entries;
  std::optional<uint64_t> hint_cache_mib;
  std::optional<uint64_t> stream_memory;
  // --estimate_max_entries; -1 is the default too.
  std::optional<int64_t> estimate_max_entries;
  // --max_message_bytes and --max_inflight_bytes (validated before).
  uint64_t max_message_bytes = uint64_t{4} << 20;
  uint64_t max_inflight_bytes = uint64_t{16} << 20;
  // Worker threads (they set every stream's chunking window), malloc's
  // arenas (MallocSetup::arena_max; 0 when GLIBC_TUNABLES chose: then
  // glibc's 8 per core) and the cores.
  size_t threads = 1;
  size_t arenas = 1;
  size_t cores = 1;
  // --index memory: the index's entries live in chunkd.
  bool memory_index = true;
  // --index rocksdb://: a block cache lives in chunkd; --index_cache_mib
  // as given.
  bool rocksdb_index = false;
  std::optional<uint64_t> index_cache_mib;
};

// Each term of the bound, in bytes.
struct MemoryCosts {
  uint64_t base = 0;
  uint64_t allocator = 0;    // free memory malloc may keep per arena
  uint64_t kept_buffers = 0;  // request buffers kept for reuse
  uint64_t budget = 0;
  uint64_t stream_memory = 0;  // --stream_memory_budget
  uint64_t streams = 0;        // max_streams x kGrpcBytesPerStream
  // What one stream reserves of the stream memory: a typical one (Dedup,
  // fastcdc's default sizes, hints) and the largest any parameters ask for.
  uint64_t typical_stream = 0;
  uint64_t largest_stream = 0;
  uint64_t index = 0;       // 0 for a Redis index; rocksdb: its cache
  uint64_t hint_cache = 0;
  // True when the memory index has no entry limit: nothing bounds it.
  bool unbounded_index = false;
  uint64_t Total() const;
};

struct MemoryPlan {
  uint32_t max_streams = kDefaultMaxStreams;
  uint64_t memory_budget = kDefaultMemoryBudget;
  uint64_t index_max_entries = 0;  // 0: no limit
  uint64_t hint_cache_mib = kDefaultHintCacheMib;
  uint64_t index_cache_mib = 0;  // 0: no rocksdb index
  uint64_t stream_memory = 0;
  // The most distinct chunks an Estimate stream keeps (0: no limit); by
  // default DefaultEstimateMaxEntries.
  uint64_t estimate_max_entries = 0;
  // The arenas malloc may have: MemoryInputs::arenas, or fewer under a
  // limit (0 when GLIBC_TUNABLES chose).
  size_t arenas = 0;
  MemoryCosts costs;
  // One line saying what was chosen and why, for the start-up log.
  std::string summary;
  // What may let the kernel kill chunkd: explicit flags past the limit.
  std::vector<std::string> warnings;
};

// The chunking window of every stream on `threads` worker threads
// (chunkd/chunker.h, EngineOptions::window_size: 1 MiB per thread, 2 to 8).
uint64_t WindowBytes(size_t threads);

// What one stream's memory beyond its request bytes depends on.
struct StreamShape {
  // Bytes from a chunk's start after which its cut is final: max_size;
  // repmaxcdc 2 x min_size + horizon_size; fixed avg_size
  // (chunking/cutter.h, Cutter::final_size).
  uint64_t final_size = 0;
  // The longest chunk (fixed: avg_size).
  uint64_t max_size = 0;
  // The shortest chunk but a stream's last: min_size (fastcdc: rounded down
  // to even); fixed avg_size.
  uint64_t smallest_chunk = 1;
  // Dedup following RapidCDC hints: the hint follower's copies.
  bool hints = false;
};

// The shape of a stream with `options`. REQUIRES: ValidateOptions(options).
StreamShape ShapeOf(const chunking::ChunkerOptions& options, bool hints);

// The server's settings every stream's memory depends on.
struct StreamSettings {
  uint64_t window = 2 << 20;  // WindowBytes(worker threads)
  uint64_t max_message_bytes = uint64_t{4} << 20;
  uint64_t max_inflight_bytes = uint64_t{16} << 20;
};

// One stream's memory beyond its request bytes and gRPC's buffers, at its
// worst for its shape: the chunker's buffers, bitmaps and chunk lists, the
// hint follower's copies, and the records of every response a client that
// stops reading lets pile up (docs/design.md, "Memory bounds", has the
// terms and their measurements).
uint64_t StreamMemoryBytes(const StreamShape& shape,
                           const StreamSettings& settings);

// The part of StreamMemoryBytes that a chunker of `shape` holds: its
// buffer, bitmaps and chunk lists.
uint64_t ChunkerMemoryBytes(const StreamShape& shape,
                            const StreamSettings& settings);

// An Estimate stream's memory beyond its request bytes: per set (`sets`) a
// chunker and its size counts (a length per byte of max_size, at most
// estimate::kSizesPerSet: more take entries), and
// `max_entries` distinct chunks of `entry_bytes` (kEstimateEntryBytes*).
// Its responses are a few small messages. max_entries 0 (no limit): the
// chunkers only.
uint64_t EstimateMemoryBytes(const std::vector<StreamShape>& sets,
                             uint64_t entry_bytes, uint64_t max_entries,
                             const StreamSettings& settings);

// The default --estimate_max_entries: entries of SHA-256 fingerprints in
// half of the largest Chunk or Dedup stream's memory, so that an Estimate
// with a few sets reserves no more than such a stream.
uint64_t DefaultEstimateMaxEntries(const StreamSettings& settings);

// StreamMemoryBytes of a Dedup stream with fastcdc's default sizes and
// hints, and the largest any valid parameters give.
uint64_t TypicalStreamMemoryBytes(const StreamSettings& settings);
uint64_t LargestStreamMemoryBytes(const StreamSettings& settings);

// The flags' values and the bound. INVALID_ARGUMENT when the values given
// do not fit together (a budget below --max_streams x --max_message_bytes,
// a negative entry count) or the limit leaves no room for one stream with
// the flags at their defaults, naming the flags and the limit. A stream
// memory given smaller than the largest stream is kept, with a warning:
// streams that ask for more are refused.
absl::StatusOr<MemoryPlan> PlanMemory(const MemoryInputs& inputs);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_MEMORY_PLAN_H_
