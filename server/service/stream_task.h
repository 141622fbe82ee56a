// The work of one task of a Chunk or Dedup stream, free of flow control:
// cut the input through the stream's pipeline::StreamPipeline and count it in
// the stream's metrics (docs/design.md, "Tasks on the worker pool"). The
// stream reactor (stream_reactor.h) decides when a task runs and what it
// takes; serializing its records is the wire format's (wire_format.h).
//
// Thread safety: a stream's pipeline is used by one task at a time; the
// counters are thread-safe.
#ifndef CHUNKD_SERVICE_STREAM_TASK_H_
#define CHUNKD_SERVICE_STREAM_TASK_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "metrics/metrics.h"
#include "pipeline/stream_pipeline.h"
#include "service/request_bytes.h"

namespace chunkd::service {

// Cuts `pieces` in order through `pipeline`, and finishes the stream when
// `last`, appending the records to *records; stops cutting at the first
// failure. Every piece goes back to `buffers`, cut or not.
absl::Status CutPieces(pipeline::StreamPipeline* pipeline,
                       std::vector<std::string>* pieces, bool last,
                       BufferPool* buffers,
                       std::vector<pipeline::ChunkRecord>* records);

// Counts one task in the stream's metrics: `taken` input bytes, and what the
// stream's totals moved from `before` to `after` with `records`.
void CountTask(const metrics::StreamCounters& counters, size_t taken,
               const pipeline::StreamTotals& before,
               const pipeline::StreamTotals& after,
               const std::vector<pipeline::ChunkRecord>& records);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_STREAM_TASK_H_
