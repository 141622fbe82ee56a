#include "service/stream_task.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "chunkd/chunker.h"
#include "platform/error_reason.h"
#include "service/stream_rpc.h"
#include "service/wire_format.h"

namespace chunkd::service {
namespace {

template <typename Rpc>
class PipelineWork final : public StreamWork {
 public:
  PipelineWork(const pipeline::PipelineOptions& options,
               std::unique_ptr<pipeline::StreamPipeline> pipeline,
               metrics::StreamCounters counters)
      : shape_(ShapeOf(options.chunking,
                       options.hints != pipeline::HintTest::kOff)),
        pipeline_(std::move(pipeline)),
        counters_(counters) {}

  uint64_t MemoryBytes(const StreamSettings& settings) const override {
    return StreamMemoryBytes(shape_, settings);
  }

  absl::Status NeverFits(uint64_t bytes, uint64_t limit) const override {
    return WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "the stream's chunking parameters need up to ", bytes,
            " bytes of memory (chunks final after ", shape_.final_size,
            " bytes, the smallest ", shape_.smallest_chunk,
            " bytes), more than all of --stream_memory_budget (", limit,
            "): it could never start here; choose a smaller max_size "
            "(repmaxcdc: min_size and horizon_size) or a larger min_size")),
        ErrorReason::kStreamMemory);
  }

  absl::Status Run(TaskInput* input,
                   std::deque<grpc::ByteBuffer>* out) override {
    std::vector<pipeline::ChunkRecord> records;
    const pipeline::StreamTotals before = pipeline_->totals();
    absl::Status status = CutPieces(pipeline_.get(), &input->pieces,
                                    input->last, input->buffers, &records);
    // Tells the pipeline when no input waits: it decides when to commit to
    // the index (docs/design.md, "Index batches and records"). Chunk:
    // nothing to commit.
    if (status.ok() && !input->last && !input->input_waits()) {
      status = pipeline_->NoInputWaiting(&records);
    }
    // Serialized here, on the worker, not on gRPC's thread.
    const pipeline::StreamTotals& totals = pipeline_->totals();
    if (status.ok()) {
      status = SerializeRecords<Rpc>(records, input->last ? &totals : nullptr,
                                     out);
    }
    CountTask(counters_, input->bytes, before, totals, records);
    return status;
  }

 private:
  const StreamShape shape_;
  const std::unique_ptr<pipeline::StreamPipeline> pipeline_;
  const metrics::StreamCounters counters_;
};

}  // namespace

absl::Status CutPieces(pipeline::StreamPipeline* pipeline,
                       std::vector<InputPiece>* pieces, bool last,
                       BufferPool* buffers,
                       std::vector<pipeline::ChunkRecord>* records) {
  absl::Status status;
  for (InputPiece& piece : *pieces) {
    if (status.ok()) status = pipeline->Process(piece.bytes, records);
    buffers->Give(std::move(piece.bytes));
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

template <typename Rpc>
absl::StatusOr<std::unique_ptr<StreamWork>> MakePipelineWork(
    const pipeline::PipelineOptions& options, metrics::Metrics* metrics) {
  auto pipeline = pipeline::StreamPipeline::Create(options);
  if (!pipeline.ok()) return pipeline.status();
  metrics::StreamCounters counters = metrics->ForStream(
      Rpc::kMethod, chunking::AlgorithmName(options.chunking.algorithm));
  if (options.hints != pipeline::HintTest::kOff) {
    metrics->ForHints(pipeline::HintTestName(options.hints), &counters);
  }
  return std::make_unique<PipelineWork<Rpc>>(options, *std::move(pipeline),
                                             counters);
}

template absl::StatusOr<std::unique_ptr<StreamWork>> MakePipelineWork<ChunkRpc>(
    const pipeline::PipelineOptions&, metrics::Metrics*);
template absl::StatusOr<std::unique_ptr<StreamWork>> MakePipelineWork<DedupRpc>(
    const pipeline::PipelineOptions&, metrics::Metrics*);

}  // namespace chunkd::service
