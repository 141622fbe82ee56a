// What flows through a StreamPipeline (bytes -> boundaries -> fingerprints ->
// index -> records): CutChunk, a chunk the boundaries found, which the
// fingerprint stage completes; ChunkRecord, what the stream answers for it;
// StreamTotals, the stream's counters, each kept by the stage that does the
// counted work.
//
// Thread safety: plain values.
#ifndef CHUNKD_PIPELINE_RECORDS_H_
#define CHUNKD_PIPELINE_RECORDS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "pipeline/hint_cache.h"

namespace chunkd::pipeline {

// A chunk the boundaries found, on its way to the fingerprint and index
// stages. Defaults: a chunk still to be fingerprinted, which teaches a hint,
// without a hint cache key.
struct CutChunk {
  uint64_t offset = 0;  // in the stream
  // The chunk's bytes (its length is bytes.size()); see
  // ChunkSink::AcceptChunks for how long they stay valid.
  absl::string_view bytes;
  // Empty: the fingerprint stage computes it. The hint follower sets it: it
  // needed the fingerprint to find the chunk.
  std::string fingerprint;
  // Whether its size, following the chunk before it, teaches the index a
  // next-chunk hint: not when a hint suggested it (the index has that one)
  // nor when the stream's end may have cut it.
  bool learnable = true;
  // Whether `key` holds the chunk's hint cache key (hint_cache.h).
  bool keyed = false;
  HintCache::Key key;
};

struct ChunkRecord {
  uint64_t offset = 0;
  uint32_t length = 0;
  std::string fingerprint;
  bool is_new = false;  // Dedup only
};

struct StreamTotals {
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  uint64_t unique_bytes = 0;   // Dedup only
  uint64_t unique_chunks = 0;  // Dedup only
  // RapidCDC: sizes tested, chunks accepted, tests failed, accepted bytes.
  uint64_t hints_tried = 0;
  uint64_t hints_accepted = 0;
  uint64_t hints_rejected = 0;
  uint64_t hint_skipped_bytes = 0;
  // Hint cache: accepted chunks whose fingerprint came from the cache, and
  // those the chain had to hash (the cache did not hold their content).
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  // Accepted chunks that were hashed together with others of their run
  // (hint_follower.h).
  uint64_t hints_in_runs = 0;
  // Time spent finding boundaries: in the chunker, and (hints) in the
  // acceptance tests without their fingerprints and index calls.
  double chunk_seconds = 0;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_RECORDS_H_
