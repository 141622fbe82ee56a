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

absl::Status StreamPipeline::Finish(std::vector<ChunkRecord>* out) {
  scratch_.clear();
  chunker_->Finish(&scratch_);
  return Emit(scratch_, out);
}

absl::Status StreamPipeline::Emit(const std::vector<chunking::Chunk>& chunks,
                                  std::vector<ChunkRecord>* out) {
  if (chunks.empty()) return absl::OkStatus();
  const size_t first = out->size();
  for (const chunking::Chunk& c : chunks) {
    ChunkRecord r;
    r.offset = c.offset;
    r.length = c.length;
    r.fingerprint =
        fingerprint::Digest(options_.fingerprint, chunker_->ChunkData(c));
    out->push_back(std::move(r));
  }
  // Positions of a stream's chunks: their ordinals, the same however the
  // bytes arrive, so that a retried stream writes the same positions.
  const uint64_t first_position = totals_.chunks;
  totals_.chunks += chunks.size();
  if (options_.index == nullptr) return absl::OkStatus();

  std::vector<index::InsertEntry> entries;
  entries.reserve(chunks.size());
  for (size_t i = first; i < out->size(); ++i) {
    entries.push_back({(*out)[i].fingerprint, (*out)[i].length});
  }
  index::WriteToken token;
  const index::WriteToken* token_ptr = nullptr;
  if (!options_.stream_id.empty()) {
    token.stream_id = options_.stream_id;
    token.first_position = first_position;
    token_ptr = &token;
  }
  auto inserted = options_.index->Insert(options_.ns, entries, token_ptr);
  if (!inserted.ok()) {
    out->resize(first);
    return inserted.status();
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    ChunkRecord& r = (*out)[first + i];
    r.is_new = (*inserted)[i].is_new;
    if (r.is_new) {
      ++totals_.unique_chunks;
      totals_.unique_bytes += r.length;
    }
  }
  return absl::OkStatus();
}

}  // namespace chunkd::pipeline
