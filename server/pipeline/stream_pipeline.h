// StreamPipeline: the work of one Chunk or Dedup stream, free of gRPC
// (docs/design.md, "The data path of one stream").
//
// Bytes go in piece by piece; out come the records of the chunks that
// became final, in stream order. The work is one line of stages:
//
//   bytes -> Boundaries -> FingerprintStage -> IndexStage (Dedup) -> records
//
// The Boundaries (ChunkerBoundaries, or HintFollower for Dedup with
// RapidCDC hints) hand their chunks to the pipeline, which has them
// fingerprinted and, for Dedup, queued in the IndexStage. The hint follower
// asks the pipeline (its HintSource) for the fingerprints and hints it
// needs; no stage calls another.
//
// The pipeline alone decides when a Dedup stream's waiting chunks are
// committed to the index (one Insert, one round trip, after which their
// records come out; docs/design.md, "Index batches and records"):
//  - when kMaxPendingChunks wait (without hints);
//  - when the owner says no input is waiting (NoInputWaiting), and at the
//    end of the stream (Finish);
//  - with hints, when the follower asks whether the last chunk is a
//    duplicate, and at the end of every call of Process or Finish (the hint
//    cache keys the duplicates of a batch from bytes valid during the call
//    only).
// CommitsAt() is that policy, in one place.
// Chunk streams have no index stage: their records come out as soon as
// they are fingerprinted.
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
#include <optional>
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
#include "pipeline/hint_follower.h"
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

class StreamPipeline final : private ChunkSink, private HintSource {
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

  // The owner has no more input at hand: Dedup commits the chunks that wait
  // (one index batch) and appends their records to *out; Chunk has nothing
  // waiting. An index error is returned as by Process.
  absl::Status NoInputWaiting(std::vector<ChunkRecord>* out);

  // Ends the stream; appends the remaining records to *out.
  absl::Status Finish(std::vector<ChunkRecord>* out);

  // Dedup chunks (without hints) that are committed without waiting for
  // NoInputWaiting() or Finish().
  static constexpr size_t kMaxPendingChunks = 1024;

  const StreamTotals& totals() const { return totals_; }

 private:
  explicit StreamPipeline(PipelineOptions options);
  // Builds the stages.
  absl::Status Assemble();
  // Has the boundaries cut `piece` (to the stream's end when `at_end`), the
  // stages after them writing records to *out. After an error nothing
  // waits for the index.
  absl::Status CutPiece(absl::string_view piece, bool at_end,
                        std::vector<ChunkRecord>* out);
  // The moments the commit policy (above) is asked about.
  enum class Moment {
    kChunksAccepted,  // the boundaries handed chunks on
    kCallEnds,        // a call of Process or Finish is done cutting
    kLastChunkAsked,  // the hint follower asks about the last chunk
    kNoInputWaiting,  // the owner says so
    kEndOfStream,     // Finish
  };
  // The commit policy: whether the chunks that wait go to the index now.
  // REQUIRES: Dedup.
  bool CommitsAt(Moment moment) const;
  // Dedup, when the policy says so at `moment`: commits the chunks that
  // wait (one batch), appending their records to *out.
  absl::Status CommitIf(Moment moment, std::vector<ChunkRecord>* out);

  // ChunkSink: the stages after the boundaries.
  absl::Status AcceptChunks(absl::Span<CutChunk> chunks) override;

  // HintSource: what the hint follower asks.
  bool cached() const override { return fingerprints_->cached(); }
  HintCache::Key KeyOf(absl::string_view bytes) const override {
    return fingerprints_->KeyOf(bytes);
  }
  std::optional<HintCache::Entry> FingerprintOf(
      absl::string_view bytes, const HintCache::Key* key,
      std::string* fingerprint) override;
  void FingerprintsOf(
      absl::Span<const absl::string_view> chunks,
      absl::Span<const HintCache::Key> keys,
      std::vector<std::string>* fingerprints,
      std::vector<std::optional<HintCache::Entry>>* hits) override;
  absl::StatusOr<index::NextHints> NextHintsOf(
      const std::string& fingerprint, const HintCache::Key* key) override;
  absl::StatusOr<std::vector<index::NextHints>> NextHintsOf(
      absl::Span<const std::string> fingerprints,
      absl::Span<const HintCache::Key> keys) override;
  absl::StatusOr<std::optional<std::string>> LastChunkIfDuplicate() override;

  const PipelineOptions options_;
  const bool hints_;
  StreamTotals totals_;
  std::unique_ptr<FingerprintStage> fingerprints_;
  std::unique_ptr<IndexStage> index_;  // Dedup only
  std::unique_ptr<Boundaries> boundaries_;
  std::vector<ChunkRecord>* out_ = nullptr;  // during CutPiece()
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_STREAM_PIPELINE_H_
