// ChunkerBoundaries: the engine's StreamChunker as a Boundaries, the chunks
// it cuts handed on with their stream offsets.
//
// Its stream may begin at any offset of the pipeline's stream (`base`): the
// hint follower starts a new one where the hints run out. Each CutChunks()
// hands the chunks that became final in one ChunkSink::AcceptChunks (none
// when none did); the last chunk of the stream, which its end may have
// cut, is not learnable. Time in the chunker counts as the chunk stage.
//
// Thread safety: not thread-safe, like StreamChunker.
#ifndef CHUNKD_PIPELINE_CHUNKER_BOUNDARIES_H_
#define CHUNKD_PIPELINE_CHUNKER_BOUNDARIES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "chunkd/chunker.h"
#include "metrics/metrics.h"
#include "pipeline/boundaries.h"

namespace chunkd::pipeline {

class ChunkerBoundaries final : public Boundaries {
 public:
  // A chunker whose stream starts at offset `base`; the time it takes is
  // added to *chunk_seconds and to `stage` (each may be null). Errors as
  // StreamChunker::Create.
  static absl::StatusOr<std::unique_ptr<ChunkerBoundaries>> Create(
      const chunking::ChunkerOptions& options,
      const chunking::EngineOptions& engine, uint64_t base,
      double* chunk_seconds, prometheus::Counter* stage);

  absl::Status CutChunks(absl::string_view piece, bool at_end,
                         ChunkSink* sink) override;

  // Where the last chunk handed on ends; `base` before the first.
  uint64_t end() const { return end_; }

  // The bytes fed but not yet in a chunk (StreamChunker::Pending).
  absl::string_view Pending() const { return chunker_->Pending(); }

  // The bytes the engine gathers before it runs (EnginePlan::window_size).
  size_t window_size() const { return chunker_->plan().window_size; }

 private:
  ChunkerBoundaries(std::unique_ptr<chunking::StreamChunker> chunker,
                    uint64_t base, double* chunk_seconds,
                    prometheus::Counter* stage);
  // Sends chunks_ to the sink; `last_call`: they end the stream.
  absl::Status SendChunks(bool last_call, ChunkSink* sink);

  std::unique_ptr<chunking::StreamChunker> chunker_;
  const uint64_t base_;
  uint64_t end_;
  double* const chunk_seconds_;
  prometheus::Counter* const stage_;
  // Reused from call to call (they keep their capacity).
  std::vector<chunking::Chunk> chunks_;
  std::vector<CutChunk> cuts_;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_CHUNKER_BOUNDARIES_H_
