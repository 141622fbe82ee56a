// Estimator: how a data set would deduplicate under several chunking
// parameter sets, from one pass over its bytes (docs/estimate.md).
//
// The bytes arrive in pieces, files ended by EndFile(). Every set is cut from
// the same piece while it is in cache; the FastCDC sets that share a Gear
// table (the same seed) are cut by one group that rolls the hash once and
// tests every set's masks (chunking/fastcdc_group.h). Each chunk is
// fingerprinted (XXH3-128, or SHA-256 for a namespace comparison) and, when
// its fingerprint falls in the sampled 1 / sample_rate of the hash space,
// counted in the set's table of distinct chunks. Sizes, counts and the
// histogram count every chunk. Exact, the distinct chunks, their bytes and
// the ratio come from the table; sampled, from two sketches of every chunk
// (distinct_sketch.h: of its fingerprint, and of the granules that cover
// it) with the rounding to granules measured on the table, and with a 95 %
// confidence interval of the ratio.
//
// Promises: with sample_rate 1 the result's unique chunks and bytes are
// those of the distinct fingerprints of the chunks StreamChunker gives for
// each set, file by file — whatever the kernel set, the threads or the
// split into pieces; memory holds the chunkers' buffers, per set its size
// counts and, sampled, two sketches of 64 KiB, and one table entry per
// distinct kept chunk (and per chunk size beyond kSizesPerSet of a set), at
// most max_entries over all sets.
//
// Thread safety: not thread-safe; one data set, one thread at a time (the
// executor of EngineOptions runs parts of a call on other threads).
#ifndef CHUNKD_ESTIMATE_ESTIMATOR_H_
#define CHUNKD_ESTIMATE_ESTIMATOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "chunkd/chunker.h"

namespace chunkd::estimate {

// Limits of EstimatorOptions, the same as the Estimate RPC's.
inline constexpr size_t kMaxSets = 16;
inline constexpr uint32_t kMaxSampleRate = uint32_t{1} << 20;
inline constexpr size_t kMaxLabelBytes = 256;
// Distinct chunk sizes a set counts before each new one takes an entry of
// EstimatorOptions::max_entries (sizes are bounded by max_size; a set of
// large chunks could otherwise count millions).
inline constexpr uint64_t kSizesPerSet = uint64_t{1} << 16;

// How chunks are told apart.
enum class FingerprintKind { kXxh128, kSha256 };

// One parameter set: a label the caller chose and the chunking (validated
// by Create with chunking::ValidateOptions).
struct SetSpec {
  std::string label;
  chunking::ChunkerOptions options;
};

struct EstimatorOptions {
  std::vector<SetSpec> sets;  // 1..kMaxSets
  // Keep a distinct chunk when its fingerprint's first 8 bytes, read
  // big-endian, are at most UINT64_MAX / sample_rate. 1: exact.
  uint32_t sample_rate = 1;
  FingerprintKind fingerprint = FingerprintKind::kXxh128;
  // Kernel set, executor (threads), strategy: as StreamChunker's.
  chunking::EngineOptions engine;
  // Cut the FastCDC sets that share a seed (at least two) together, rolling
  // their Gear hash once (chunking/fastcdc_group.h; one thread for the
  // group). Default true; false cuts every set with its own StreamChunker.
  // The results are the same either way.
  bool group_fastcdc = true;
  // The most distinct sampled chunks kept over all sets; past it Append and
  // EndFile fail with RESOURCE_EXHAUSTED naming the limit and suggesting a
  // sample rate. 0: no limit.
  uint64_t max_entries = 0;
};

// Chunks with length in [lower_bound, 2 * lower_bound).
struct SizeBucket {
  uint64_t lower_bound = 0;
  uint64_t chunks = 0;
  uint64_t bytes = 0;
};

// What an index of `entries` entries takes in one backend
// (index/entry_cost.h: the benchmarks' bytes per entry).
struct IndexCostEstimate {
  std::string backend;  // "memory", "rocksdb", "redis"
  std::string medium;   // "memory" or "disk"
  uint64_t entries = 0;
  uint64_t bytes = 0;
};

// The estimate of one set; the fields mean what SetEstimate's in
// proto/chunkd/v1/chunkd.proto say.
struct SetResult {
  std::string label;
  chunking::ChunkerOptions options;
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  uint64_t unique_chunks = 0;
  uint64_t unique_bytes = 0;
  double dedup_ratio = 0;
  std::vector<SizeBucket> histogram;  // non-empty buckets, ascending
  double mean_chunk_size = 0;
  uint32_t min_chunk_size = 0;
  uint32_t p50_chunk_size = 0;
  uint32_t p90_chunk_size = 0;
  uint32_t p99_chunk_size = 0;
  uint32_t max_chunk_size = 0;
  bool sampled = false;
  uint64_t sampled_unique_chunks = 0;
  bool has_interval = false;  // sampled, at least two distinct chunks kept
  double ratio_low = 0;
  double ratio_high = 0;
  std::vector<IndexCostEstimate> index_costs;
};

// One distinct chunk kept in a set's table.
struct KeptChunk {
  absl::string_view fingerprint;  // 16 (xxh128) or 32 (sha256) bytes
  uint32_t length = 0;
  uint64_t copies = 0;  // times the data set holds it
};

class Estimator {
 public:
  // INVALID_ARGUMENT naming the problem: no set or more than kMaxSets, a
  // label longer than kMaxLabelBytes, a sample_rate of 0 or above
  // kMaxSampleRate, options ValidateOptions refuses (named as the Estimate
  // RPC names a set: "sets[1] (label \"fastcdc:max=7\"): ..."), or the
  // errors of chunking::PlanEngine.
  static absl::StatusOr<std::unique_ptr<Estimator>> Create(
      const EstimatorOptions& options);

