// The work of a Chunk or Dedup stream (stream_work.h): each task cuts its
// input through the stream's pipeline::StreamPipeline, counts it in the
// stream's metrics and serializes its records (wire_format.h), the summary
// after the last (docs/design.md, "Tasks on the worker pool").
//
// Thread safety: a stream's work is used by one task at a time; the
// counters are thread-safe.
#ifndef CHUNKD_SERVICE_STREAM_TASK_H_
#define CHUNKD_SERVICE_STREAM_TASK_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "metrics/metrics.h"
#include "pipeline/stream_pipeline.h"
#include "service/request_bytes.h"
#include "service/stream_work.h"

namespace chunkd::service {

// Cuts `pieces` in order through `pipeline`, and finishes the stream when
// `last`, appending the records to *records; stops cutting at the first
// failure. Every piece goes back to `buffers`, cut or not.
absl::Status CutPieces(pipeline::StreamPipeline* pipeline,
                       std::vector<InputPiece>* pieces, bool last,
                       BufferPool* buffers,
                       std::vector<pipeline::ChunkRecord>* records);

// Counts one task in the stream's metrics: `taken` input bytes, and what the
// stream's totals moved from `before` to `after` with `records`.
void CountTask(const metrics::StreamCounters& counters, size_t taken,
               const pipeline::StreamTotals& before,
               const pipeline::StreamTotals& after,
               const std::vector<pipeline::ChunkRecord>& records);

// The work of a stream of Rpc (ChunkRpc or DedupRpc, stream_rpc.h) with
// `options`: its pipeline, counted in `metrics` (not null).
template <typename Rpc>
absl::StatusOr<std::unique_ptr<StreamWork>> MakePipelineWork(
    const pipeline::PipelineOptions& options, metrics::Metrics* metrics);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_STREAM_TASK_H_
