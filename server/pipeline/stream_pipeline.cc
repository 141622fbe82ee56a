#include "pipeline/stream_pipeline.h"

#include <utility>

namespace chunkd::pipeline {

absl::StatusOr<std::unique_ptr<StreamPipeline>> StreamPipeline::Create(
    PipelineOptions options) {
  if (options.index != nullptr &&
      options.fingerprint == fingerprint::Kind::kNone) {
    return absl::InvalidArgumentError(
        "fingerprint NONE cannot be used with Dedup: the index needs one");
  }
  auto chunker =
      chunking::StreamChunker::Create(options.chunking, options.engine);
  if (!chunker.ok()) return chunker.status();
  return std::unique_ptr<StreamPipeline>(
      new StreamPipeline(std::move(options), *std::move(chunker)));
}

StreamPipeline::StreamPipeline(PipelineOptions options,
                               std::unique_ptr<chunking::StreamChunker> chunker)
    : options_(std::move(options)), chunker_(std::move(chunker)) {}

absl::Status StreamPipeline::Process(absl::string_view piece,
                                     std::vector<ChunkRecord>* out) {
  totals_.bytes += piece.size();
  scratch_.clear();
  chunker_->Append(piece, &scratch_);
  return Emit(scratch_, out);
}

absl::Status StreamPipeline::Flush(std::vector<ChunkRecord>* out) {
  return Commit(out);
}

absl::Status StreamPipeline::Finish(std::vector<ChunkRecord>* out) {
  scratch_.clear();
  chunker_->Finish(&scratch_);
  absl::Status status = Emit(scratch_, out);
  if (!status.ok()) return status;
  return Commit(out);
}

absl::Status StreamPipeline::Emit(const std::vector<chunking::Chunk>& chunks,
                                  std::vector<ChunkRecord>* out) {
  if (chunks.empty()) return absl::OkStatus();
  // Dedup records wait in pending_ for their index batch.
  std::vector<ChunkRecord>* dest =
      options_.index == nullptr ? out : &pending_;
  for (const chunking::Chunk& c : chunks) {
    ChunkRecord r;
    r.offset = c.offset;
    r.length = c.length;
    r.fingerprint =
        fingerprint::Digest(options_.fingerprint, chunker_->ChunkData(c));
    dest->push_back(std::move(r));
  }
  totals_.chunks += chunks.size();
  if (pending_.size() >= kMaxPendingChunks) return Commit(out);
  return absl::OkStatus();
}

absl::Status StreamPipeline::Commit(std::vector<ChunkRecord>* out) {
  if (pending_.empty()) return absl::OkStatus();
  std::vector<index::InsertEntry> entries;
  entries.reserve(pending_.size());
  for (const ChunkRecord& r : pending_) {
    entries.push_back({r.fingerprint, r.length});
  }
  // Positions of a stream's chunks are their ordinals, the same however
  // the bytes arrive and the batches fall, so that a retried stream writes
  // the same positions.
  index::WriteToken token;
  const index::WriteToken* token_ptr = nullptr;
  if (!options_.stream_id.empty()) {
    token.stream_id = options_.stream_id;
    token.first_position = committed_chunks_;
    token_ptr = &token;
  }
  auto inserted = options_.index->Insert(options_.ns, entries, token_ptr);
  if (!inserted.ok()) {
    pending_.clear();
    return inserted.status();
  }
  committed_chunks_ += pending_.size();
  for (size_t i = 0; i < pending_.size(); ++i) {
    ChunkRecord& r = pending_[i];
    r.is_new = (*inserted)[i].is_new;
    if (r.is_new) {
      ++totals_.unique_chunks;
      totals_.unique_bytes += r.length;
    }
    out->push_back(std::move(r));
  }
  pending_.clear();
  return absl::OkStatus();
}

}  // namespace chunkd::pipeline
