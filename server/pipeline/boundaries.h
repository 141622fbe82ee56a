// Boundaries: where a stream's chunks end, the first stage of StreamPipeline
// (docs/design.md, "The data path of one stream").
//
// Two implementations: ChunkerBoundaries (chunker_boundaries.h), the
// engine's StreamChunker; and HintFollower (hint_follower.h), RapidCDC's
// next-chunk hints, which falls back to a ChunkerBoundaries where the hints
// run out. A Boundaries hands every chunk it finds, in stream order, to a
// ChunkSink (the StreamPipeline); it never commits anything to the index:
// the pipeline decides when.
//
// Thread safety: not thread-safe; the owner makes one call at a time.
#ifndef CHUNKD_PIPELINE_BOUNDARIES_H_
#define CHUNKD_PIPELINE_BOUNDARIES_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "pipeline/records.h"

namespace chunkd::pipeline {

// Where a Boundaries sends the chunks it found.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;

  // The next chunks of the stream, in order. Their bytes are valid during
  // the call of Boundaries::CutChunks that found them. May move their
  // fingerprints away. An error ends the stream.
  virtual absl::Status AcceptChunks(absl::Span<CutChunk> chunks) = 0;
};

class Boundaries {
 public:
  virtual ~Boundaries() = default;

  // Consumes the next piece of the stream (`at_end`: then ends the stream)
  // and hands the chunks found to `sink`. `piece` is read during the call
  // only. An error of the sink is returned as is; the stream must then be
  // abandoned.
  virtual absl::Status CutChunks(absl::string_view piece, bool at_end,
                                 ChunkSink* sink) = 0;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_BOUNDARIES_H_