  Estimator(const Estimator&) = delete;
  Estimator& operator=(const Estimator&) = delete;
  ~Estimator();

  // Feeds the next bytes of the current file.
  absl::Status Append(absl::string_view piece);
  // Ends the current file: every set cuts its last chunk; the next byte
  // starts a new file. Without a byte since the last EndFile, nothing.
  absl::Status EndFile();
  // Ends the data set (EndFile first) and returns one result per set, in
  // the order of the options. REQUIRES: called once; no Append after it.
  absl::StatusOr<std::vector<SetResult>> Finish();

  // Calls `fn` for every distinct chunk kept for set `set` (all of them when
  // exact), in no particular order: for a namespace comparison. Valid until
  // the estimator is destroyed.
  void ForEachKept(size_t set,
                   const std::function<void(const KeptChunk&)>& fn) const;

  uint64_t bytes_in() const;
  uint64_t files() const;
  // Distinct chunks kept now over all sets.
  uint64_t entries() const;
  // Bytes the estimator holds now: chunkers' buffers and tables.
  size_t memory_bytes() const;
  const EstimatorOptions& options() const;

 private:
  class Impl;
  explicit Estimator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What a sample tells about one set (docs/estimate.md, "The interval"): the
// unique chunks and bytes, the ratio of the data set's T bytes to its unique
// bytes U, and the 95 % interval of the ratio: T over U's interval U (1 -+
// 1.96 e), e the relative standard error of U, its low end at least the kept
// bytes and its high end at most T. Exact, the interval is the ratio itself.
struct RatioInterval {
  double unique_chunks = 0;
  double unique_bytes = 0;
  double ratio = 0;
  double low = 0;
  double high = 0;
  bool valid = false;  // at least two distinct chunks kept
};

// A count of distinct values by a sketch (estimate/distinct_sketch.h) and
// its relative standard error.
struct DistinctCount {
  double distinct = 0;
  double relative_se = 0;
};

// What a set's sketches counted over every chunk: its distinct chunks, and
// the granules of granule_bytes that cover them.
struct SketchCounts {
  DistinctCount chunks;
  DistinctCount granules;
  uint32_t granule_bytes = 1;
};

// One kept distinct chunk's counts, for ComputeRatioInterval.
struct KeptCount {
  uint64_t length = 0;
  uint64_t copies = 0;
};

// The counts and the ratio from the kept chunks of a sample of 1 in
// `sample_rate` of `total_bytes` bytes. Exact at rate 1 (`sketches`
// unused): U = the kept bytes. Sampled: D = the sketched distinct chunks (at
// least the kept ones), U = g G - D * mean(pad) with G the sketched granules
// of g bytes and pad = ceil(u / g) g - u over the kept chunks; U's variance
// is (g G e_G)^2 + (D mean(pad) e_D)^2 + D^2 (1 - 1/N) var(pad) / k. The
// copies do not enter. ratio 0 when nothing is kept.
RatioInterval ComputeRatioInterval(absl::Span<const KeptCount> kept,
                                   uint32_t sample_rate, uint64_t total_bytes,
                                   const SketchCounts& sketches = {});

}  // namespace chunkd::estimate

#endif  // CHUNKD_ESTIMATE_ESTIMATOR_H_
