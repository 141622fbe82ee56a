// StreamPipeline: the work of one Chunk or Dedup stream, free of gRPC.
//
// Bytes go in piece by piece; out come records of the chunks that became
// final. The work is a line of stages, each a class of its own:
//
//   bytes -> Boundaries -> FingerprintStage -> IndexStage -> records
//
// Boundaries (boundaries.h) find where chunks end: ChunkerBoundaries, the
// engine's StreamChunker; or, for Dedup with RapidCDC hints, HintFollower,
// which follows the sizes that came after a duplicate before and falls back
// to the chunker. They hand their chunks to the pipeline, which has the
// FingerprintStage fingerprint them (the follower fingerprints its own) and
// then, for Dedup, the IndexStage record them in the namespace's index: the
// records come out when their batch is committed. Chunk streams have no
// index stage: their records come out as soon as they are fingerprinted.
//
// Dedup records wait for their index batch: one batched call (one round
// trip) per Flush(), or per kMaxPendingChunks chunks, or at Finish(), so
// that the owner decides how much work shares a round trip. With hints the
// follower commits by itself, since whether the last chunk was a duplicate
// decides what comes next: each call of Process commits its own records.
// Records come out in stream order.
//
// With FF+RWT+FPT the records are exactly those without hints. A hint cache
// (PipelineOptions::hint_cache) never changes the records.
//
// Thread safety: not thread-safe; the owner runs one call at a time (the
// service's reactor runs at most one task per stream on the shared pool).
#ifndef CHUNKD_PIPELINE_STREAM_PIPELINE_H_
#define CHUNKD_PIPELINE_STREAM_PIPELINE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "fingerprint/fingerprint.h"
#include "index/fingerprint_index.h"
#include "metrics/metrics.h"
#include "pipeline/boundaries.h"
#include "pipeline/fingerprint_stage.h"
#include "pipeline/hint_cache.h"
#include "pipeline/index_stage.h"
#include "pipeline/rapid_cdc.h"
#include "pipeline/records.h"

namespace chunkd::pipeline {

struct PipelineOptions {
  chunking::ChunkerOptions chunking;
  // How the chunks are cut (kernel, executor, segment and window sizes); the
  // executor must outlive the pipeline. Never changes the chunks.
  chunking::EngineOptions engine;
  fingerprint::Kind fingerprint = fingerprint::Kind::kSha256;
  // Dedup only: the index and namespace to record chunks in. nullptr: Chunk.
  index::FingerprintIndex* index = nullptr;
  std::string ns;
  // Dedup with fastcdc only: RapidCDC's acceptance test; kOff for none.
  HintTest hints = HintTest::kOff;
  // Hints with sha256 only: the server's cache of content -> SHA-256 that
  // lets the hint chain run without hashing (hint_cache.h); null: none.
  // Never changes the records. Must outlive the pipeline.
  HintCache* hint_cache = nullptr;
  // Whether the cache takes every chunk the chunker cuts (with what
  // followed it), or only the duplicates. Every chunk costs a cache key
  // (GMAC) of each new chunk and lets the next stream over the same data
  // follow its hints without asking the index per chunk: worth it when the
  // index is a round trip away (Redis) or on disk (RocksDB), not with the
  // memory index.
  bool hint_cache_all_chunks = false;
  // Where the time of each stage goes (chunkd_stage_seconds_total); null:
  // not measured. Must outlive the pipeline.
  const metrics::StageCounters* stages = nullptr;
  // Dedup only: when not empty, every index write carries the WriteToken
  // {stream_id, ordinal of the batch's first chunk in the stream}, so that
  // a client that retries the whole stream with the same id after a failure
  // gets every reference counted exactly once and the same answers.
  // REQUIRES: empty or valid (index::ValidateWriteToken).
  std::string stream_id;
};

class StreamPipeline final : private CutSink {
 public:
  // INVALID_ARGUMENT for bad chunking options, for Dedup without a
  // fingerprint, and for hints with another algorithm than fastcdc.
  static absl::StatusOr<std::unique_ptr<StreamPipeline>> Create(
      PipelineOptions options);

  StreamPipeline(const StreamPipeline&) = delete;
  StreamPipeline& operator=(const StreamPipeline&) = delete;

  // Consumes the next piece of the stream; appends final records to *out.
  // An index error (e.g. UNAVAILABLE) is returned as is; the stream must then
  // be abandoned.
  absl::Status Process(absl::string_view piece, std::vector<ChunkRecord>* out);

  // Dedup: records the chunks that wait for the index in one batch and
  // appends their records to *out. Chunk: nothing to do. An index error is
  // returned as by Process.
  absl::Status Flush(std::vector<ChunkRecord>* out);

  // Ends the stream; appends the remaining records to *out.
  absl::Status Finish(std::vector<ChunkRecord>* out);

  // Dedup chunks that trigger an index batch without waiting for Flush().
  static constexpr size_t kMaxPendingChunks = 1024;

  const StreamTotals& totals() const { return totals_; }

 private:
  explicit StreamPipeline(PipelineOptions options);
  // Builds the stages.
  absl::Status Assemble();
  // Runs the boundaries over `piece` (to the stream's end when `at_end`),
  // the stages after them writing records to *out. After an error nothing
  // waits for the index.
  absl::Status Run(absl::string_view piece, bool at_end,
                   std::vector<ChunkRecord>* out);
  // CutSink: the stages after the boundaries.
  absl::Status Take(absl::Span<CutChunk> cuts) override;
  absl::Status Commit() override;

  const PipelineOptions options_;
  StreamTotals totals_;
  std::unique_ptr<FingerprintStage> fingerprints_;
  std::unique_ptr<IndexStage> index_;  // Dedup only
  std::unique_ptr<Boundaries> boundaries_;
  std::vector<ChunkRecord>* out_ = nullptr;  // during Run()
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_STREAM_PIPELINE_H_
