#include "pipeline/stream_pipeline.h"

#include <utility>

#include "chunking/executor.h"

namespace chunkd::pipeline {
namespace {

// Bytes of chunks one fingerprinting task hashes (about 0.1 ms of SHA-256).
constexpr size_t kFingerprintGroupBytes = size_t{256} << 10;

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
  out->resize(first + chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    (*out)[first + i].offset = chunks[i].offset;
    (*out)[first + i].length = chunks[i].length;
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
          (*out)[first + i].fingerprint = fingerprint::Digest(
              options_.fingerprint, chunker_->ChunkData(chunks[i]));
        }
      });
  totals_.chunks += chunks.size();
  if (options_.index == nullptr) return absl::OkStatus();

  std::vector<index::InsertEntry> entries;
  entries.reserve(chunks.size());
  for (size_t i = first; i < out->size(); ++i) {
    entries.push_back({(*out)[i].fingerprint, (*out)[i].length});
  }
  auto inserted = options_.index->Insert(options_.ns, entries);
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
