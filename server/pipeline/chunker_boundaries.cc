#include "pipeline/chunker_boundaries.h"

#include <utility>

#include "pipeline/stage_clock.h"

namespace chunkd::pipeline {

absl::StatusOr<std::unique_ptr<ChunkerBoundaries>> ChunkerBoundaries::Create(
    const chunking::ChunkerOptions& options,
    const chunking::EngineOptions& engine, uint64_t base, double* chunk_seconds,
    prometheus::Counter* stage) {
  auto chunker = chunking::StreamChunker::Create(options, engine);
  if (!chunker.ok()) return chunker.status();
  return std::unique_ptr<ChunkerBoundaries>(
      new ChunkerBoundaries(*std::move(chunker), base, chunk_seconds, stage));
}

ChunkerBoundaries::ChunkerBoundaries(
    std::unique_ptr<chunking::StreamChunker> chunker, uint64_t base,
    double* chunk_seconds, prometheus::Counter* stage)
    : chunker_(std::move(chunker)),
      base_(base),
      end_(base),
      chunk_seconds_(chunk_seconds),
      stage_(stage) {}

absl::Status ChunkerBoundaries::CutChunks(absl::string_view piece,
                                          bool at_end, ChunkSink* sink) {
  chunks_.clear();
  if (!piece.empty()) {
    Stopwatch watch(chunk_seconds_, stage_);
    chunker_->Append(piece, &chunks_);
  }
  absl::Status status = SendChunks(/*last_call=*/false, sink);
  if (!status.ok() || !at_end) return status;
  chunks_.clear();
  {
    Stopwatch watch(chunk_seconds_, stage_);
    chunker_->Finish(&chunks_);
  }
  return SendChunks(/*last_call=*/true, sink);
}

absl::Status ChunkerBoundaries::SendChunks(bool last_call, ChunkSink* sink) {
  if (chunks_.empty()) return absl::OkStatus();
  cuts_.clear();
  cuts_.resize(chunks_.size());
  for (size_t i = 0; i < chunks_.size(); ++i) {
    cuts_[i].offset = base_ + chunks_[i].offset;
    cuts_[i].bytes = chunker_->ChunkData(chunks_[i]);
  }
  // The stream's end may have cut its last chunk: its size says nothing
  // about this content.
  if (last_call) cuts_.back().learnable = false;
  end_ = cuts_.back().offset + cuts_.back().bytes.size();
  return sink->AcceptChunks(absl::MakeSpan(cuts_));
}

}  // namespace chunkd::pipeline
