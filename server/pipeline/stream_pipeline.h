// StreamPipeline: the work of one Chunk or Dedup stream, free of gRPC.
//
// Bytes go in piece by piece; out come records of the chunks that became
// final: cut by the StreamChunker, fingerprinted, and (Dedup only) recorded in
// the namespace's index. Dedup records wait for their index batch: one
// batched call (one round trip) per Flush(), or per kMaxPendingChunks
// chunks, or at Finish(), so that the owner decides how much work shares a
// round trip. Records come out in stream order.
//
// Thread safety: not thread-safe; the owner runs one call at a time (the
// service's reactor runs at most one task per stream on the shared pool).
#ifndef CHUNKD_PIPELINE_STREAM_PIPELINE_H_
#define CHUNKD_PIPELINE_STREAM_PIPELINE_H_

#include <cstdint>
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
};

class StreamPipeline {
 public:
  // INVALID_ARGUMENT for bad chunking options; FAILED_PRECONDITION for Dedup
  // without a fingerprint.
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
  StreamPipeline(PipelineOptions options,
                 std::unique_ptr<chunking::StreamChunker> chunker);
  absl::Status Emit(const std::vector<chunking::Chunk>& chunks,
                    std::vector<ChunkRecord>* out);
  absl::Status Commit(std::vector<ChunkRecord>* out);

  PipelineOptions options_;
  std::unique_ptr<chunking::StreamChunker> chunker_;
  std::vector<chunking::Chunk> scratch_;
  std::vector<ChunkRecord> pending_;  // Dedup: not yet in the index
  uint64_t committed_chunks_ = 0;     // Dedup: chunks in the index so far
  StreamTotals totals_;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_STREAM_PIPELINE_H_
