#include "pipeline/stream_pipeline.h"

#include <chrono>
#include <utility>

#include "chunking/executor.h"

namespace chunkd::pipeline {
namespace {

// Bytes of chunks one fingerprinting task hashes (about 0.1 ms of SHA-256).
constexpr size_t kFingerprintGroupBytes = size_t{256} << 10;

// Adds the time from its construction to Stop() (or its end) to a stage's
// counter, if there is one.
class StageTimer {
 public:
  explicit StageTimer(prometheus::Counter* counter)
      : counter_(counter), start_(std::chrono::steady_clock::now()) {}
  ~StageTimer() { Stop(); }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

  void Stop() {
    if (counter_ == nullptr) return;
    const std::chrono::duration<double> elapsed =
        std::chrono::steady_clock::now() - start_;
    counter_->Increment(elapsed.count());
    counter_ = nullptr;
  }

 private:
  prometheus::Counter* counter_;
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace

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
  {
    StageTimer timer(options_.stages ? options_.stages->chunk : nullptr);
    chunker_->Append(piece, &scratch_);
  }
  return Emit(scratch_, out);
}

absl::Status StreamPipeline::Flush(std::vector<ChunkRecord>* out) {
  return Commit(out);
}

absl::Status StreamPipeline::Finish(std::vector<ChunkRecord>* out) {
  scratch_.clear();
  {
    StageTimer timer(options_.stages ? options_.stages->chunk : nullptr);
    chunker_->Finish(&scratch_);
  }
  absl::Status status = Emit(scratch_, out);
  if (!status.ok()) return status;
  return Commit(out);
}

absl::Status StreamPipeline::Emit(const std::vector<chunking::Chunk>& chunks,
                                  std::vector<ChunkRecord>* out) {
  if (chunks.empty()) return absl::OkStatus();
  // Dedup records wait in pending_ for their index batch.
  std::vector<ChunkRecord>* dest = options_.index == nullptr ? out : &pending_;
  const size_t first = dest->size();
  StageTimer fingerprint_timer(options_.stages ? options_.stages->fingerprint
                                               : nullptr);
  dest->resize(first + chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    (*dest)[first + i].offset = chunks[i].offset;
    (*dest)[first + i].length = chunks[i].length;
  }
  // Fingerprints in parallel on the engine's executor (the shared pool in
  // the service), in groups of about kFingerprintGroupBytes so a task is
  // worth its hand-off; each record keeps its place, so order is kept.
  std::vector<size_t> group_start = {0};
  size_t group_bytes = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    group_bytes += chunks[i].length;
    if (group_bytes >= kFingerprintGroupBytes && i + 1 < chunks.size()) {
      group_start.push_back(i + 1);
      group_bytes = 0;
    }
  }
  group_start.push_back(chunks.size());
  chunking::RunParallel(
      options_.engine.executor, group_start.size() - 1, [&](size_t g) {
        for (size_t i = group_start[g]; i < group_start[g + 1]; ++i) {
          (*dest)[first + i].fingerprint = fingerprint::Digest(
              options_.fingerprint, chunker_->ChunkData(chunks[i]));
        }
      });
  totals_.chunks += chunks.size();
  fingerprint_timer.Stop();
  if (pending_.size() >= kMaxPendingChunks) return Commit(out);
  return absl::OkStatus();
}

absl::Status StreamPipeline::Commit(std::vector<ChunkRecord>* out) {
  if (pending_.empty()) return absl::OkStatus();
  StageTimer index_timer(options_.stages ? options_.stages->index : nullptr);
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
