// IndexStage: a Dedup stream's chunks recorded in the namespace's index, the
// third stage of StreamPipeline, which turns them into records.
//
// Chunks wait (Enqueue) until the pipeline commits them in one batch (Commit):
// one Insert, one round trip, which says which chunks are new. With a
// stream id every Insert carries the WriteToken {stream id, ordinal of the
// batch's first chunk in the stream}, so that a retried stream gets every
// reference counted once and the same answers (docs/design.md, "Write
// tokens and idempotent retries").
//
// With RapidCDC hints (a params key) it learns, from every learnable chunk
// (records.h), which size followed the chunk before it, and the run of the
// sizes after that (docs/design.md, "Next-size hints"); a hint is recorded
// after the Insert of the batch in which its run is complete, or at the
// stream's end (EndOfStream). NextHints() reads hints back. With a hint
// cache it teaches the cache the same, and, once a batch is in, which of
// the chunks without a key were duplicates. Index calls are timed as the
// index stage; keying duplicates as the fingerprint stage.
//
// Defaults: no stream id, no hints, no cache.
// Thread safety: not thread-safe; the index and the cache are shared with
// other streams.
#ifndef CHUNKD_PIPELINE_INDEX_STAGE_H_
#define CHUNKD_PIPELINE_INDEX_STAGE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "index/fingerprint_index.h"
#include "metrics/metrics.h"
#include "pipeline/hint_cache.h"
#include "pipeline/records.h"

namespace chunkd::pipeline {

class IndexStage {
 public:
  struct Options {
    // Must outlive the stage.
    index::FingerprintIndex* index = nullptr;
    std::string ns;
    // Not empty: the WriteToken's stream id. REQUIRES: empty or valid
    // (index::ValidateWriteToken).
    std::string stream_id;
    // Hints: the key they are stored under (HintParamsKey); empty: none
    // learned.
    std::string params_key;
    // The hint cache and the stream's scope in it; null: none. Must
    // outlive the stage.
    HintCache* cache = nullptr;
    HintCache::Scope scope{};
    // The index and fingerprint stages' counters; null: not measured.
    prometheus::Counter* index_stage = nullptr;
    prometheus::Counter* fingerprint_stage = nullptr;
  };

  // Counts new chunks and bytes in *totals (unique_chunks, unique_bytes),
  // which must outlive the stage.
  IndexStage(Options options, StreamTotals* totals);

  IndexStage(const IndexStage&) = delete;
  IndexStage& operator=(const IndexStage&) = delete;

  // Queues the fingerprinted `cuts` for the next batch, taking their
  // fingerprints, and learns what followed what.
  void Enqueue(absl::Span<CutChunk> cuts);

  // Chunks waiting for the next batch.
  size_t pending() const { return pending_.size(); }

  // Inserts the waiting chunks in one batch and appends their records to
  // *out; then records the hints learned, and caches the duplicates. An
  // index error is returned as is; after a failed Insert nothing waits.
  absl::Status Commit(std::vector<ChunkRecord>* out);

  // The stream ended: the hints still waiting for their runs are recorded
  // with the next Commit, with the runs they have.
  void EndOfStream();

  // Drops the chunks and hints that wait (the stream failed).
  void Discard();

  // The hints the index holds for `fingerprint`; with a `key`, non-empty
  // sizes are also put in the cache's entry of that key.
  absl::StatusOr<index::NextHints> NextHints(const std::string& fingerprint,
                                             const HintCache::Key* key);
  // The same for several fingerprints in one call; `keys` is empty or has
  // one key per fingerprint.
  absl::StatusOr<std::vector<index::NextHints>> NextHints(
      absl::Span<const std::string> fingerprints,
      absl::Span<const HintCache::Key> keys);

  // Chunks committed so far.
  uint64_t committed() const { return committed_; }
  // Whether the last chunk committed was new.
  bool last_is_new() const { return last_is_new_; }
  // With hints: the fingerprint of the last chunk added.
  const std::string& last_fingerprint() const { return last_fp_; }

 private:
  // Learns the hint that `cut` teaches about the chunk before it, and
  // remembers `cut` as that chunk for the next.
  void Learn(const CutChunk& cut);
  // Inserts the waiting chunks and moves their records to *out.
  absl::Status Insert(std::vector<ChunkRecord>* out);
  // Records the hints learned since the last batch.
  absl::Status RecordLearned();
  // Caches the duplicates among the unkeyed chunks of the batch whose
  // records start at `first` in `records`.
  void CacheDuplicates(const std::vector<ChunkRecord>& records, size_t first);

  const Options options_;
  StreamTotals* const totals_;
  std::vector<ChunkRecord> pending_;
  // Pending chunks without a cache key (with a cache): their place in
  // pending_ and their bytes, to cache those that are duplicates.
  struct Unkeyed {
    size_t index;
    absl::string_view bytes;
  };
  std::vector<Unkeyed> unkeyed_;
  // Hints waiting for their runs, oldest first (at most kHintRunLength),
  // and those ready to be recorded.
  std::deque<index::NextSize> open_;
  std::vector<index::NextSize> learned_;
  uint64_t committed_ = 0;
  bool last_is_new_ = false;
  // The last chunk added (with hints): its fingerprint and cache key.
  bool has_last_ = false;
  std::string last_fp_;
  bool last_keyed_ = false;
  HintCache::Key last_key_;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_INDEX_STAGE_H_
