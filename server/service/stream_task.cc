#include "service/stream_task.h"

#include <cstdint>
#include <utility>

namespace chunkd::service {

absl::Status CutPieces(pipeline::StreamPipeline* pipeline,
                       std::vector<std::string>* pieces, bool last,
                       BufferPool* buffers,
                       std::vector<pipeline::ChunkRecord>* records) {
  absl::Status status;
  for (std::string& piece : *pieces) {
    if (status.ok()) status = pipeline->Process(piece, records);
    buffers->Give(std::move(piece));
  }
  if (status.ok() && last) status = pipeline->Finish(records);
  return status;
}

void CountTask(const metrics::StreamCounters& counters, size_t taken,
               const pipeline::StreamTotals& before,
               const pipeline::StreamTotals& after,
               const std::vector<pipeline::ChunkRecord>& records) {
  counters.ingest_bytes->Increment(static_cast<double>(taken));
  counters.chunks->Increment(static_cast<double>(after.chunks - before.chunks));
  if (counters.duplicate_bytes != nullptr) {
    uint64_t bytes = 0;
    for (const auto& r : records) bytes += r.length;
    const uint64_t new_chunks = after.unique_chunks - before.unique_chunks;
    counters.duplicate_bytes->Increment(static_cast<double>(
        bytes - (after.unique_bytes - before.unique_bytes)));
    counters.duplicate_chunks->Increment(
        static_cast<double>(records.size() - new_chunks));
  }
  if (counters.hints_accepted != nullptr) {
    counters.hints_accepted->Increment(
        static_cast<double>(after.hints_accepted - before.hints_accepted));
    counters.hints_rejected->Increment(
        static_cast<double>(after.hints_rejected - before.hints_rejected));
    counters.hint_skipped_bytes->Increment(static_cast<double>(
        after.hint_skipped_bytes - before.hint_skipped_bytes));
    counters.hint_cache_hits->Increment(
        static_cast<double>(after.cache_hits - before.cache_hits));
    counters.hint_cache_misses->Increment(
        static_cast<double>(after.cache_misses - before.cache_misses));
  }
}

}  // namespace chunkd::service
