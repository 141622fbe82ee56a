// What a StreamPipeline answers: ChunkRecord, one per chunk, and
// StreamTotals, the stream's counters.
//
// Thread safety: plain values.
#ifndef CHUNKD_PIPELINE_RECORDS_H_
#define CHUNKD_PIPELINE_RECORDS_H_

#include <cstdint>
#include <string>

namespace chunkd::pipeline {

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
  // Time spent finding boundaries: in the chunker, and (hints) in the
  // acceptance tests without their fingerprints and index calls.
  double chunk_seconds = 0;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_RECORDS_H_
