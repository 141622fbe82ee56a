#include "pipeline/stream_pipeline.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "pipeline/chunker_boundaries.h"
#include "pipeline/hint_follower.h"
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
    : options_(std::move(options)) {}

absl::Status StreamPipeline::Assemble() {
  const PipelineOptions& o = options_;
  const bool hints = o.hints != HintTest::kOff;
  const std::string params_key = hints ? HintParamsKey(o.chunking) : "";
  // The hint cache holds SHA-256s: with hints and sha256 only.
  HintCache* const cache = hints && o.fingerprint == fingerprint::Kind::kSha256
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
  if (hints) {
    auto follower =
        HintFollower::Create({o.chunking, o.engine, o.hints, o.stages},
                             fingerprints_.get(), index_.get(), &totals_);
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
  return Run(piece, /*at_end=*/false, out);
}

absl::Status StreamPipeline::Flush(std::vector<ChunkRecord>* out) {
  if (index_ == nullptr) return absl::OkStatus();
  // The index's calls run on this thread alone: the pool need not spin.
  if (options_.engine.executor != nullptr) options_.engine.executor->Rest();
  return index_->Commit(out);
}

absl::Status StreamPipeline::Finish(std::vector<ChunkRecord>* out) {
  absl::Status status = Run(absl::string_view(), /*at_end=*/true, out);
  if (!status.ok()) return status;
  if (index_ != nullptr) index_->EndOfStream();
  return Flush(out);
}

absl::Status StreamPipeline::Run(absl::string_view piece, bool at_end,
                                 std::vector<ChunkRecord>* out) {
  out_ = out;
  absl::Status status = boundaries_->Cut(piece, at_end, this);
  out_ = nullptr;
  // The stream fails: nothing cut but not yet indexed is reported.
  if (!status.ok() && index_ != nullptr) index_->Discard();
  return status;
}

absl::Status StreamPipeline::Take(absl::Span<CutChunk> cuts) {
  fingerprints_->Fill(cuts);
  totals_.chunks += cuts.size();
  if (index_ == nullptr) {
    for (CutChunk& cut : cuts) {
      ChunkRecord& r = out_->emplace_back();
      r.offset = cut.offset;
      r.length = static_cast<uint32_t>(cut.bytes.size());
      r.fingerprint = std::move(cut.fingerprint);
    }
    return absl::OkStatus();
  }
  index_->Add(cuts);
  // The hint follower commits by itself.
  if (options_.hints == HintTest::kOff &&
      index_->pending() >= kMaxPendingChunks) {
    return Flush(out_);
  }
  return absl::OkStatus();
}

absl::Status StreamPipeline::Commit() { return Flush(out_); }

}  // namespace chunkd::pipeline
