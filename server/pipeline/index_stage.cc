#include "pipeline/index_stage.h"

#include <utility>

#include "pipeline/rapid_cdc.h"
#include "pipeline/stage_clock.h"

namespace chunkd::pipeline {

IndexStage::IndexStage(Options options, StreamTotals* totals)
    : options_(std::move(options)), totals_(totals) {}

void IndexStage::Enqueue(absl::Span<CutChunk> cuts) {
  const bool hints = !options_.params_key.empty();
  for (CutChunk& cut : cuts) {
    if (hints) Learn(cut);
    if (options_.cache != nullptr && !cut.keyed) {
      unkeyed_.push_back({pending_.size(), cut.bytes});
    }
    ChunkRecord& r = pending_.emplace_back();
    r.offset = cut.offset;
    r.length = static_cast<uint32_t>(cut.bytes.size());
    r.fingerprint = std::move(cut.fingerprint);
  }
}

void IndexStage::Learn(const CutChunk& cut) {
  const uint32_t hint = EncodeHint(static_cast<uint32_t>(cut.bytes.size()),
                                   static_cast<uint8_t>(cut.bytes.back()));
  // Every chunk, learnable or not, goes on the runs of the hints before it.
  for (index::NextSize& open : open_) open.run.push_back(hint);
  if (!open_.empty() && open_.front().run.size() == index::kHintRunLength) {
    learned_.push_back(std::move(open_.front()));
    open_.pop_front();
  }
  if (cut.learnable && has_last_) {
    open_.emplace_back(last_fp_, hint).run.reserve(index::kHintRunLength);
    // The cache learns it too when it holds both chunks.
    if (cut.keyed && last_keyed_) options_.cache->Learn(last_key_, hint);
  }
  has_last_ = true;
  last_fp_ = cut.fingerprint;
  last_keyed_ = cut.keyed;
  if (cut.keyed) last_key_ = cut.key;
}

absl::Status IndexStage::Commit(std::vector<ChunkRecord>* out) {
  if (pending_.empty() && learned_.empty()) return absl::OkStatus();
  const size_t first = out->size();
  absl::Status status;
  {
    Stopwatch watch(nullptr, options_.index_stage);
    if (!pending_.empty()) status = Insert(out);
    if (status.ok()) status = RecordLearned();
  }
  if (status.ok()) CacheDuplicates(*out, first);
  unkeyed_.clear();
  return status;
}

absl::Status IndexStage::Insert(std::vector<ChunkRecord>* out) {
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
    token.first_position = committed_;
    token_ptr = &token;
  }
  auto inserted = options_.index->Insert(options_.ns, entries, token_ptr);
  if (!inserted.ok()) {
    Discard();
    return inserted.status();
  }
  committed_ += pending_.size();
  for (size_t i = 0; i < pending_.size(); ++i) {
    ChunkRecord& r = pending_[i];
    r.is_new = (*inserted)[i].is_new;
    if (r.is_new) {
      ++totals_->unique_chunks;
      totals_->unique_bytes += r.length;
    }
    out->push_back(std::move(r));
  }
  last_is_new_ = out->back().is_new;
  pending_.clear();
  return absl::OkStatus();
}

absl::Status IndexStage::RecordLearned() {
  // Only after their fingerprints are in: the index drops hints of
  // fingerprints it does not have.
  std::vector<index::NextSize> learned;
  learned.swap(learned_);
  if (learned.empty()) return absl::OkStatus();
  return options_.index->RecordNextSizes(options_.ns, options_.params_key,
                                         learned);
}

void IndexStage::CacheDuplicates(const std::vector<ChunkRecord>& records,
                                 size_t first) {
  if (unkeyed_.empty()) return;
  Stopwatch watch(nullptr, options_.fingerprint_stage);
  for (const Unkeyed& u : unkeyed_) {
    const ChunkRecord& r = records[first + u.index];
    if (r.is_new) continue;
    options_.cache->Put(options_.cache->KeyOf(options_.scope, u.bytes),
                        r.fingerprint);
  }
}

void IndexStage::EndOfStream() {
  for (index::NextSize& open : open_) learned_.push_back(std::move(open));
  open_.clear();
}

void IndexStage::Discard() {
  pending_.clear();
  unkeyed_.clear();
  open_.clear();
  learned_.clear();
}

absl::StatusOr<index::NextHints> IndexStage::NextHints(
    const std::string& fingerprint, const HintCache::Key* key) {
  auto hints = NextHints(absl::MakeConstSpan(&fingerprint, 1),
                         key == nullptr ? absl::Span<const HintCache::Key>()
                                        : absl::MakeConstSpan(key, 1));
  if (!hints.ok()) return hints.status();
  return std::move((*hints)[0]);
}

absl::StatusOr<std::vector<index::NextHints>> IndexStage::NextHints(
    absl::Span<const std::string> fingerprints,
    absl::Span<const HintCache::Key> keys) {
  absl::StatusOr<std::vector<index::NextHints>> hints;
  {
    Stopwatch watch(nullptr, options_.index_stage);
    hints = options_.index->NextHintsOf(options_.ns, options_.params_key,
                                        fingerprints);
  }
  if (!hints.ok() || keys.empty() || options_.cache == nullptr) return hints;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!(*hints)[i].sizes.empty()) {
      options_.cache->SetSizes(keys[i], (*hints)[i].sizes);
    }
  }
  return hints;
}

}  // namespace chunkd::pipeline
