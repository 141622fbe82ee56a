#include "pipeline/stream_pipeline.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "pipeline/chunker_boundaries.h"
#include "pipeline/stage_clock.h"

namespace chunkd::pipeline {
namespace {

absl::Status Validate(const PipelineOptions& options) {
  if (options.index != nullptr &&
      options.fingerprint == fingerprint::Kind::kNone) {
    return absl::InvalidArgumentError(
        "fingerprint NONE cannot be used with Dedup: the index needs one");
  }
  if (options.hints == HintTest::kOff) return absl::OkStatus();
  if (options.index == nullptr) {
    return absl::InvalidArgumentError("hints apply to Dedup only");
  }
  if (options.chunking.algorithm != chunking::Algorithm::kFastCdc) {
    return absl::InvalidArgumentError(
        absl::StrCat("hints (RapidCDC) need algorithm fastcdc, not ",
                     chunking::AlgorithmName(options.chunking.algorithm),
                     "; set hints to HINT_TEST_OFF or leave it unset"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<StreamPipeline>> StreamPipeline::Create(
    PipelineOptions options) {
  absl::Status status = Validate(options);
  if (!status.ok()) return status;
  std::unique_ptr<StreamPipeline> pipeline(
      new StreamPipeline(std::move(options)));
  status = pipeline->Assemble();
  if (!status.ok()) return status;
  return pipeline;
}

StreamPipeline::StreamPipeline(PipelineOptions options)
    : options_(std::move(options)), hints_(options_.hints != HintTest::kOff) {}

absl::Status StreamPipeline::Assemble() {
  const PipelineOptions& o = options_;
  const std::string params_key = hints_ ? HintParamsKey(o.chunking) : "";
  // The hint cache holds SHA-256s: with hints and sha256 only.
  HintCache* const cache = hints_ && o.fingerprint == fingerprint::Kind::kSha256
                               ? o.hint_cache
                               : nullptr;
  const HintCache::Scope scope =
      cache != nullptr ? cache->ScopeOf(o.ns, params_key) : HintCache::Scope{};
  prometheus::Counter* const fingerprint_stage =
      StageCounter(o.stages, &metrics::StageCounters::fingerprint);
  fingerprints_ = std::make_unique<FingerprintStage>(
      FingerprintStage::Options{o.fingerprint, o.engine.executor, cache, scope,
                                o.hint_cache_all_chunks, fingerprint_stage});
  if (o.index != nullptr) {
    index_ = std::make_unique<IndexStage>(
        IndexStage::Options{
            o.index, o.ns, o.stream_id, params_key, cache, scope,
            StageCounter(o.stages, &metrics::StageCounters::index),
            fingerprint_stage},
        &totals_);
  }
  if (hints_) {
    auto follower = HintFollower::Create(
        {o.chunking, o.engine, o.hints, o.stages}, this, &totals_);
    if (!follower.ok()) return follower.status();
    boundaries_ = *std::move(follower);
    return absl::OkStatus();
  }
  auto chunker = ChunkerBoundaries::Create(
      o.chunking, o.engine, /*base=*/0, &totals_.chunk_seconds,
      StageCounter(o.stages, &metrics::StageCounters::chunk));
  if (!chunker.ok()) return chunker.status();
  boundaries_ = *std::move(chunker);
  return absl::OkStatus();
}

absl::Status StreamPipeline::Process(absl::string_view piece,
                                     std::vector<ChunkRecord>* out) {
  totals_.bytes += piece.size();
  return CutPiece(piece, /*at_end=*/false, out);
}

absl::Status StreamPipeline::NoInputWaiting(std::vector<ChunkRecord>* out) {
  return CommitIf(Moment::kNoInputWaiting, out);
}

absl::Status StreamPipeline::Finish(std::vector<ChunkRecord>* out) {
  absl::Status status = CutPiece(absl::string_view(), /*at_end=*/true, out);
  if (!status.ok()) return status;
  if (index_ != nullptr) index_->EndOfStream();
  return CommitIf(Moment::kEndOfStream, out);
}

absl::Status StreamPipeline::CutPiece(absl::string_view piece, bool at_end,
                                      std::vector<ChunkRecord>* out) {
  out_ = out;
  absl::Status status = boundaries_->CutChunks(piece, at_end, this);
  if (status.ok()) status = CommitIf(Moment::kCallEnds, out);
  out_ = nullptr;
  // The stream fails: nothing cut but not yet indexed is reported.
  if (!status.ok() && index_ != nullptr) index_->Discard();
  return status;
}

bool StreamPipeline::CommitsAt(Moment moment) const {
  switch (moment) {
    case Moment::kChunksAccepted:
      // With hints the batches end where the follower needs them to.
      return !hints_ && index_->pending() >= kMaxPendingChunks;
    case Moment::kCallEnds:
      // With hints every call commits its chunks: the hint cache keys the
      // duplicates among them from their bytes, valid during the call only.
      return hints_;
    case Moment::kLastChunkAsked:
    case Moment::kNoInputWaiting:
    case Moment::kEndOfStream:
      return true;
  }
  return true;
}

absl::Status StreamPipeline::CommitIf(Moment moment,
                                      std::vector<ChunkRecord>* out) {
  if (index_ == nullptr || !CommitsAt(moment)) return absl::OkStatus();
  // The index's calls run on this thread alone: the pool need not spin.
  if (options_.engine.executor != nullptr) options_.engine.executor->Rest();
  return index_->Commit(out);
}

absl::Status StreamPipeline::AcceptChunks(absl::Span<CutChunk> chunks) {
  fingerprints_->FingerprintChunks(chunks);
  totals_.chunks += chunks.size();
  if (index_ == nullptr) {
    for (CutChunk& chunk : chunks) {
      ChunkRecord& r = out_->emplace_back();
      r.offset = chunk.offset;
      r.length = static_cast<uint32_t>(chunk.bytes.size());
      r.fingerprint = std::move(chunk.fingerprint);
    }
    return absl::OkStatus();
  }
  index_->Enqueue(chunks);
  return CommitIf(Moment::kChunksAccepted, out_);
}

std::optional<HintCache::Entry> StreamPipeline::FingerprintOf(
    absl::string_view bytes, const HintCache::Key* key,
    std::string* fingerprint) {
  if (key != nullptr) {
    return fingerprints_->FingerprintViaCache(*key, bytes, fingerprint);
  }
  *fingerprint = fingerprints_->Digest(bytes);
  return std::nullopt;
}

void StreamPipeline::FingerprintsOf(
    absl::Span<const absl::string_view> chunks,
    absl::Span<const HintCache::Key> keys,
    std::vector<std::string>* fingerprints,
    std::vector<std::optional<HintCache::Entry>>* hits) {
  fingerprints_->FingerprintManyViaCache(chunks, keys, fingerprints, hits);
}

absl::StatusOr<index::NextHints> StreamPipeline::NextHintsOf(
    const std::string& fingerprint, const HintCache::Key* key) {
  return index_->NextHints(fingerprint, key);
}

absl::StatusOr<std::vector<index::NextHints>> StreamPipeline::NextHintsOf(
    absl::Span<const std::string> fingerprints,
    absl::Span<const HintCache::Key> keys) {
  return index_->NextHints(fingerprints, keys);
}

absl::StatusOr<std::optional<std::string>>
StreamPipeline::LastChunkIfDuplicate() {
  // Whether it is new, the index says once it is committed.
  absl::Status status = CommitIf(Moment::kLastChunkAsked, out_);
  if (!status.ok()) return status;
  if (index_->committed() == 0 || index_->last_is_new()) return std::nullopt;
  return index_->last_fingerprint();
}

}  // namespace chunkd::pipeline
